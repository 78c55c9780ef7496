package memcache

import (
	"cmp"
	"strings"

	"shardproxy/codec"
	"shardproxy/internal/mcbase64"
)

// This file validates each kind of request line the way memcached 1.6.18
// does (token counts, numbers, key length, in its order, with its wording)
// and builds the codec.Request.

// wire says how a request's bytes become req.Wire.
type wire struct {
	n     int  // bytes of the client's buffer the request uses
	eol   int  // index of the line's '\n'
	cut   int  // > 0: the line is rewritten as buf[:cut] (trailing spaces dropped) + "\r\n"
	quiet bool // "mn\r\n" follows the request
}

// fill copies the request into req.Buf, points req.Wire at it and sets the
// command. extra reserves room after the wire for a decoded key. Key spans
// before w.cut keep their offsets in the returned buffer.
func fill(buf []byte, req *codec.Request, cmd int, w wire, extra int) []byte {
	head := w.n
	size := w.n
	if w.cut > 0 {
		head = w.cut
		for head > 0 && buf[head-1] == ' ' {
			head--
		}
		size = head + 2 + w.n - (w.eol + 1)
	}
	if w.quiet {
		size += len("mn\r\n")
	}
	b := req.Buf[:0]
	if cap(b) < size+extra {
		b = make([]byte, 0, size+extra)
	}
	b = append(b, buf[:head]...)
	if w.cut > 0 {
		b = append(b, "\r\n"...)
		b = append(b, buf[w.eol+1:w.n]...)
	}
	if w.quiet {
		b = append(b, "mn\r\n"...)
	}
	req.Buf = b
	req.Wire = b[:len(b):len(b)]
	req.Name = cmdNames[cmd]
	req.Cmd = cmd
	req.Keys = req.Keys[:0]
	return b
}

// addKey appends the key at s (an offset valid in both the client buffer
// and b) to req.Keys.
func addKey(req *codec.Request, b []byte, s span) {
	req.Keys = append(req.Keys, b[s.start:s.end:s.end])
}

// retrieval: get|gets <key>+, gat|gats <exptime> <key>+.
func (p *parser) retrieval(l *line, req *codec.Request) (int, error) {
	n := l.n()
	if len(p.toks) < 2 {
		return 0, rejectLine(replyError, n)
	}
	first := 1
	if isTouching(l.cmd) {
		if _, ok := parseLong(l.tok(p.toks[1])); !ok {
			return 0, rejectLine(replyBadExptime, n)
		}
		first = 2
	}
	keys := p.toks[first:]
	if r := p.badKeys(keys); r != "" {
		return 0, rejectLine(r, n)
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(r, n)
	}
	if p.metaGets && len(keys) == 1 && (l.cmd == CmdGet || l.cmd == CmdGets) {
		metaGet(l, req, keys[0])
		return n, nil
	}
	b := fill(l.buf, req, l.cmd, wire{n: n, eol: l.eol}, 0)
	for _, k := range keys {
		addKey(req, b, k)
	}
	switch len(keys) {
	case 0: // "gat 10": memcached answers END
		req.Route = codec.RouteLocal
	case 1:
		req.Route = codec.RouteKey
	default:
		req.Route = codec.RouteMulti
	}
	return n, nil
}

// badKeys returns the error reply to a retrieval line whose keys are
// refused, or "". memcached's proxy answers a multi-key line's too-long
// key in its place (the proxy's business: see proxywords.go), and
// refuses one whose first key starts too far in (1.6.22's proxy, once
// for each key, then END).
func (p *parser) badKeys(keys []span) string {
	inPlace := p.proxy && len(keys) > 1
	if inPlace && keys[0].start > proxyMaxKeyOffset {
		if p.v1 {
			return strings.Repeat(replyMalformed, len(keys)) + "END\r\n"
		}
		return replyMalformed
	}
	for _, k := range keys {
		if p.tooLongKey(k) && !inPlace {
			return replyBadFormat
		}
	}
	return ""
}

// storage: set|add|replace|append|prepend <key> <flags> <exptime> <bytes>
// [noreply], cas <key> <flags> <exptime> <bytes> <cas> [noreply], then the
// value and "\r\n".
//
// Where memcached rejects the line but the value's length is known, the
// proxy swallows the value (Discard) instead of reading it as commands as
// memcached does; where the length is unusable it closes the connection.
func (p *parser) storage(l *line, req *codec.Request) (int, error) {
	want := 5
	if l.cmd == CmdCAS {
		want = 6
	}
	vlen, noreply, err := p.checkStorage(l, want)
	if err != nil {
		return 0, err
	}
	// memcached's proxy forwards a too-large request: the server answers
	// it, noreply or not, and a set drops the key's old value there.
	switch {
	case vlen > p.maxValue && l.cmd == CmdSet:
		return 0, p.invalidate(l, req, p.toks[1], false, noreply && !p.proxy, vlen)
	case vlen > p.maxValue:
		return 0, rejectData(quiet(replyTooLarge, noreply && !p.proxy), l.n(), vlen)
	}
	total, err := p.valueEnd(l, vlen, noreply)
	if err != nil {
		return 0, err
	}
	// A noreply the proxy keeps is marked in the wire, one it drops is cut.
	toks := p.toks
	w := wire{n: total, eol: l.eol}
	noreply = noreply && len(toks) == want+1
	keep := noreply && p.keepNoreply(l.cmd)
	if noreply {
		req.Mode = codec.ModeNoreply
		if !keep {
			w.cut = toks[want].start
		}
	}
	b := fill(l.buf, req, l.cmd, w, 0)
	if keep {
		b[toks[want].end-1] = 'Y'
	}
	addKey(req, b, toks[1])
	req.Route = codec.RouteKey
	return total, nil
}

// checkStorage checks a storage line of want tokens (and an optional
// noreply) in memcached's order, and returns the value's length and
// whether the line ends with noreply.
func (p *parser) checkStorage(l *line, want int) (vlen int, noreply bool, err error) {
	n := l.n()
	toks := p.toks
	if len(toks) != want && len(toks) != want+1 {
		return 0, false, rejectLine(replyError, n)
	}
	noreply = p.lastIs(l, "noreply")
	vlen, lenOK := parseLength(l.tok(toks[4]))
	_, flagsOK := parseUlong(l.tok(toks[2]))
	_, expOK := parseLong(l.tok(toks[3]))
	casOK := true
	if l.cmd == CmdCAS {
		_, casOK = parseUlong(l.tok(toks[5]))
	}
	switch {
	case !lenOK && p.proxy:
		return 0, false, rejectFatal(replyBadFormat, n) // worded by parseProxy
	case !lenOK:
		// memcached answers and reads what follows as commands.
		return 0, false, rejectLine(quiet(replyBadFormat, noreply), n)
	case p.tooLongKey(toks[1]) || !flagsOK || !expOK || !casOK:
		return 0, false, rejectData(quiet(replyBadFormat, noreply), n, vlen)
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, false, rejectData(quiet(r, noreply), n, vlen)
	}
	return vlen, noreply, nil
}

// valueEnd returns the end of the request whose line l is followed by a
// value of vlen bytes and "\r\n", once they are all in the buffer. A
// value not followed by "\r\n" is answered "CLIENT_ERROR bad data chunk"
// (unless noreply hides it) and the stream goes on after vlen+2 bytes, as
// memcached reads it.
func (p *parser) valueEnd(l *line, vlen int, noreply bool) (int, error) {
	total := l.n() + vlen + 2
	if len(l.buf) < total {
		return 0, codec.Incomplete(total)
	}
	if l.buf[total-2] != '\r' || l.buf[total-1] != '\n' {
		// memcached's proxy shows it whatever noreply says.
		return 0, rejectLine(quiet(replyBadChunk, noreply && !p.proxy), total)
	}
	return total, nil
}

// invalidate answers a storage request whose value is over the limit as
// memcached answers it: "SERVER_ERROR object too large for cache" (unless
// noreply hides it), the value swallowed, and the key's old value dropped,
// so that a failed write never leaves stale data behind. memcached drops
// it for set and for ms in every mode, and keeps it for add, replace,
// append, prepend and cas (observed on 1.6.18). memcached's proxy
// forwards the request, and its server answers and drops alike; the
// delete goes the same way, through the route a Lua pool picks by the
// client's command (req.Name).
//
// req becomes the delete sent to the key's server ("delete <key>", for ms
// "md <key>" with its "b" flag): Cmd CmdDelete or CmdMetaDelete, Name the
// client's command, Arg argInvalidate, in ModeRewrite (ModeNoreply with
// noreply), which AppendReply shows as the error whatever the server
// answers (a server that does not answer is the proxy's backend failure
// error). The error returned says so (codec.ProtocolError.Forward).
func (p *parser) invalidate(l *line, req *codec.Request, key span, b64, noreply bool, vlen int) error {
	verb, cmd := "delete ", CmdDelete
	if l.cmd == CmdMetaSet {
		verb, cmd = "md ", CmdMetaDelete
	}
	k := l.tok(key)
	size := len(verb) + len(k) + len(" b\r\n")
	extra := 0
	if b64 {
		extra = len(k) / 4 * 3
	}
	b := req.Buf[:0]
	if cap(b) < size+extra {
		b = make([]byte, 0, size+extra)
	}
	b = append(append(b, verb...), k...)
	if b64 {
		b = append(b, " b"...)
	}
	b = append(b, "\r\n"...)
	req.Buf = b
	req.Wire = b[:len(b):len(b)]
	req.Name = cmdNames[l.cmd]
	req.Cmd = cmd
	req.Route = codec.RouteKey
	req.Mode = codec.ModeRewrite
	if noreply {
		req.Mode = codec.ModeNoreply
	}
	routeKey := b[len(verb) : len(verb)+len(k) : len(verb)+len(k)]
	if b64 {
		dst := b[len(b) : len(b)+extra]
		if n := mcbase64.Decode(dst, routeKey); n > 0 {
			req.Buf = b[:len(b)+n]
			routeKey = dst[:n:n]
		}
	}
	req.Keys = append(req.Keys[:0], routeKey)
	req.Arg = argInvalidate
	return &codec.ProtocolError{Forward: true, N: l.n(), Discard: int64(vlen) + 2}
}

// argInvalidate marks in req.Arg the delete invalidate made.
const argInvalidate = -1

// invalidates reports whether req is the delete invalidate made of a
// storage request over the size limit.
func invalidates(req *codec.Request) bool { return req.Arg == argInvalidate }

// keyNumber: incr|decr <key> <delta> [noreply], touch <key> <exptime>
// [noreply].
func (p *parser) keyNumber(l *line, req *codec.Request) (int, error) {
	n := l.n()
	toks := p.toks
	if len(toks) != 3 && len(toks) != 4 {
		return 0, rejectLine(replyError, n)
	}
	noreply := p.lastIs(l, "noreply")
	if p.tooLongKey(toks[1]) {
		return 0, rejectLine(quiet(replyBadFormat, noreply), n)
	}
	if l.cmd == CmdTouch {
		if _, ok := parseLong(l.tok(toks[2])); !ok {
			return 0, rejectLine(quiet(replyBadExptime, noreply), n)
		}
	} else if _, ok := parseUlong(l.tok(toks[2])); !ok {
		return 0, rejectLine(quiet(replyBadDelta, noreply), n)
	}
	return p.keyed(l, req, noreply && len(toks) == 4)
}

// delete <key> [0] [noreply]: memcached still accepts the legacy hold time
// when it is exactly "0".
func (p *parser) delete(l *line, req *codec.Request) (int, error) {
	n := l.n()
	toks := p.toks
	if len(toks) < 2 || len(toks) > 4 {
		return 0, rejectLine(replyError, n)
	}
	noreply := false
	if len(toks) > 2 {
		holdIsZero := string(l.tok(toks[2])) == "0"
		noreply = p.lastIs(l, "noreply")
		valid := (len(toks) == 3 && (holdIsZero || noreply)) ||
			(len(toks) == 4 && holdIsZero && noreply)
		if !valid {
			return 0, rejectLine(quiet(replyBadDelete, noreply), n)
		}
	}
	if p.tooLongKey(toks[1]) {
		return 0, rejectLine(quiet(replyBadFormat, noreply), n)
	}
	return p.keyed(l, req, noreply)
}

// keyed finishes a single-key request without a value; noreply removes
// the line's last token from the wire.
func (p *parser) keyed(l *line, req *codec.Request, noreply bool) (int, error) {
	n := l.n()
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(quiet(r, noreply), n)
	}
	w := wire{n: n, eol: l.eol}
	last := p.toks[len(p.toks)-1]
	keep := noreply && p.keepNoreply(l.cmd)
	if noreply {
		req.Mode = codec.ModeNoreply
		if !keep {
			w.cut = last.start
		}
	}
	b := fill(l.buf, req, l.cmd, w, 0)
	if keep {
		b[last.end-1] = 'Y'
	}
	addKey(req, b, p.toks[1])
	req.Route = codec.RouteKey
	return n, nil
}

// keepNoreply reports whether a noreply request of cmd goes to the backend
// as memcached's proxy sends it (codec.Options.ProxyWire): with "noreplY",
// a token the backend ignores, so that it answers and the proxy hides the
// answer. delete is the exception: memcached refuses a delete whose third
// token is neither "0" nor "noreply" (memcached's proxy sends it anyway
// and the key stays), so its noreply is removed, as without ProxyWire.
func (p *parser) keepNoreply(cmd int) bool { return p.wire && cmd != CmdDelete }

// flushAll: flush_all [delay] [noreply], sent to every backend.
func (p *parser) flushAll(l *line, req *codec.Request) (int, error) {
	n := l.n()
	toks := p.toks
	if len(toks) > 3 {
		return 0, rejectLine(replyError, n)
	}
	noreply := p.lastIs(l, "noreply")
	bare := 1
	if noreply {
		bare = 2
	}
	if len(toks) != bare {
		if _, ok := parseLong(l.tok(toks[1])); !ok {
			return 0, rejectLine(quiet(replyBadExptime, noreply), n)
		}
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(quiet(r, noreply), n)
	}
	w := wire{n: n, eol: l.eol}
	if noreply {
		w.cut = toks[len(toks)-1].start
		req.Mode = codec.ModeNoreply
	}
	fill(l.buf, req, l.cmd, w, 0)
	req.Route = codec.RouteAll
	return n, nil
}

// verbosity <level> [noreply] is answered by the proxy ("OK"); like
// memcached it needs the level.
func (p *parser) verbosity(l *line, req *codec.Request) (int, error) {
	n := l.n()
	if len(p.toks) != 2 && len(p.toks) != 3 {
		return 0, rejectLine(replyError, n)
	}
	noreply := p.lastIs(l, "noreply")
	if _, ok := parseUlong(l.tok(p.toks[1])); !ok {
		return 0, rejectLine(quiet(replyBadFormat, noreply), n)
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(quiet(r, noreply), n)
	}
	w := wire{n: n, eol: l.eol}
	if noreply {
		w.cut = p.toks[2].start
		req.Mode = codec.ModeNoreply
	}
	fill(l.buf, req, l.cmd, w, 0)
	req.Route = codec.RouteLocal
	return n, nil
}

// local: version, quit, stats [args], mn. Arguments are ignored, as
// memcached ignores them for version, quit and mn.
func (p *parser) local(l *line, req *codec.Request) (int, error) {
	n := l.n()
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(r, n)
	}
	fill(l.buf, req, l.cmd, wire{n: n, eol: l.eol}, 0)
	req.Route = codec.RouteLocal
	req.Close = l.cmd == CmdQuit
	return n, nil
}

// meta: mg|md|ma <key> <flag>*, me <key> [b]. Flags other than q and b are
// the backend's business: it answers a bad one with a CLIENT_ERROR line.
func (p *parser) meta(l *line, req *codec.Request) (int, error) {
	n := l.n()
	toks := p.toks
	if len(toks) < 2 {
		if l.cmd == CmdMetaDebug {
			return 0, rejectLine(replyBadFormat, n)
		}
		return 0, rejectLine(replyError, n)
	}
	if p.tooLongKey(toks[1]) {
		return 0, rejectLine(replyBadFormat, n)
	}
	var quietMode, b64 bool
	if l.cmd == CmdMetaDebug {
		b64 = len(toks) > 2 && string(l.tok(toks[2])) == "b"
	} else {
		quietMode, b64 = p.metaFlags(l, 2)
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(r, n)
	}
	p.finishMeta(l, req, wire{n: n, eol: l.eol, quiet: quietMode && !p.wire}, quietMode, b64)
	return n, nil
}

// metaSet: ms <key> <datalen> <flag>*, then the value and "\r\n".
func (p *parser) metaSet(l *line, req *codec.Request) (int, error) {
	n := l.n()
	toks := p.toks
	if len(toks) < 2 {
		return 0, rejectLine(replyError, n)
	}
	if len(toks) == 2 { // no length: memcached reads no value
		return 0, rejectLine(replyBadFormat, n)
	}
	reply := ""
	switch {
	case p.tooLongKey(toks[1]):
		reply = replyBadFormat
	case len(toks) >= metaMaxTokens:
		reply = replyMetaFlagsLong
	}
	vlen, ok := parseLength(l.tok(toks[2]))
	switch {
	case !ok && p.proxy:
		return 0, rejectFatal(cmp.Or(reply, replyBadFormat), n) // worded by parseProxy
	case !ok:
		// memcached answers and reads what follows as commands.
		return 0, rejectLine(cmp.Or(reply, replyBadFormat), n)
	case reply != "":
		return 0, rejectData(reply, n, vlen)
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectData(r, n, vlen)
	}
	quietMode, b64 := p.metaFlags(l, 3)
	switch {
	case vlen > p.maxValue:
		return 0, p.invalidate(l, req, toks[1], b64, false, vlen) // q shows errors
	}
	total, err := p.valueEnd(l, vlen, false)
	if err != nil {
		return 0, err
	}
	p.finishMeta(l, req, wire{n: total, eol: l.eol, quiet: quietMode && !p.wire}, quietMode, b64)
	return total, nil
}

// metaMaxTokens is memcached's MFLAG_MAX_OPT_LENGTH counted in real tokens:
// a meta line with this many tokens has too many flags.
const metaMaxTokens = 20

// metaFlags reports the q and b flags among the tokens from first on.
// memcached reads a flag from a token's first byte.
func (p *parser) metaFlags(l *line, first int) (quietMode, b64 bool) {
	for _, t := range p.toks[first:] {
		switch l.text[t.start] {
		case 'q':
			quietMode = true
		case 'b':
			b64 = true
		}
	}
	return quietMode, b64
}

// finishMeta builds a meta request. A base64 key ("b") routes on its
// decoded bytes; a key that does not decode routes as sent, and the
// backend answers it with memcached's own error.
//
// A quiet request (quietMode) is sent followed by "mn" (w.quiet), or, in
// memcached proxy's form (p.wire), with each "q" flag overwritten by a
// space: req.Arg is then 1 + the offset in Wire of the last one, which
// tells ParseReply and AppendReply (and a reader who wants the client's
// line back) that the backend answers one reply the client may not see.
func (p *parser) finishMeta(l *line, req *codec.Request, w wire, quietMode, b64 bool) {
	key := p.toks[1]
	extra := 0
	if b64 {
		extra = (key.end - key.start) / 4 * 3
	}
	b := fill(l.buf, req, l.cmd, w, extra)
	req.Route = codec.RouteKey
	if quietMode {
		req.Mode = codec.ModeQuiet
	}
	if quietMode && !w.quiet {
		for _, t := range p.toks[2:] {
			if b[t.start] == 'q' {
				b[t.start] = ' '
				req.Arg = t.start + 1
			}
		}
	}
	if b64 {
		dst := b[len(b) : len(b)+extra]
		if k := mcbase64.Decode(dst, b[key.start:key.end]); k > 0 {
			req.Buf = b[:len(b)+k]
			req.Keys = append(req.Keys, dst[:k:k])
			return
		}
	}
	addKey(req, b, key)
}
