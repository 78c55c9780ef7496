package resp

import (
	"errors"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// This file holds what the proxy says and reads in Redis pub/sub, in one
// place: the confirmations the proxy makes ([kind, name, count]), the
// PING reply of RESP2's subscribed mode, the messages it passes on, and
// the reading of what a subscribed server connection sends.
//
// The proxy's subscribed server connections always speak RESP2; what
// they send is read by ReadPush alone. A RESP3 client (codec.Request.Proto
// 3) gets the same frames as push types, as redis-server 7.0 sends them
// to a RESP3 client: '>' in place of the array's '*', and "_" for a null
// name. The elements of every pub/sub frame are bulk strings and
// integers, which both versions write alike, so the rest of the bytes
// are the server's own.

// Kinds of the frames of subscribed mode, as a server names them.
const (
	PushSubscribe    = "subscribe"
	PushUnsubscribe  = "unsubscribe"
	PushPsubscribe   = "psubscribe"
	PushPunsubscribe = "punsubscribe"
	PushSsubscribe   = "ssubscribe"
	PushSunsubscribe = "sunsubscribe"
	PushMessage      = "message"
	PushPmessage     = "pmessage"
	PushSmessage     = "smessage"
	PushPong         = "pong"
)

// ErrPush is the error of ReadPush for a frame that is no frame of
// subscribed mode.
var ErrPush = errors.New("resp: not a pub/sub frame")

// Push is a frame a subscribed server connection sent, as ReadPush reads
// it. Its slices point into the frame.
type Push struct {
	// Kind is one of the Push* names; empty for an error reply.
	Kind string
	// Name is the channel or pattern a confirmation names (nil when the
	// server had none to unsubscribe), the channel of a message or
	// smessage, the pattern of a pmessage.
	Name []byte
	// Channel is a pmessage's channel.
	Channel []byte
	// Count is a confirmation's subscription count.
	Count int64
	// Error is an error reply's line without its '-'.
	Error []byte
}

// pushKinds are the kinds a server sends, with their element counts.
var pushKinds = [...]struct {
	name  string
	elems int
}{
	{PushMessage, 3}, {PushPmessage, 4}, {PushSmessage, 3},
	{PushSubscribe, 3}, {PushUnsubscribe, 3}, {PushPsubscribe, 3},
	{PushPunsubscribe, 3}, {PushSsubscribe, 3}, {PushSunsubscribe, 3},
	{PushPong, 2},
}

// ReadPush reads one whole frame of subscribed mode (as a backend framed
// it): a message, a confirmation, a pong, or an error reply. Anything
// else is ErrPush.
func ReadPush(frame []byte) (Push, error) {
	n, v := redcon.ReadNextRESP(frame)
	if n != len(frame) || n == 0 {
		return Push{}, ErrPush
	}
	if v.Type == redcon.Error {
		return Push{Error: v.Data}, nil
	}
	if v.Type != redcon.Array || v.Count < 2 {
		return Push{}, ErrPush
	}
	elems := firstElements(v)
	if elems[0].Type != redcon.Bulk || elems[0].Data == nil {
		return Push{}, ErrPush
	}
	kind := pushKind(elems[0].Data, v.Count)
	if kind == "" {
		return Push{}, ErrPush
	}
	p, ok := readPushElements(kind, &elems)
	if !ok {
		return Push{}, ErrPush
	}
	return p, nil
}

// firstElements returns the first four elements of array v (zero where
// it has fewer).
func firstElements(v redcon.RESP) [4]redcon.RESP {
	var elems [4]redcon.RESP
	i := 0
	v.ForEach(func(e redcon.RESP) bool {
		if i < len(elems) {
			elems[i] = e
		}
		i++
		return i <= len(elems)
	})
	return elems
}

// pushKind returns the kind (PushMessage ...) a frame of count elements
// whose first is name has, or "" for none.
func pushKind(name []byte, count int) string {
	for _, k := range pushKinds {
		if equalFold(name, k.name) && count == k.elems {
			return k.name
		}
	}
	return ""
}

// readPushElements checks the types of a kind's elements after the
// first and reads them into a Push; false when a type is wrong.
func readPushElements(kind string, elems *[4]redcon.RESP) (Push, bool) {
	p := Push{Kind: kind, Name: elems[1].Data}
	switch kind {
	case PushMessage, PushSmessage, PushPong:
		if elems[1].Type != redcon.Bulk || elems[2].Type != redcon.Bulk && kind != PushPong {
			return Push{}, false
		}
	case PushPmessage:
		if elems[1].Type != redcon.Bulk || elems[2].Type != redcon.Bulk || elems[3].Type != redcon.Bulk {
			return Push{}, false
		}
		p.Channel = elems[2].Data
	default: // a confirmation: the name may be nil
		if elems[1].Type != redcon.Bulk || elems[2].Type != redcon.Integer {
			return Push{}, false
		}
		p.Count = elems[2].Int()
	}
	return p, true
}

// HasSubscribedMode reports whether a client of protocol version proto
// (codec.Request.Proto) enters Redis's subscribed mode while it holds a
// subscription: a RESP2 client does (only the (un)subscribe commands,
// PING, QUIT and RESET are served); a RESP3 client does not, since its
// messages are push frames no reply can be taken for.
func HasSubscribedMode(proto uint8) bool { return proto != proto3 }

// AppendSubscription appends a confirmation in the client's protocol
// proto (codec.Request.Proto): kind (PushSubscribe ...), the channel or
// pattern (nil, when there was none to unsubscribe: "$-1" in RESP2, "_"
// in RESP3), and the client's count after it. RESP3's is a push frame.
func AppendSubscription(dst []byte, kind string, name []byte, count int, proto uint8) []byte {
	if proto == proto3 {
		dst = append(dst, ">3\r\n"...)
	} else {
		dst = append(dst, "*3\r\n"...)
	}
	dst = redcon.AppendBulkString(dst, kind)
	if name == nil {
		dst = appendNull(dst, proto)
	} else {
		dst = redcon.AppendBulk(dst, name)
	}
	return redcon.AppendInt(dst, int64(count))
}

// AppendPong appends the reply to PING in RESP2's subscribed mode
// (a RESP3 client's PING is answered as ever): ["pong", arg],
// arg "" when the PING had none. req is the PING.
func AppendPong(dst []byte, req *codec.Request) []byte {
	var arg []byte
	if _, args, _, _, err := redcon.ReadNextCommand(req.Wire, nil); err == nil && len(args) > 1 {
		arg = args[1]
	}
	dst = append(dst, "*2\r\n"...)
	dst = redcon.AppendBulkString(dst, PushPong)
	return redcon.AppendBulk(dst, arg)
}

// AppendMessage appends a frame a subscribed server connection sent
// (RESP2: a message, pmessage or smessage, as ReadPush read it) as a client of protocol proto sees it: a RESP2
// client, as it is; a RESP3 client, as a push frame, its '*' made '>'.
func AppendMessage(dst, frame []byte, proto uint8) []byte {
	if proto == proto3 && len(frame) > 0 && frame[0] == '*' {
		dst = append(dst, '>')
		return append(dst, frame[1:]...)
	}
	return append(dst, frame...)
}

// AppendSubscribedOnly appends redis-server's refusal of command name
// (codec.Request.Name) in subscribed mode.
func AppendSubscribedOnly(dst []byte, name string) []byte {
	return redcon.AppendError(dst, "ERR Can't execute '"+name+
		"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
}

// EncodeCommand returns the wire form of a command the proxy sends on a
// subscribed connection: name and then args.
func EncodeCommand(name string, args [][]byte) []byte {
	size := bulkSize(len(name)) + 1 + digits(1+len(args)) + 2
	for _, a := range args {
		size += bulkSize(len(a))
	}
	b := make([]byte, 0, size)
	b = redcon.AppendArray(b, 1+len(args))
	b = redcon.AppendBulkString(b, name)
	for _, a := range args {
		b = redcon.AppendBulk(b, a)
	}
	return b
}

// Cmd numbers of the PUBSUB subcommands Merge reads.
var (
	cmdPubsubChannels = lookup("pubsub|channels")
	cmdPubsubShardCh  = lookup("pubsub|shardchannels")
	cmdPubsubNumsub   = lookup("pubsub|numsub")
	cmdPubsubShardNum = lookup("pubsub|shardnumsub")
	cmdPubsubNumpat   = lookup("pubsub|numpat")
)

// mergeChannels answers PUBSUB CHANNELS and SHARDCHANNELS: every channel
// some server has, once, in order of first appearance.
func mergeChannels(dst []byte, replies []codec.Reply) ([]byte, bool) {
	seen := map[string]bool{}
	var names [][]byte
	for _, r := range replies {
		vals, ok := readElements(r.Raw)
		if !ok {
			return dst, false
		}
		for _, v := range vals {
			name, null, ok := readString(v)
			if !ok || null {
				return dst, false
			}
			if !seen[string(name)] {
				seen[string(name)] = true
				names = append(names, name)
			}
		}
	}
	dst = redcon.AppendArray(dst, len(names))
	for _, n := range names {
		dst = redcon.AppendBulk(dst, n)
	}
	return dst, true
}

// mergeNumsub answers PUBSUB NUMSUB and SHARDNUMSUB: each server lists
// the channels asked for, in the client's order, with its count; the
// answer sums the counts per position.
func mergeNumsub(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var names [][]byte
	var counts []int64
	for i, r := range replies {
		vals, ok := readFields(r.Raw)
		if !ok || (i > 0 && len(vals) != 2*len(names)) {
			return dst, false
		}
		for k := range len(vals) / 2 {
			name, _, ok := readString(vals[2*k])
			count, cok := readInt(vals[2*k+1])
			switch {
			case !ok || !cok:
				return dst, false
			case i == 0:
				names, counts = append(names, name), append(counts, count)
			case string(name) != string(names[k]):
				return dst, false
			default:
				counts[k] += count
			}
		}
	}
	dst = redcon.AppendArray(dst, 2*len(names))
	for k, n := range names {
		dst = redcon.AppendBulk(dst, n)
		dst = redcon.AppendInt(dst, counts[k])
	}
	return dst, true
}

// mergeNumpat answers PUBSUB NUMPAT: the largest count. The proxy
// subscribes a client's pattern on every server of a sharded pool (and
// on one node of a cluster), so each server counts all of them: the
// largest count is the patterns subscribed through the proxy.
func mergeNumpat(dst []byte, replies []codec.Reply) ([]byte, bool) {
	return mergeInts(dst, replies, func(most, n int64) int64 { return max(most, n) })
}
