package resp

import (
	"bytes"
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// Cmd numbers the fan-out code needs by name.
var (
	cmdMGET         = lookup("mget")
	cmdMSET         = lookup("mset")
	cmdScriptExist  = lookup("script|exists")
	cmdScriptKill   = lookup("script|kill")
	cmdFunctionKill = lookup("function|kill")
	cmdKEYS         = lookup("keys")
	cmdDBSIZE       = lookup("dbsize")
	cmdRANDOMKEY    = lookup("randomkey")
	cmdFuncList     = lookup("function|list")
)

// Split implements codec.Dialect for the classMulti commands (MGET, MSET,
// DEL, UNLINK, EXISTS, TOUCH): one sub-request per distinct target in
// order of first appearance, carrying that target's keys (with their
// values, for MSET) in the client's order, duplicates kept, so that each
// server sees exactly the part of the request a single server would. It
// returns nil for any other request or when targets does not match
// req.Keys.
func (*Dialect) Split(req *codec.Request, targets []int, scratch *codec.SplitScratch) (subs []*codec.Request, subTargets, owners []int) {
	args, step := multiKeyArgs(req, targets)
	if args == nil {
		return nil, nil, nil
	}
	// Per sub-request: how many keys and how many bytes. The sub-requests
	// share one byte array and one key array, each its own capped stretch.
	var countsBuf, sizesBuf [16]int
	counts, sizes := countsBuf[:0], sizesBuf[:0]
	subTargets = scratch.TargetList()
	owners = scratch.OwnerList(len(targets))
	total := 0
	for i, t := range targets {
		j := indexOf(subTargets, t)
		owners = append(owners, j)
		if j < 0 {
			j = len(subTargets)
			owners[i] = j
			subTargets = append(subTargets, t)
			counts = append(counts, 0)
			sizes = append(sizes, bulkSize(len(req.Name)))
		}
		counts[j]++
		for _, a := range args[1+i*step : 1+(i+1)*step] {
			sizes[j] += bulkSize(len(a))
		}
	}
	for j := range sizes {
		sizes[j] += 1 + digits(1+counts[j]*step) + 2 // the array header
		total += sizes[j]
	}
	scratch.Keep(subTargets)
	buf, keys, reqs, subs := scratch.Grow(len(subTargets), len(targets), total)
	keys = keys[:len(targets)]
	for j := range subs {
		start := len(buf)
		b := buf[start : start : start+sizes[j]]
		b = redcon.AppendArray(b, 1+counts[j]*step)
		b = redcon.AppendBulkString(b, req.Name)
		buf = buf[:start+sizes[j]]
		s := &reqs[j]
		*s = codec.Request{Name: req.Name, Cmd: req.Cmd, Mode: req.Mode, Proto: req.Proto, Buf: b}
		s.Keys, keys = keys[:0:counts[j]], keys[counts[j]:]
		subs[j] = s
	}
	for i, j := range owners {
		s := subs[j]
		for k, a := range args[1+i*step : 1+(i+1)*step] {
			s.Buf = redcon.AppendBulk(s.Buf, a)
			if k == 0 {
				end := len(s.Buf) - 2
				s.Keys = append(s.Keys, s.Buf[end-len(a):end:end])
			}
		}
	}
	for _, s := range subs {
		s.Wire = s.Buf[:len(s.Buf):len(s.Buf)]
		s.Route = routeOf(classMulti, len(s.Keys))
	}
	return subs, subTargets, owners
}

// multiKeyArgs returns the arguments of a classMulti request that holds
// one key (MGET ...) or key and value (MSET) per target, and how many
// arguments each key takes; nil when req is no such request.
func multiKeyArgs(req *codec.Request, targets []int) (args [][]byte, step int) {
	c := commandOf(req.Cmd)
	if c == nil || c.class != classMulti || len(targets) != len(req.Keys) || len(targets) == 0 {
		return nil, 0
	}
	ok, args, _, _, err := redcon.ReadNextCommand(req.Wire, nil)
	step = max(c.step, 1)
	if !ok || err != nil || len(args) != 1+len(targets)*step {
		return nil, 0
	}
	return args, step
}

// bulkSize is the encoded length of an n-byte bulk string.
func bulkSize(n int) int { return 1 + digits(n) + 2 + n + 2 }

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Merge implements codec.Dialect.
//
// A failed fragment fails the whole request, as in twemproxy: a reply with
// Err gives "-ERR <Err>", and an error reply (the first, in sub-request
// order) is passed on as it is. Otherwise MGET answers the values in the
// client's key order, MSET "+OK", DEL, UNLINK, EXISTS and TOUCH the sum of
// the counts. Of the RouteAll requests, KEYS answers every server's keys
// (server by server), DBSIZE the sum, RANDOMKEY the key of a server picked
// at random among those that have one, SCRIPT EXISTS 1 for a script only
// when every server has it (EVALSHA goes to the server of its keys, so a
// script is there for every key only then), FUNCTION LIST the libraries
// when every server has the same (mergeLibraries), PUBSUB CHANNELS and
// SHARDCHANNELS every channel once, NUMSUB and SHARDNUMSUB the sum per
// channel, NUMPAT the largest count (mergeNumpat), CONFIG GET every
// parameter once (mergeConfigGet), DEBUG DIGEST the XOR of the digests
// and LASTSAVE the oldest (debug.go); the others (FLUSHDB, FLUSHALL,
// SCRIPT LOAD and FLUSH, FUNCTION LOAD, DELETE, FLUSH and RESTORE, CONFIG
// SET, RESETSTAT and REWRITE, SAVE, BGSAVE, DEBUG SLEEP ...) answer what
// every server answered, and an error when they disagree. FUNCTION DUMP
// answers a payload when every server has the same libraries, else an
// error naming the servers that differ (mergeFunctionDump). A failed
// fragment of a CONFIG, DEBUG or persistence request names its server
// (namesServer).
// INFO is the exception to failing as a whole: it answers what the
// servers that answered said, and names the others (mergeInfo).
func (d *Dialect) Merge(dst []byte, req *codec.Request, subs []*codec.Request, owners []int, replies []codec.Reply) []byte {
	switch req.Cmd {
	case cmdINFO:
		return mergeInfo(dst, req, replies)
	case cmdScriptKill, cmdFunctionKill:
		return mergeKill(dst, replies)
	case cmdFunctionDump:
		return d.mergeFunctionDump(dst, req, replies)
	}
	c := commandOf(req.Cmd)
	if out, failed := d.appendFailure(dst, c, replies); failed {
		return out
	}
	start := len(dst)
	dst, ok := mergeReplies(dst, req, c, subs, owners, replies)
	switch {
	case ok:
	case c != nil && c.class == classAll:
		return d.disagreement(dst[:start], req, c, replies)
	default:
		return d.AppendError(dst[:start], codec.ErrServer, "unexpected replies from the backends to "+req.Name)
	}
	return dst
}

// appendFailure appends the reply to a request one of whose fragments
// failed: "-ERR <Err>" for the first reply with Err, else the first error
// reply as it is. It reports false, dst unchanged, when none failed.
func (d *Dialect) appendFailure(dst []byte, c *command, replies []codec.Reply) ([]byte, bool) {
	for _, r := range replies {
		if r.Err != nil {
			msg := r.Err.Error()
			if c != nil && namesServer(c) && r.Server != "" {
				// Some servers may have applied it: say which did not, as
				// a cluster pool says which node failed.
				msg = "server " + r.Server + ": " + msg
			}
			return d.AppendError(dst, codec.ErrServer, msg), true
		}
	}
	for _, r := range replies {
		if r.Kind == codec.ReplyError || r.Kind == codec.ReplyFailure {
			return append(dst, r.Raw...), true
		}
	}
	return dst, false
}

// mergeReplies merges the successful replies to a split multi-key
// command (MGET, MSET, DEL ...) or to a command sent to every server
// (mergeAll); false when they are not what the command answers.
func mergeReplies(dst []byte, req *codec.Request, c *command, subs []*codec.Request, owners []int, replies []codec.Reply) ([]byte, bool) {
	switch {
	case c == nil || len(replies) == 0:
		return dst, false
	case req.Cmd == cmdMGET:
		return mergeValues(dst, req, subs, owners, replies)
	case req.Cmd == cmdMSET:
		return redcon.AppendOK(dst), true
	case c.class == classMulti:
		return mergeCounts(dst, replies)
	}
	return mergeAll(dst, req, c, replies)
}

// serverName names the server that gave r, the i-th reply (its number
// where the reply does not name it).
func serverName(r codec.Reply, i int) string {
	if r.Server != "" {
		return r.Server
	}
	return "#" + strconv.Itoa(i)
}

// mergeAll merges the successful replies to a command every server got.
func mergeAll(dst []byte, req *codec.Request, c *command, replies []codec.Reply) ([]byte, bool) {
	switch req.Cmd {
	case cmdScriptExist:
		return mergeExists(dst, replies)
	case cmdKEYS:
		return mergeArrays(dst, replies)
	case cmdDBSIZE:
		return mergeCounts(dst, replies)
	case cmdRANDOMKEY:
		return mergeRandom(dst, req.Proto, replies)
	case cmdFuncList:
		return mergeLibraries(dst, replies)
	case cmdPubsubChannels, cmdPubsubShardCh:
		return mergeChannels(dst, replies)
	case cmdPubsubNumsub, cmdPubsubShardNum:
		return mergeNumsub(dst, replies)
	case cmdPubsubNumpat:
		return mergeNumpat(dst, replies)
	case cmdConfigGet:
		return mergeConfigGet(dst, req, replies)
	case cmdFunctionStats:
		return mergeFunctionStats(dst, req.Proto, replies)
	case cmdLatencyReset:
		return mergeCounts(dst, replies)
	case cmdLatencyLatest:
		return mergeLatencyLatest(dst, replies)
	case cmdLatencyHistory:
		return mergeLatencyHistory(dst, replies)
	case cmdLatencyHistogram:
		return mergeLatencyHistogram(dst, req.Proto, replies)
	case cmdLatencyDoctor, cmdLatencyGraph:
		return mergeTexts(dst, req.Proto, replies)
	case cmdDebugDigest:
		return mergeDigest(dst, replies)
	case cmdLastsave:
		return mergeOldest(dst, replies)
	}
	if c.class == classAll {
		return mergeSame(dst, replies)
	}
	return dst, false
}

// mergeValues answers an MGET. Each sub-request's keys are in the client's
// order and its reply holds their values in that order, so each client key
// takes the next value of its owner's reply. Owners that do not fit req
// and subs (not Split's) fail the merge.
func mergeValues(dst []byte, req *codec.Request, subs []*codec.Request, owners []int, replies []codec.Reply) ([]byte, bool) {
	n := min(len(subs), len(replies))
	if len(owners) != len(req.Keys) {
		return dst, false
	}
	var buf [16][]byte
	rest := buf[:0] // each reply's elements not yet used
	if n > len(buf) {
		rest = make([][]byte, 0, n)
	}
	for j := range n {
		count, elems, ok := readArray(replies[j].Raw)
		if !ok || count != len(subs[j].Keys) {
			return dst, false
		}
		rest = append(rest, elems)
	}
	dst = redcon.AppendArray(dst, len(req.Keys))
	for _, j := range owners {
		if uint(j) >= uint(n) {
			return dst, false
		}
		m := nextValue(rest[j]) // RESP3's null "_" too
		if m == 0 {
			return dst, false
		}
		dst = append(dst, rest[j][:m]...)
		rest[j] = rest[j][m:]
	}
	return dst, true
}

// mergeCounts sums integer replies.
func mergeCounts(dst []byte, replies []codec.Reply) ([]byte, bool) {
	return mergeInts(dst, replies, func(sum, n int64) int64 { return sum + n })
}

// mergeInts answers the integer replies folded into one with fold, from
// the first reply's (0 for none); false when a reply is no integer.
func mergeInts(dst []byte, replies []codec.Reply, fold func(acc, n int64) int64) ([]byte, bool) {
	var acc int64
	for i, r := range replies {
		n, ok := readInt(r.Raw)
		if !ok {
			return dst, false
		}
		if i == 0 {
			acc = n
		} else {
			acc = fold(acc, n)
		}
	}
	return redcon.AppendInt(dst, acc), true
}

// mergeExists answers SCRIPT EXISTS: per script, the smallest answer.
func mergeExists(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var have []int64
	for i, r := range replies {
		m, v := redcon.ReadNextRESP(r.Raw)
		if m == 0 || v.Type != redcon.Array || (i > 0 && v.Count != len(have)) {
			return dst, false
		}
		j, ok := 0, true
		v.ForEach(func(e redcon.RESP) bool {
			if e.Type != redcon.Integer {
				ok = false
				return false
			}
			if i == 0 {
				have = append(have, e.Int())
			} else {
				have[j] = min(have[j], e.Int())
			}
			j++
			return true
		})
		if !ok {
			return dst, false
		}
	}
	dst = redcon.AppendArray(dst, len(have))
	for _, h := range have {
		dst = redcon.AppendInt(dst, h)
	}
	return dst, true
}

// mergeSame answers what every server answered alike.
func mergeSame(dst []byte, replies []codec.Reply) ([]byte, bool) {
	for _, r := range replies[1:] {
		if !bytes.Equal(r.Raw, replies[0].Raw) {
			return dst, false
		}
	}
	return append(dst, replies[0].Raw...), true
}

// The scripts a pool with redis_scripts: dedicated runs on connections
// of their own (codec.Options.DedicatedScripts).
var scriptCmds = [...]int{lookup("eval"), lookup("evalsha"), lookup("eval_ro"), lookup("evalsha_ro"),
	lookup("fcall"), lookup("fcall_ro")}

// isScript reports whether cmd runs a script or a function.
func isScript(cmd int) bool {
	for _, c := range scriptCmds {
		if c == cmd {
			return true
		}
	}
	return false
}

// mergeKill answers SCRIPT KILL or FUNCTION KILL sent to every server:
// the server that ran the script killed it (+OK), the others had none
// (-NOTBUSY); OK when one did, else the first other answer (a -NOTBUSY
// from all, an -UNKILLABLE, or the failure of one that did not answer).
func mergeKill(dst []byte, replies []codec.Reply) []byte {
	first := -1
	for i, r := range replies {
		switch {
		case r.Err == nil && r.Kind == codec.ReplyOK:
			return redcon.AppendOK(dst)
		case first < 0 || r.Err != nil || !bytes.HasPrefix(r.Raw, []byte("-NOTBUSY")):
			if first < 0 || bytes.HasPrefix(replies[first].Raw, []byte("-NOTBUSY")) {
				first = i
			}
		}
	}
	if first < 0 {
		return append(dst, "-NOTBUSY No scripts in execution right now.\r\n"...)
	}
	if r := replies[first]; r.Err != nil {
		return redcon.AppendError(dst, "ERR "+r.Err.Error())
	}
	return append(dst, replies[first].Raw...)
}
