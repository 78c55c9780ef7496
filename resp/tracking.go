package resp

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// Client-side caching (CLIENT TRACKING and its family) is the session's:
// it keeps what each client read and delivers the servers' invalidations
// (proxy/tracking.go). This file owns the words: a client's tracking
// state as Redis 7.0 keeps it, the commands that change or show it with
// redis-server's replies and errors, the invalidation messages a client
// sees, and the reading of the push frames a server sends.

// InvalidateChannel is the channel a RESP2 client subscribes to, on the
// connection another client's invalidations are redirected to.
const InvalidateChannel = "__redis__:invalidate"

// Redis's words for the tracking commands' errors.
const (
	replyRedirectTwice  = "-ERR A client can only redirect to a single other client\r\n"
	replyRedirectGone   = "-ERR The client ID you want redirect to does not exist\r\n"
	replyPrefixBCAST    = "-ERR PREFIX option requires BCAST mode to be enabled\r\n"
	replySwitchBCAST    = "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"
	replyOptBCAST       = "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"
	replyOptBoth        = "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"
	replySwitchOpt      = "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"
	replyCachingOff     = "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"
	replyCachingYes     = "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n"
	replyCachingNo      = "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"
	trackingCommandName = "client|tracking"
)

// Tracking is one client's tracking state, as Redis keeps it on a
// client: the zero value is tracking off. It belongs to the client's
// session reader.
type Tracking struct {
	On       bool
	Redirect int64 // the client invalidations go to; 0: the client itself
	BCAST    bool
	OptIn    bool
	OptOut   bool
	NoLoop   bool
	// Caching is CLIENT CACHING YES (OPTIN) or NO (OPTOUT) for the next
	// command.
	Caching bool
	// BrokenRedirect is set once the client redirected to is gone.
	BrokenRedirect bool
	Prefixes       []string // BCAST's, in the order given; "" for every key
}

// IsTrackingCommand reports whether name (codec.Request.Name) is one of
// the commands Tracking.Do answers.
func IsTrackingCommand(name string) bool {
	switch name {
	case trackingCommandName, "client|trackinginfo", "client|caching", "client|getredir":
		return true
	}
	return false
}

// Do runs req, a command IsTrackingCommand names, on t and appends its
// reply in the client's protocol. exists reports whether a client of
// that id may be redirected to. It returns whether a CLIENT TRACKING
// changed t (the caller then compares t with what it was).
func (t *Tracking) Do(dst []byte, req *codec.Request, exists func(id int64) bool) ([]byte, bool) {
	args := wireArgs(req.Wire)
	switch req.Name {
	case "client|getredir":
		return redcon.AppendInt(dst, t.redirect()), false
	case "client|trackinginfo":
		return t.appendInfo(dst, req.Proto), false
	case "client|caching":
		return append(dst, t.caching(args[0])...), false
	}
	next, errReply := t.parse(args, exists)
	if errReply != "" {
		return append(dst, errReply...), false
	}
	*t = next
	return redcon.AppendOK(dst), true
}

func (t *Tracking) redirect() int64 {
	if !t.On {
		return -1
	}
	return t.Redirect
}

// caching runs CLIENT CACHING YES|NO.
func (t *Tracking) caching(opt []byte) string {
	switch {
	case !t.On:
		return replyCachingOff
	case equalFold(opt, "yes") && !t.OptIn:
		return replyCachingYes
	case equalFold(opt, "no") && !t.OptOut:
		return replyCachingNo
	case !equalFold(opt, "yes") && !equalFold(opt, "no"):
		return replySyntax
	}
	t.Caching = true
	return "+OK\r\n"
}

// parse reads CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p]...
// [OPTIN] [OPTOUT] [NOLOOP] and returns the state it leads to, or the
// error redis-server answers, in its order of checks.
func (t *Tracking) parse(args [][]byte, exists func(int64) bool) (Tracking, string) {
	var next Tracking
	for j := 1; j < len(args); j++ {
		more := len(args) - 1 - j
		switch opt := args[j]; {
		case equalFold(opt, "redirect") && more > 0:
			j++
			if next.Redirect != 0 {
				return next, replyRedirectTwice
			}
			id, ok := parseInt(args[j])
			if !ok {
				return next, replyNotInteger
			}
			if !exists(id) {
				return next, replyRedirectGone
			}
			next.Redirect = id
		case equalFold(opt, "bcast"):
			next.BCAST = true
		case equalFold(opt, "optin"):
			next.OptIn = true
		case equalFold(opt, "optout"):
			next.OptOut = true
		case equalFold(opt, "noloop"):
			next.NoLoop = true
		case equalFold(opt, "prefix") && more > 0:
			j++
			next.Prefixes = append(next.Prefixes, string(args[j]))
		default:
			return next, replySyntax
		}
	}
	switch {
	case equalFold(args[0], "off"):
		return Tracking{}, ""
	case !equalFold(args[0], "on"):
		return next, replySyntax
	}
	if errReply := t.checkOn(&next); errReply != "" {
		return next, errReply
	}
	next.On = true
	if next.BCAST {
		next.Prefixes = t.addPrefixes(next.Prefixes)
	}
	return next, ""
}

// checkOn checks a CLIENT TRACKING ON's options against each other and
// against the state the client is in.
func (t *Tracking) checkOn(next *Tracking) string {
	switch {
	case !next.BCAST && len(next.Prefixes) > 0:
		return replyPrefixBCAST
	case t.On && t.BCAST != next.BCAST:
		return replySwitchBCAST
	case next.BCAST && (next.OptIn || next.OptOut):
		return replyOptBCAST
	case next.OptIn && next.OptOut:
		return replyOptBoth
	case (next.OptIn && t.OptOut) || (next.OptOut && t.OptIn):
		return replySwitchOpt
	}
	if next.BCAST {
		return t.prefixCollision(next.Prefixes)
	}
	return ""
}

// prefixCollision returns the error for the first of prefixes that
// overlaps one the client tracks or another of prefixes (one is a
// prefix of the other), as redis-server words it.
func (t *Tracking) prefixCollision(prefixes []string) string {
	for i, p := range prefixes {
		for _, have := range t.Prefixes {
			if overlaps(have, p) {
				return errorLine("Prefix '" + p + "' overlaps with an existing prefix '" + have +
					"'. Prefixes for a single client must not overlap.")
			}
		}
		for _, q := range prefixes[i+1:] {
			if overlaps(p, q) {
				return errorLine("Prefix '" + p + "' overlaps with another provided prefix '" + q +
					"'. Prefixes for a single client must not overlap.")
			}
		}
	}
	return ""
}

// overlaps reports whether one of a and b is a prefix of the other.
func overlaps(a, b string) bool {
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// addPrefixes returns the client's prefixes with added, "" (every key)
// when there are none: a BCAST client's prefixes accumulate while it
// stays on, as in Redis.
func (t *Tracking) addPrefixes(added []string) []string {
	var out []string
	if t.On && t.BCAST {
		out = append(out, t.Prefixes...)
	}
	if len(added) == 0 {
		added = []string{""}
	}
	for _, p := range added {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// appendInfo appends CLIENT TRACKINGINFO's reply: a map (RESP2: an array
// of fields and values) of flags, redirect and prefixes.
func (t *Tracking) appendInfo(dst []byte, proto uint8) []byte {
	flags := []string{"off"}
	if t.On {
		flags[0] = "on"
	}
	add := func(on bool, name string) {
		if on {
			flags = append(flags, name)
		}
	}
	add(t.BCAST, "bcast")
	add(t.OptIn, "optin")
	add(t.OptIn && t.Caching, "caching-yes")
	add(t.OptOut, "optout")
	add(t.OptOut && t.Caching, "caching-no")
	add(t.NoLoop, "noloop")
	add(t.BrokenRedirect, "broken_redirect")
	dst = appendFieldsHeader(dst, 3, proto)
	dst = redcon.AppendBulkString(dst, "flags")
	dst = appendSetHeader(dst, len(flags), proto)
	for _, f := range flags {
		dst = redcon.AppendBulkString(dst, f)
	}
	dst = redcon.AppendBulkString(dst, "redirect")
	dst = redcon.AppendInt(dst, t.redirect())
	dst = redcon.AppendBulkString(dst, "prefixes")
	dst = redcon.AppendArray(dst, len(t.Prefixes))
	for _, p := range t.Prefixes {
		dst = redcon.AppendBulkString(dst, p)
	}
	return dst
}

// appendSetHeader appends the header of a set of n elements: RESP3's
// set, RESP2's array.
func appendSetHeader(dst []byte, n int, proto uint8) []byte {
	if proto == proto3 {
		dst = strconv.AppendInt(append(dst, '~'), int64(n), 10)
		return append(dst, "\r\n"...)
	}
	return redcon.AppendArray(dst, n)
}

// Tracks reports whether a request read by a client in state t makes
// the client track the keys it reads (default mode), as Redis's
// trackingRememberKeys decides; readOnly is the command's read-only flag.
func (t *Tracking) Tracks(readOnly bool) bool {
	switch {
	case !t.On || t.BCAST || !readOnly:
		return false
	case t.OptIn:
		return t.Caching
	case t.OptOut:
		return !t.Caching
	}
	return true
}

// AppendInvalidate appends the invalidation of keys (nil: every key, as
// after a FLUSHALL) as a client of protocol proto receives it: RESP3's
// push frame [invalidate, keys], or for RESP2 (a connection that
// subscribed to InvalidateChannel) a message on that channel whose
// payload is the keys.
func AppendInvalidate(dst []byte, keys []string, proto uint8) []byte {
	if proto == proto3 {
		dst = append(dst, ">2\r\n$10\r\ninvalidate\r\n"...)
	} else {
		dst = append(dst, "*3\r\n$7\r\nmessage\r\n$20\r\n"+InvalidateChannel+"\r\n"...)
	}
	if keys == nil {
		return appendNull(dst, proto)
	}
	dst = redcon.AppendArray(dst, len(keys))
	for _, k := range keys {
		dst = redcon.AppendBulkString(dst, k)
	}
	return dst
}

// AppendRedirectBroken appends the push frame a RESP3 client gets when
// the client it redirected its invalidations to is gone.
func AppendRedirectBroken(dst []byte, id int64) []byte {
	dst = append(dst, ">2\r\n$21\r\ntracking-redir-broken\r\n"...)
	return redcon.AppendInt(dst, id)
}

// ReadInvalidate reads a push frame a RESP3 server connection with
// tracking on sends: an invalidation's keys, or all true for a null (the
// server flushed, every key is invalid). ok is false for any other
// frame. The keys are slices of frame.
func ReadInvalidate(frame []byte) (keys [][]byte, all, ok bool) {
	count, rest, ok := readHeader(frame, '>')
	if !ok || count != 2 {
		return nil, false, false
	}
	vals, ok := splitValues(rest, 2)
	if !ok {
		return nil, false, false
	}
	if kind, null, ok := readString(vals[0]); !ok || null || string(kind) != "invalidate" {
		return nil, false, false
	}
	if _, null, ok := readString(vals[1]); ok && null {
		return nil, true, true
	}
	elems, ok := readElements(vals[1])
	if !ok {
		return nil, false, false
	}
	keys = make([][]byte, 0, len(elems))
	for _, e := range elems {
		k, null, ok := readString(e)
		if !ok || null {
			return nil, false, false
		}
		keys = append(keys, k)
	}
	return keys, false, true
}

// Proto3 is codec.Request.Proto for a RESP3 client.
const Proto3 = proto3

// IsRESP3 reports whether proto (codec.Request.Proto) is RESP3's.
func IsRESP3(proto uint8) bool { return proto == proto3 }

// ClientOf returns the id CLIENT ID answers to the client of rp, a parser
// of this dialect, and the protocol it speaks as codec.Request.Proto
// says it (0 RESP2, 3 RESP3); ok is false for another dialect's parser.
// It is safe on any goroutine.
func ClientOf(rp codec.RequestParser) (id int64, proto uint8, ok bool) {
	p, ok := rp.(*parser)
	if !ok {
		return 0, 0, false
	}
	if ident := p.shared.Load(); ident != nil {
		proto = ident.proto
	}
	return p.id, proto, true
}

// trackingMaxKeys reports whether the CONFIG SET being parsed gives
// tracking-table-max-keys a number.
func (p *parser) trackingMaxKeys() (int64, bool) { return maxKeysArg(p.clientArgs()) }

// TrackingMaxKeys returns the value req, a CONFIG SET, gives
// tracking-table-max-keys, whose table of keys read the proxy keeps per
// pool as a server keeps its own: 0 is no limit.
func TrackingMaxKeys(req *codec.Request) (int64, bool) {
	if req.Cmd != cmdConfigSet {
		return 0, false
	}
	return maxKeysArg(wireArgs(req.Wire))
}

// maxKeysArg reads tracking-table-max-keys's value from CONFIG SET's
// parameter and value pairs.
func maxKeysArg(args [][]byte) (int64, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if equalFold(args[i], "tracking-table-max-keys") {
			n, ok := parseInt(args[i+1])
			return n, ok && n >= 0
		}
	}
	return 0, false
}
