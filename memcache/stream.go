package memcache

import (
	"bytes"
	"errors"

	"shardproxy/codec"
)

// This file cuts a retrieval line longer than its limit (lineLimit) into parts as it
// streams in (codec.PartParser). memcached reads a get line of any length
// (it grows its read buffer for it, without bound: observed on 1.6.18 with
// lines of 100 MB); the proxy serves such a line in bounded memory instead:
// each part is a retrieval request of its own with the line's verb (and a
// gat's exptime) and the keys of at most lineLimit bytes of the line, routed
// and answered in order (a gat's parts: of at most MaxCommandLine bytes,
// which memcached reads whole); the session shows the client each PartMore's
// values without their END (Dialect.TrimPart) and the last part's reply as
// it is, so that the client reads one reply.
//
// A part ends at the last space within the limit of where it starts; the
// next part starts at that space. A line within its limit is never cut, and where a line is cut depends only on its bytes. A key over
// the limit ends the line's reply with memcached's "CLIENT_ERROR bad
// command line format" (the values of the parts before it are sent
// already: memcached, which reads the whole line first, answers the error
// alone) and the rest of the line is dropped, as memcached drops it; under
// memcached's proxy (codec.Options.ProxyErrors) such a key is answered in
// its place, as for a shorter line. A NUL ends the line's keys, as
// memcached reads the line as a C string.

// errLongLine is frameLine's word for a retrieval line longer than its
// limit: it is cut into parts.
var errLongLine = errors.New("memcache: long retrieval line")

// stream is the retrieval line a parser is cutting into parts.
type stream struct {
	cmd  int    // the line's command; 0: no line is being cut
	head []byte // what starts each later part's wire: the verb, a gat's exptime
	skip bool   // the rest of the line is dropped: a key too long, a NUL
}

var _ codec.PartParser = (*parser)(nil)

// InPart implements codec.PartParser.
func (p *parser) InPart() bool { return p.st.cmd != 0 }

// ParsePart implements codec.PartParser.
func (p *parser) ParsePart(buf []byte, req *codec.Request) (int, error) {
	if p.st.cmd != 0 {
		return p.nextPart(buf, req, false)
	}
	if _, err := p.frameLine(buf); err != errLongLine {
		return 0, codec.ErrIncomplete // ParseRequest said so already
	}
	n, err := p.firstPart(buf, req, false)
	if p.proxy && err != codec.ErrIncomplete {
		return p.proxyWords(buf, req, n, err)
	}
	return n, err
}

// firstPart starts cutting the retrieval line at buf's start, which is
// longer than its limit: its first part is the verb, a gat's exptime and
// the keys that end before the last space within the limit. With
// wantEnd it cuts only once the line's newline is in buf.
func (p *parser) firstPart(buf []byte, req *codec.Request, wantEnd bool) (int, error) {
	limit := p.lineLimit(retrievalHead(buf[:min(len(buf), p.cmdLine+1)]))
	if wantEnd && bytes.IndexByte(buf[limit:], '\n') < 0 {
		return 0, codec.ErrIncomplete
	}
	cut := bytes.LastIndexByte(buf[:limit], ' ')
	if cut <= 0 { // leading spaces past a gat line's limit
		return 0, rejectFatal(replyLineTooLong, limit)
	}
	text, skip := beforeNUL(buf[:cut])
	p.tokenize(text)
	cmd, keys, err := p.startStream(text, cut, skip)
	if err != nil {
		return 0, err
	}
	if p.proxy && len(keys) > 0 && keys[0].start > proxyMaxKeyOffset {
		p.st.skip = true
		return 0, rejectLine(replyMalformed, cut)
	}
	if r := p.denied(cmd); r != "" {
		p.st.skip = true
		return 0, rejectLine(r, cut)
	}
	if err := p.checkKeys(keys, cut); err != nil {
		return 0, err
	}
	p.buildPart(req, cmd, nil, text, keys, codec.PartMore)
	return cut, nil
}

// beforeNUL returns text up to its first NUL, where memcached stops
// reading a line, and whether it held one.
func beforeNUL(text []byte) ([]byte, bool) {
	if i := bytes.IndexByte(text, 0); i >= 0 {
		return text[:i], true
	}
	return text, false
}

// startStream starts the stream of parts of a retrieval line whose first
// part, tokenized, is text (cut bytes of the line; skip when a NUL ended
// it early): the verb and a gat's exptime become the head every part
// repeats. It returns the command and the first part's keys.
func (p *parser) startStream(text []byte, cut int, skip bool) (cmd int, keys []span, err error) {
	if len(p.toks) > 0 {
		cmd = lookupCommand(text[p.toks[0].start:p.toks[0].end])
	}
	if !isRetrieval(cmd) { // frameLine saw a retrieval verb: a NUL cut it
		p.st = stream{cmd: CmdGet, head: p.st.head[:0], skip: true}
		return 0, nil, rejectLine(replyError, cut)
	}
	first := 1
	if isTouching(cmd) {
		first = 2
	}
	p.st = stream{cmd: cmd, head: append(p.st.head[:0], cmdNames[cmd]...), skip: skip}
	if len(p.toks) < first {
		// No exptime within the limit: memcached drops a gat line
		// that long.
		p.st = stream{head: p.st.head[:0]}
		return 0, nil, rejectFatal(replyLineTooLong, cut)
	}
	if isTouching(cmd) {
		exp := text[p.toks[1].start:p.toks[1].end]
		if _, ok := parseLong(exp); !ok {
			p.st.skip = true
			return 0, nil, rejectLine(replyBadExptime, cut)
		}
		p.st.head = append(append(p.st.head, ' '), exp...)
	}
	return cmd, p.toks[first:], nil
}

// nextPart cuts the next part of the line being cut, at buf's start: the
// rest of the line when its newline lies within partLimit bytes (the last
// part), else the keys before the last space within partLimit bytes. With
// wantEnd it cuts only once the line's newline is in buf.
func (p *parser) nextPart(buf []byte, req *codec.Request, wantEnd bool) (int, error) {
	if p.st.skip {
		return p.skipPart(buf, req, wantEnd)
	}
	limit := p.partLimit()
	window := buf[:min(len(buf), limit+2)]
	eol := bytes.IndexByte(window, '\n')
	l := eol
	if eol > 0 && buf[eol-1] == '\r' {
		l--
	}
	if eol >= 0 && l <= limit {
		return p.lastPart(buf[:l], req, eol)
	}
	if len(buf) < limit+2 || wantEnd && eol < 0 && bytes.IndexByte(buf[len(window):], '\n') < 0 {
		return 0, codec.ErrIncomplete
	}
	return p.middlePart(buf, req, limit)
}

// lastPart cuts the last part of the line being cut: line, the rest of
// it, whose newline is at eol.
func (p *parser) lastPart(line []byte, req *codec.Request, eol int) (int, error) {
	text, _ := beforeNUL(line)
	p.tokenize(text)
	cmd := p.st.cmd
	p.st.cmd = 0 // the line ends here
	if err := p.checkKeys(p.toks, eol+1); err != nil {
		return 0, err
	}
	p.buildPart(req, cmd, p.st.head, text, p.toks, codec.PartLast)
	return eol + 1, nil
}

// middlePart cuts a part that does not end the line: the keys before the
// last space within limit bytes.
func (p *parser) middlePart(buf []byte, req *codec.Request, limit int) (int, error) {
	cut := bytes.LastIndexByte(buf[:limit], ' ')
	if cut <= 0 { // a token as long as a part: a key too long
		p.st.skip = true
		if p.proxy {
			return 0, rejectLine(replyKeyTooLong, limit)
		}
		return 0, rejectLine(replyBadFormat, limit)
	}
	text, nul := beforeNUL(buf[:cut])
	if nul {
		p.st.skip = true
	}
	p.tokenize(text)
	if err := p.checkKeys(p.toks, cut); err != nil {
		return 0, err
	}
	p.buildPart(req, p.st.cmd, p.st.head, text, p.toks, codec.PartMore)
	return cut, nil
}

// partLimit is the longest stretch of the line a later part carries: its
// wire, with the line's head, within the line's limit.
func (p *parser) partLimit() int {
	if isTouching(p.st.cmd) {
		return max(p.cmdLine-2-len(p.st.head), 1)
	}
	return p.maxLine
}

// replyKeyTooLong is memcached proxy's answer to a multi-get's key over
// the limit, in the key's place.
const replyKeyTooLong = "CLIENT_ERROR key too long\r\n"

// checkKeys rejects a part with a key over the limit (n is the bytes the
// part uses), and drops the rest of its line. Under memcached's proxy
// such keys go through, to be answered in place.
func (p *parser) checkKeys(keys []span, n int) error {
	if p.proxy {
		return nil
	}
	for _, k := range keys {
		if p.tooLongKey(k) {
			p.st.skip = p.st.cmd != 0
			return rejectLine(replyBadFormat, n)
		}
	}
	return nil
}

// skipPart drops the rest of a line whose keys have ended: parts of no
// keys (answered END by AppendLocal, which TrimPart drops), cut as
// nextPart cuts, the last one at the newline.
func (p *parser) skipPart(buf []byte, req *codec.Request, wantEnd bool) (int, error) {
	limit := p.partLimit()
	window := buf[:min(len(buf), limit+2)]
	if eol := bytes.IndexByte(window, '\n'); eol >= 0 {
		cmd := p.st.cmd
		p.st.cmd, p.st.skip = 0, false
		p.buildPart(req, cmd, p.st.head, nil, nil, codec.PartLast)
		return eol + 1, nil
	}
	if len(buf) < limit+2 || wantEnd && bytes.IndexByte(buf[len(window):], '\n') < 0 {
		return 0, codec.ErrIncomplete
	}
	p.buildPart(req, p.st.cmd, p.st.head, nil, nil, codec.PartMore)
	return limit, nil
}

// buildPart makes req the part of a cmd line whose wire is head (the line's verb and
// exptime, nil for the first part), text (the part's stretch of the line,
// starting with a space unless it is the first) and "\r\n", with the keys
// at spans of text.
func (p *parser) buildPart(req *codec.Request, cmd int, head, text []byte, keys []span, part codec.Part) {
	text = bytes.TrimRight(text, " ")
	size := len(head) + len(text) + 2
	b := req.Buf[:0]
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	b = append(append(append(b, head...), text...), "\r\n"...)
	req.Buf = b
	req.Wire = b[:len(b):len(b)]
	req.Cmd = cmd
	req.Name = cmdNames[cmd]
	req.Part = part
	req.Keys = req.Keys[:0]
	for _, k := range keys {
		s, e := len(head)+k.start, len(head)+k.end
		req.Keys = append(req.Keys, b[s:e:e])
	}
	switch len(req.Keys) {
	case 0: // a part of no keys: answered END, as "gat 10" is
		req.Route = codec.RouteLocal
	case 1:
		req.Route = codec.RouteKey
	default:
		req.Route = codec.RouteMulti
	}
}

// TrimPart implements codec.PartReplier: a PartMore's reply is shown
// without its "END\r\n"; any other reply (an error line) ends the
// client's request.
func (*Dialect) TrimPart(reply []byte) (int, bool) {
	switch {
	case len(reply) == 0:
		return 0, false
	case string(reply) == "END\r\n":
		return 0, false
	case bytes.HasSuffix(reply, []byte("\r\nEND\r\n")):
		return len(reply) - len("END\r\n"), false
	}
	return len(reply), true
}
