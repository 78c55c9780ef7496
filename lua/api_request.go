package lua

import (
	"bytes"
	"errors"
	"strconv"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// maxTokens is memcached's PARSER_MAX_TOKENS: r:token and r:ntokens see at
// most this many tokens of a memcache request line.
const maxTokens = 24

// span is a token's [start, end) in the request's wire bytes.
type span struct{ start, end int }

// request is the Go side of a Lua request object (memcached's
// mcp.request): a codec.Request and its tokens. For a memcache request the
// tokens are the words of the request line; for a Redis request, the
// command's arguments, the command name first.
type request struct {
	ud    glua.LUserData // the handler's argument, in the same allocation (runHandler)
	w     *worker
	req   *codec.Request // nil once the client has been answered
	owned bool           // req was made for this object, not borrowed from the client

	toks    []span
	view    []byte // what toks index: req.Wire, or the client's line (see clientLine)
	keyTok  int    // index in toks of the key, -1 for none
	lineEnd int    // memcache: end of the request line, after its '\n'
	split   bool   // toks are valid
}

var errDetached = errors.New("request used after its reply was sent")

// detach marks the object stale once its task has been answered: the
// proxy reuses the client request's storage.
func (rq *request) detach() {
	if !rq.owned {
		rq.req = nil
		rq.split = false
	}
}

// firstLine returns raw's first line without its line end.
func firstLine(raw []byte) []byte {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		raw = raw[:i]
	}
	return bytes.TrimSuffix(raw, []byte("\r"))
}

// tokenize fills toks for the current req.
func (rq *request) tokenize() {
	if rq.split {
		return
	}
	rq.split = true
	if rq.toks == nil {
		rq.toks = make([]span, 0, 8)
	}
	rq.toks = rq.toks[:0]
	rq.keyTok = -1
	rq.view = rq.req.Wire
	if rq.w.r.cfg.Redis {
		rq.toks = redisArgs(rq.req.Wire, rq.toks)
		rq.keyTok = redisKeyToken(rq.req, rq.toks)
		return
	}
	rq.toks, rq.lineEnd = memcacheTokens(rq.req.Wire, rq.toks)
	if rq.w.r.cfg.Options.ProxyWire {
		rq.view = clientLine(rq.req, rq.lineEnd, rq.toks)
		rq.toks, _ = memcacheTokens(rq.view, rq.toks[:0])
	}
	if len(rq.req.Keys) > 0 && len(rq.toks) > 1 {
		rq.keyTok = 1
		if (rq.req.Name == "gat" || rq.req.Name == "gats") && len(rq.toks) > 2 {
			rq.keyTok = 2
		}
	}
}

// memcacheTokens splits the request line at spaces, as memcached's
// tokenizer does, into at most maxTokens tokens.
func memcacheTokens(wire []byte, toks []span) ([]span, int) {
	end := bytes.IndexByte(wire, '\n')
	lineEnd := end + 1
	if end < 0 {
		end, lineEnd = len(wire), len(wire)
	} else if end > 0 && wire[end-1] == '\r' {
		end--
	}
	for i := 0; i < end && len(toks) < maxTokens; {
		for i < end && wire[i] == ' ' {
			i++
		}
		if i == end {
			break
		}
		j := i
		for j < end && wire[j] != ' ' {
			j++
		}
		toks = append(toks, span{i, j})
		i = j
	}
	return toks, lineEnd
}

// clientLine returns the request line as the client sent it, where the
// parser changed it for the backend as memcached's proxy does
// (codec.Options.ProxyWire): a quiet meta request's "q" flag, which the
// parser overwrote with a space at Arg-1, and "noreply", sent as
// "noreplY". So the handler sees the flag and the token, as memcached's
// handlers do, and a rewrite keeps the request quiet. Other requests'
// Wire is returned as it is.
func clientLine(req *codec.Request, lineEnd int, toks []span) []byte {
	switch {
	case req.Mode == codec.ModeQuiet && req.Arg > 0 && req.Arg < lineEnd && req.Wire[req.Arg-1] == ' ':
		line := bytes.Clone(req.Wire[:lineEnd])
		line[req.Arg-1] = 'q'
		return line
	case req.Mode == codec.ModeNoreply && len(toks) > 0:
		last := toks[len(toks)-1]
		if string(req.Wire[last.start:last.end]) == "noreplY" {
			line := bytes.Clone(req.Wire[:lineEnd])
			line[last.end-1] = 'y'
			return line
		}
	}
	return req.Wire
}

// redisArgs returns the arguments of a RESP array of bulk strings, or the
// space-separated words of an inline command.
func redisArgs(wire []byte, toks []span) []span {
	if len(wire) == 0 || wire[0] != '*' {
		line := wire
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		out, _ := memcacheTokens(line, toks)
		return out
	}
	n, off, ok := respNumber(wire, 1)
	for i := 0; ok && i < n; i++ {
		if off >= len(wire) || wire[off] != '$' {
			break
		}
		var size int
		if size, off, ok = respNumber(wire, off+1); !ok || size < 0 || off+size+2 > len(wire) {
			break
		}
		toks = append(toks, span{off, off + size})
		off += size + 2
	}
	return toks
}

// respNumber reads the decimal number at wire[i:] up to "\r\n" and returns
// it and the offset after the "\r\n".
func respNumber(wire []byte, i int) (int, int, bool) {
	j := bytes.Index(wire[i:], []byte("\r\n"))
	if j < 0 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(string(wire[i : i+j]))
	return n, i + j + 2, err == nil
}

// redisKeyToken finds the first key among the arguments.
func redisKeyToken(req *codec.Request, toks []span) int {
	if len(req.Keys) == 0 {
		return -1
	}
	for i := 1; i < len(toks); i++ {
		if bytes.Equal(req.Wire[toks[i].start:toks[i].end], req.Keys[0]) {
			return i
		}
	}
	return -1
}

// token returns token i (0-based).
func (rq *request) token(i int) []byte {
	s := rq.toks[i]
	return rq.view[s.start:s.end]
}

// key returns the request's key: the key token as sent (memcache) or the
// first key (Redis), or nil.
func (rq *request) key() []byte { return keyOf(rq.req, rq.w.r.cfg.Redis) }

// secondToken returns the second space-separated word of wire's first line.
func secondToken(wire []byte) []byte {
	i := 0
	for i < len(wire) && wire[i] != ' ' && wire[i] != '\r' && wire[i] != '\n' {
		i++
	}
	for i < len(wire) && wire[i] == ' ' {
		i++
	}
	j := i
	for j < len(wire) && wire[j] != ' ' && wire[j] != '\r' && wire[j] != '\n' {
		j++
	}
	return wire[i:j]
}

// metaFlagStart returns the index of the first flag token of a meta
// request, or -1 for other requests.
func (rq *request) metaFlagStart() int {
	if rq.w.r.cfg.Redis {
		return -1
	}
	switch rq.req.Name {
	case "mg", "md", "ma", "me":
		return 2
	case "ms":
		return 3
	}
	return -1
}

// rewrite rebuilds the request with tokens replaced: repl[i] replaces
// token i (nil keeps it, an empty slice removes it). The new bytes are
// parsed again, so keys, mode and routing follow the change.
func (rq *request) rewrite(repl map[int][]byte) error {
	var buf []byte
	if rq.w.r.cfg.Redis {
		buf = rq.rewriteRedis(repl)
	} else {
		buf = rq.rewriteMemcache(repl)
	}
	return rq.replace(buf)
}

// replace makes the request the one buf holds, parsed again.
func (rq *request) replace(buf []byte) error {
	req, err := rq.w.parse(buf)
	if err != nil {
		return err
	}
	rq.req, rq.owned, rq.split = req, true, false
	return nil
}

// rewriteMemcache is the request line with the tokens repl names
// replaced ("" removes one), one space between tokens. A V1 file's
// request keeps the space before a removed last token, as memcached
// 1.6.22's proxy did ("ms k 2 C1" without its token 4 is "ms k 2 \r\n").
func (rq *request) rewriteMemcache(repl map[int][]byte) []byte {
	var buf []byte
	for i := range rq.toks {
		tok := rq.token(i)
		if r, ok := repl[i]; ok {
			tok = r
		}
		if len(tok) == 0 {
			if i == len(rq.toks)-1 && rq.w.r.v1 {
				buf = append(buf, ' ')
			}
			continue
		}
		if len(buf) > 0 {
			buf = append(buf, ' ')
		}
		buf = append(buf, tok...)
	}
	buf = append(buf, "\r\n"...)
	return append(buf, rq.rest()...)
}

// rest returns what follows the request line (a value and its "\r\n"),
// without the "mn\r\n" the parser adds after a quiet request unless it
// speaks as memcached's proxy (it asks for "mn" again if q stays).
func (rq *request) rest() []byte {
	rest := rq.req.Wire[rq.lineEnd:]
	if rq.req.Mode == codec.ModeQuiet && !rq.w.r.cfg.Options.ProxyWire {
		rest = bytes.TrimSuffix(rest, []byte("mn\r\n"))
	}
	return rest
}

func (rq *request) rewriteRedis(repl map[int][]byte) []byte {
	args := make([][]byte, 0, len(rq.toks))
	for i := range rq.toks {
		tok := rq.token(i)
		if r, ok := repl[i]; ok {
			if len(r) == 0 {
				continue
			}
			tok = r
		}
		args = append(args, tok)
	}
	buf := append([]byte{'*'}, strconv.Itoa(len(args))...)
	buf = append(buf, "\r\n"...)
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, "\r\n"...)
		buf = append(buf, a...)
		buf = append(buf, "\r\n"...)
	}
	return buf
}

// parse parses buf as one whole request with the worker's parser.
func (w *worker) parse(buf []byte) (*codec.Request, error) {
	req := &codec.Request{}
	n, err := w.parser.ParseRequest(buf, req)
	var pe *codec.ProtocolError
	switch {
	case errors.Is(err, codec.ErrIncomplete):
		return nil, errors.New("failed to parse request: incomplete (a value must follow a storage command)")
	case errors.As(err, &pe):
		return nil, errors.New("failed to parse request: " + string(bytes.TrimSpace([]byte(pe.Reply))))
	case err != nil:
		return nil, errors.New("failed to parse request: " + err.Error())
	case n != len(buf):
		return nil, errors.New("failed to parse request: trailing bytes after the request")
	case req.Route == codec.RouteLocal:
		return nil, errors.New("failed to parse request: " + req.Name + " is answered by the proxy, not a backend")
	}
	return req, nil
}

// cloneRequest copies r into storage of its own, for a call that may
// outlive the client request (mcp.await).
func cloneRequest(r *codec.Request) *codec.Request {
	c := new(codec.Request)
	copyRequest(c, r)
	return c
}

// copyRequest makes dst a copy of r in dst's own storage, reusing the
// capacity of dst.Buf and dst.Keys.
func copyRequest(dst, r *codec.Request) {
	size := len(r.Wire)
	for _, k := range r.Keys {
		size += len(k)
	}
	buf, keys := dst.Buf[:0], dst.Keys[:0]
	*dst = *r
	if cap(buf) < size {
		buf = make([]byte, 0, size) // no append below reallocates it
	}
	buf = append(buf, r.Wire...)
	dst.Wire = buf[:len(r.Wire):len(r.Wire)]
	for _, k := range r.Keys {
		start := len(buf)
		buf = append(buf, k...)
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	dst.Buf, dst.Keys = buf, keys
}

// value returns the value block (data and "\r\n") a storage request
// carries, or nil.
func (rq *request) value() []byte {
	if rq.w.r.cfg.Redis {
		return nil
	}
	switch rq.req.Name {
	case "set", "add", "replace", "append", "prepend", "cas", "ms":
	default:
		return nil
	}
	rq.tokenize()
	return rq.rest()
}
