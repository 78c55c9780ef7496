package resp

import "shardproxy/codec"

//go:generate go run ./internal/gencommands -o commands_gen.go

// class says how the proxy carries a command.
type class uint8

const (
	// classUnsupported commands are answered with an error naming the
	// command and command.reason; the connection stays open.
	classUnsupported class = iota
	// classKey commands have one key: codec.RouteKey.
	classKey
	// classMulti commands (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH) are split
	// per server and their replies merged: codec.RouteMulti.
	classMulti
	// classSame commands need every key on one server: codec.RouteSame.
	classSame
	// classLocal commands are answered by the proxy: codec.RouteLocal.
	classLocal
	// classAny commands go to any one server: codec.RouteAny.
	classAny
	// classAll commands go to every server: codec.RouteAll.
	classAll
	// classContainer commands (CLIENT, OBJECT, ...) are dispatched on their
	// subcommand.
	classContainer
	// classBlock commands (BLPOP, BLMOVE, BZMPOP, ...) may wait for data:
	// codec.RouteBlock.
	classBlock
	// classPin commands keep state on the server connection (MULTI, EXEC,
	// DISCARD, WATCH, UNWATCH, WAIT): codec.RoutePin, command.pin.
	classPin
	// classServer commands go to the server the request names (SCAN, by
	// its cursor): codec.RouteServer.
	classServer
	// classSub commands subscribe or unsubscribe the client (SUBSCRIBE,
	// PUNSUBSCRIBE, ...): codec.RouteSubscribe, command.sub.
	classSub
)

// blockRule says where a blocking command's timeout is.
type blockRule uint8

const (
	blockNone  blockRule = iota
	blockLast            // the last argument, in seconds (BLPOP, BLMOVE, ...)
	blockFirst           // argument 1, in seconds (BLMPOP, BZMPOP)
	blockMs2             // argument 2, in milliseconds (WAIT)
)

// keyRule says where a command's keys are.
type keyRule uint8

const (
	// keysRange: arguments first to last (negative: counted from the end)
	// in steps of step, as COMMAND reports them.
	keysRange keyRule = iota
	// keysNumkeys: the range (a store destination, or nothing), then as
	// many keys as the argument at keyArg says, right after it (EVAL,
	// ZUNIONSTORE, LMPOP, ...).
	keysNumkeys
	// keysStreams: XREAD and XREADGROUP, the first half of the arguments
	// after STREAMS.
	keysStreams
	// keysSort: SORT's key and the destination of its last STORE option.
	keysSort
	// keysGeo: GEORADIUS(BYMEMBER)'s key and the destinations of its first
	// STORE and first STOREDIST option from argument keyArg on, as its key
	// specs give them.
	keysGeo
	// keysChannel: PUBLISH's channel, argument 1, which the proxy routes
	// as a key so that PUBLISH meets SUBSCRIBE on the channel's server.
	keysChannel
	// keysAllArgs: every argument after the name, the channels or
	// patterns of (P)SUBSCRIBE and (P)UNSUBSCRIBE.
	keysAllArgs
)

// localCmd names a command the proxy answers itself.
type localCmd uint8

const (
	localNone localCmd = iota
	localPing
	localEcho
	localQuit
	localSelect
	localAuth
	localHello
	localReset
	localInfo
	localClientSetname
	localClientGetname
	localClientID
	localClientSetinfo
	localClientList
	localClientInfo
	localClientKill
	localClientNoEvict
	localClientTracking // CLIENT TRACKING, TRACKINGINFO, CACHING, GETREDIR: the session answers
	localClusterOK
	localClusterSlots
	localClusterShards
	localClusterNodes
	localClusterInfo
	localClusterMyID
	localClusterKeyslot
	localSlowlogGet
	localSlowlogLen
	localSlowlogReset
	localClientReply // CLIENT REPLY ON|OFF|SKIP: the session mutes its client (ClientReply)
)

// command is one row of the command table (commands_gen.go).
type command struct {
	// name is the full lower-case name, "get" or "client|setname"; it is
	// also codec.Request.Name.
	name string
	// arity is Redis's: n means exactly n arguments (the name included),
	// -n at least n.
	arity int
	// first, last and step are the key positions COMMAND reports.
	first, last, step int
	class             class
	keys              keyRule
	// keyArg is the argument holding the key count (keysNumkeys), or the
	// first option (keysGeo).
	keyArg int
	local  localCmd
	// bare is the class of a container called without a subcommand
	// (COMMAND), or classUnsupported when that is an arity error.
	bare class
	// reason says why an unsupported command is not carried, or why an
	// every command is not where the pool cannot reach every server.
	reason string
	// every commands span every server's keys: a parser without
	// codec.Options.Keyspace refuses them with reason.
	every bool
	// serverConfig commands (CONFIG GET, SET, RESETSTAT, REWRITE) read or
	// change every server's settings: a parser without
	// codec.Options.ServerConfig refuses them with reason.
	serverConfig bool
	// clusterView commands (CLUSTER SLOTS, NODES, ..., READONLY) are
	// answered by a pool that shows its proxies as a Redis Cluster
	// (codec.Options.ClusterView), refused elsewhere.
	clusterView bool
	// txOne commands go to every server, but inside a transaction to its
	// own server (codec.Request.TxOne): DEBUG's.
	txOne bool
	// noAuth commands run before AUTH (AUTH, HELLO, QUIT, RESET).
	noAuth bool
	// block says where the timeout of a classBlock command (and WAIT) is.
	block blockRule
	// pin is what a classPin command does.
	pin codec.Pin
	// sub is what a classSub command does.
	sub codec.Sub
}

// The command names' hash table, in place of a map: open addressing over
// the FNV-1a hash of the lower-case name, which resolve computes as it
// lowers the name, so a request's name is read once. Slots are at least
// four times the names, so a lookup probes about once. (A map hashed the
// lowered name again and took a quarter of the time to parse a GET.)
var nameSlots, nameMask = nameTable() // Cmd numbers, 0 for an empty slot

func nameTable() ([]uint16, uint32) {
	n := 1
	for n < 4*len(commandTable) {
		n *= 2
	}
	slots, mask := make([]uint16, n), uint32(n-1)
	for i := range commandTable {
		if i+1 > 1<<16-1 {
			panic("resp: too many commands for the name table")
		}
		slot := hashName(commandTable[i].name) & mask
		for slots[slot] != 0 {
			slot = (slot + 1) & mask
		}
		slots[slot] = uint16(i + 1)
	}
	return slots, mask
}

// nameHash is FNV-1a's offset basis; hashByte adds a byte.
const nameHash uint32 = 2166136261

func hashByte(h uint32, c byte) uint32 { return (h ^ uint32(c)) * 16777619 }

func hashName[T string | []byte](name T) uint32 {
	h := nameHash
	for i := range len(name) {
		h = hashByte(h, name[i])
	}
	return h
}

// lookup returns the Cmd number of a lower-case full name, or 0.
func lookup[T string | []byte](name T) int { return lookupHashed(name, hashName(name)) }

// lookupHashed is lookup for a name whose hash the caller computed.
func lookupHashed[T string | []byte](name T, h uint32) int {
	for slot := h & nameMask; ; slot = (slot + 1) & nameMask {
		cmd := nameSlots[slot]
		if cmd == 0 || commandTable[cmd-1].name == string(name) {
			return int(cmd)
		}
	}
}

// commandOf returns the table row of a Cmd number, or nil.
func commandOf(cmd int) *command {
	if cmd <= 0 || cmd > len(commandTable) {
		return nil
	}
	return &commandTable[cmd-1]
}

// CommandName returns the full lower-case name of a Cmd number ("get",
// "client|setname"), or "" for a number that is no command.
func CommandName(cmd int) string {
	if c := commandOf(cmd); c != nil {
		return c.name
	}
	return ""
}

// argCountOK reports whether argc arguments satisfy the arity.
func (c *command) argCountOK(argc int) bool {
	if c.arity >= 0 {
		return argc == c.arity
	}
	return argc >= -c.arity
}

// keyRange appends the positions first..last step of an argc-argument
// request to dst.
func (c *command) keyRange(dst []int, argc int) []int {
	if c.first <= 0 {
		return dst
	}
	last := c.last
	if last < 0 {
		last += argc
	}
	step := max(c.step, 1)
	for i := c.first; i <= last && i < argc; i += step {
		dst = append(dst, i)
	}
	return dst
}

// argView is what key extraction reads: the arguments of one request.
type argView interface {
	argc() int
	arg(i int) []byte
}

// keyPositions appends the argument positions of a's keys to dst. blocked
// reports a request that would block the server connection (XREAD BLOCK).
// A request whose keys cannot be found (a bad numkeys, no STREAMS) gets
// none: it then goes to any one server, which answers its error.
func (c *command) keyPositions(dst []int, a argView) (_ []int, blocked bool) {
	argc := a.argc()
	switch c.keys {
	case keysNumkeys:
		return numkeysPositions(dst, c, a), false
	case keysStreams:
		return streamsPositions(dst, a)
	case keysSort:
		return sortPositions(dst, a), false
	case keysGeo:
		return geoPositions(dst, a, c.keyArg), false
	case keysChannel:
		return append(dst, 1), false
	case keysAllArgs:
		for i := 1; i < argc; i++ {
			dst = append(dst, i)
		}
		return dst, false
	}
	return c.keyRange(dst, argc), false
}

// numkeysPositions: redis-server's genericGetKeys. With a count that is no
// number, below one or above the arguments left, there are no keys at all.
func numkeysPositions(dst []int, c *command, a argView) []int {
	argc := a.argc()
	if c.keyArg >= argc {
		return dst
	}
	n, ok := parseInt(a.arg(c.keyArg))
	firstKey := c.keyArg + 1
	if !ok || n < 1 || n > int64(argc-firstKey) {
		return dst
	}
	dst = c.keyRange(dst, argc)
	for i := range int(n) {
		dst = append(dst, firstKey+i)
	}
	return dst
}

// streamsPositions: redis-server's xreadGetKeys, which skips the options
// before STREAMS; a BLOCK option among them blocks.
func streamsPositions(dst []int, a argView) (_ []int, blocked bool) {
	argc := a.argc()
	streams := -1
options:
	for i := 1; i < argc; i++ {
		switch {
		case equalFold(a.arg(i), "block"):
			blocked = true
			i++
		case equalFold(a.arg(i), "count"):
			i++
		case equalFold(a.arg(i), "group"):
			i += 2
		case equalFold(a.arg(i), "noack"):
		case equalFold(a.arg(i), "streams"):
			streams = i
			break options
		default:
			break options
		}
	}
	num := argc - streams - 1
	if streams < 0 || num == 0 || num%2 != 0 {
		return dst, blocked
	}
	for i := streams + 1; i < streams+1+num/2; i++ {
		dst = append(dst, i)
	}
	return dst, blocked
}

// sortPositions: redis-server's sortGetKeys: key 1 and the destination
// of the last STORE option, skipping the arguments of LIMIT, GET and BY.
func sortPositions(dst []int, a argView) []int {
	argc := a.argc()
	dst = append(dst, 1)
	store := 0
	for i := 2; i < argc; i++ {
		arg := a.arg(i)
		switch {
		case equalFold(arg, "limit"):
			i += 2
		case equalFold(arg, "get") || equalFold(arg, "by"):
			i++
		case equalFold(arg, "store") && i+1 < argc:
			store = i + 1
		}
	}
	if store > 0 {
		dst = append(dst, store)
	}
	return dst
}

// geoPositions: GEORADIUS's key specs, which redis-server's COMMAND
// GETKEYS and cluster slot checks use: key 1, then for each of the
// keywords STORE and STOREDIST the argument after its first occurrence at
// or after from (the last argument is never a keyword).
func geoPositions(dst []int, a argView, from int) []int {
	argc := a.argc()
	dst = append(dst, 1)
	for _, kw := range [...]string{"store", "storedist"} {
		for i := from; i < argc-1; i++ {
			if equalFold(a.arg(i), kw) {
				dst = append(dst, i+1)
				break
			}
		}
	}
	return dst
}

// equalFold reports whether b is the lower-case ASCII word w in any case.
func equalFold(b []byte, w string) bool {
	if len(b) != len(w) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != w[i] {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
