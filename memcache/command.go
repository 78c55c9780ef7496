package memcache

import "shardproxy/codec"

// Command numbers, stored in codec.Request.Cmd by the parser. Zero is no
// command.
const (
	CmdGet = iota + 1
	CmdGets
	CmdGat
	CmdGats
	CmdSet
	CmdAdd
	CmdReplace
	CmdAppend
	CmdPrepend
	CmdCAS
	CmdIncr
	CmdDecr
	CmdTouch
	CmdDelete
	CmdFlushAll
	CmdVerbosity
	CmdVersion
	CmdQuit
	CmdStats
	CmdMetaGet        // mg
	CmdMetaSet        // ms
	CmdMetaDelete     // md
	CmdMetaArithmetic // ma
	CmdMetaDebug      // me
	CmdMetaNoop       // mn
	CmdWatch          // watch, with codec.Options.ProxyErrors only
	numCmds
)

// cmdNames holds each command's wire name, which is also codec.Request.Name.
var cmdNames = [numCmds]string{
	CmdGet:            "get",
	CmdGets:           "gets",
	CmdGat:            "gat",
	CmdGats:           "gats",
	CmdSet:            "set",
	CmdAdd:            "add",
	CmdReplace:        "replace",
	CmdAppend:         "append",
	CmdPrepend:        "prepend",
	CmdCAS:            "cas",
	CmdIncr:           "incr",
	CmdDecr:           "decr",
	CmdTouch:          "touch",
	CmdDelete:         "delete",
	CmdFlushAll:       "flush_all",
	CmdVerbosity:      "verbosity",
	CmdVersion:        "version",
	CmdQuit:           "quit",
	CmdStats:          "stats",
	CmdMetaGet:        "mg",
	CmdMetaSet:        "ms",
	CmdMetaDelete:     "md",
	CmdMetaArithmetic: "ma",
	CmdMetaDebug:      "me",
	CmdMetaNoop:       "mn",
	CmdWatch:          "watch",
}

// CommandName returns the wire name of a command number ("get", "ms"), or ""
// for a number that is no command.
func CommandName(cmd int) string {
	if cmd <= 0 || cmd >= numCmds {
		return ""
	}
	return cmdNames[cmd]
}

// lookupCommand returns the command number of verb, or 0. Verbs are case
// sensitive, as in memcached ("GET" is unknown). The verbs are switched
// on by length first, then compared whole: the compiler compares a short
// constant as one or two integers.
func lookupCommand(verb []byte) int {
	switch len(verb) {
	case 2:
		return metaCommand(verb)
	case 3, 4:
		return shortCommand(verb)
	}
	return longCommand(verb)
}

// metaCommand is lookupCommand for a two-byte verb: mg, ms, md, ma, me,
// mn.
func metaCommand(verb []byte) int {
	if verb[0] != 'm' {
		return 0
	}
	switch verb[1] {
	case 'g':
		return CmdMetaGet
	case 's':
		return CmdMetaSet
	case 'd':
		return CmdMetaDelete
	case 'a':
		return CmdMetaArithmetic
	case 'e':
		return CmdMetaDebug
	case 'n':
		return CmdMetaNoop
	}
	return 0
}

// shortCommand is lookupCommand for a verb of three or four bytes.
func shortCommand(verb []byte) int {
	switch string(verb) {
	case "get":
		return CmdGet
	case "gets":
		return CmdGets
	case "gat":
		return CmdGat
	case "gats":
		return CmdGats
	case "set":
		return CmdSet
	case "add":
		return CmdAdd
	case "cas":
		return CmdCAS
	case "incr":
		return CmdIncr
	case "decr":
		return CmdDecr
	case "quit":
		return CmdQuit
	}
	return 0
}

// longCommand is lookupCommand for a verb of five bytes or more.
func longCommand(verb []byte) int {
	switch string(verb) {
	case "replace":
		return CmdReplace
	case "append":
		return CmdAppend
	case "prepend":
		return CmdPrepend
	case "touch":
		return CmdTouch
	case "delete":
		return CmdDelete
	case "flush_all":
		return CmdFlushAll
	case "verbosity":
		return CmdVerbosity
	case "version":
		return CmdVersion
	case "stats":
		return CmdStats
	case "watch":
		return CmdWatch
	}
	return 0
}

// notCarried returns the name of a memcached 1.6 command the proxy knows
// but does not carry (server administration, debugging, the undocumented
// bget), or "" when verb is none of them.
func notCarried(verb []byte) string {
	switch string(verb) {
	case "shutdown":
		return "shutdown"
	case "cache_memlimit":
		return "cache_memlimit"
	case "memlimit":
		return "memlimit"
	case "slabs":
		return "slabs"
	case "lru":
		return "lru"
	case "lru_crawler":
		return "lru_crawler"
	case "watch":
		return "watch"
	case "extstore":
		return "extstore"
	case "misbehave":
		return "misbehave"
	case "debugtime":
		return "debugtime"
	case "refresh_certs":
		return "refresh_certs"
	case "bget":
		return "bget"
	}
	return ""
}

// isRetrieval reports whether cmd is get, gets, gat or gats.
func isRetrieval(cmd int) bool { return cmd >= CmdGet && cmd <= CmdGats }

// isOneKeyGet reports whether req is a get or gets of one key.
func isOneKeyGet(req *codec.Request) bool {
	return len(req.Keys) == 1 && (req.Cmd == CmdGet || req.Cmd == CmdGets)
}

// isTouching reports whether cmd is gat or gats (exptime before the keys).
func isTouching(cmd int) bool { return cmd == CmdGat || cmd == CmdGats }

// isStorage reports whether cmd is a classic storage command with a value.
func isStorage(cmd int) bool { return cmd >= CmdSet && cmd <= CmdCAS }

// isMeta reports whether cmd is a meta command a backend answers.
func isMeta(cmd int) bool { return cmd >= CmdMetaGet && cmd <= CmdMetaDebug }
