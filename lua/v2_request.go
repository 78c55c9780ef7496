package lua

import (
	"bytes"

	glua "github.com/yuin/gopher-lua"
)

// The request methods memcached's V2 proxy added (proxy_request.c in
// memcached 1.6.45): raw_line, raw_value, token_int, flag_token_int,
// flag_add, flag_set, flag_replace, flag_del and match_res. Return values
// and error wording follow what memcached 1.6.45 does; a flag edit keeps
// the bytes around the edited token as they were.

// maxRequestLine is memcached's MCP_REQUEST_MAXLEN (twice the longest
// key): a flag edit or a mutator may not make a request line longer.
const maxRequestLine = 500

// addRequestMethodsV2 adds the V2 request methods to m.
func addRequestMethodsV2(m map[string]glua.LGFunction) {
	m["raw_line"] = reqRawLine
	m["raw_value"] = reqRawValue
	m["token_int"] = reqTokenInt
	m["flag_token_int"] = reqFlagTokenInt
	m["flag_add"] = reqFlagAdd
	m["flag_set"] = reqFlagSet
	m["flag_replace"] = reqFlagReplace
	m["flag_del"] = reqFlagDel
	m["match_res"] = reqMatchRes
}

// noRESP raises the error of a method that has no meaning for a RESP
// request.
func noRESP(L *glua.LState, rq *request, name string) {
	if rq.w.r.cfg.Redis {
		L.RaiseError("%s: meta flags have no meaning for a Redis request", name)
	}
}

// line returns the request line without its line end (memcache), or the
// request as sent without its final "\r\n" (Redis).
func (rq *request) line() []byte {
	wire := rq.req.Wire
	if rq.w.r.cfg.Redis {
		return bytes.TrimSuffix(wire, []byte("\r\n"))
	}
	return firstLine(wire)
}

// reqRawLine is r:raw_line().
func reqRawLine(L *glua.LState) int {
	L.Push(glua.LString(checkRequest(L, 1).line()))
	return 1
}

// reqRawValue is r:raw_value(): the value block with its "\r\n", or nil.
func reqRawValue(L *glua.LState) int {
	if v := checkRequest(L, 1).value(); v != nil {
		L.Push(glua.LString(v))
	} else {
		L.Push(glua.LNil)
	}
	return 1
}

// reqTokenInt is r:token_int(n): token n as an integer, nil when it is
// not one, is out of range, or is the command (n = 1).
func reqTokenInt(L *glua.LState) int {
	rq := checkRequest(L, 1)
	if L.GetTop() < 2 {
		L.Push(glua.LNil)
		return 1
	}
	n := L.CheckInt(2)
	rq.tokenize()
	if n < 2 || n > min(len(rq.toks), maxTokens) {
		L.Push(glua.LNil)
		return 1
	}
	if v, err := tokenInt(rq.token(n - 1)); err == errTokOK {
		L.Push(glua.LNumber(v))
	} else {
		L.Push(glua.LNil)
	}
	return 1
}

// Results of tokenInt, as mcmc's tokto64 returns them.
type tokErr int8

const (
	errTokOK tokErr = iota
	errTokRange
	errTokLong
	errTokInvalid
)

// tokenInt converts a token to a signed 64-bit integer the way mcmc does:
// an optional '-', digits only, at most 22 bytes.
func tokenInt(tok []byte) (int64, tokErr) {
	if len(tok) > 22 {
		return 0, errTokLong
	}
	neg := len(tok) > 0 && tok[0] == '-'
	digits := tok
	if neg {
		digits = tok[1:]
	}
	var sum int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, errTokInvalid
		}
		d := int64(c - '0')
		if neg {
			if sum < (-1<<63+d)/10 {
				return 0, errTokRange
			}
			sum = sum*10 - d
		} else {
			if sum > (1<<63-1-d)/10 {
				return 0, errTokRange
			}
			sum = sum*10 + d
		}
	}
	return sum, errTokOK
}

// flagToken returns the token after flag f (without the flag letter) and
// the index of the token carrying it, or -1.
func (rq *request) flagToken(f byte) ([]byte, int) {
	i := rq.findFlag(f)
	if i < 0 {
		return nil, -1
	}
	return rq.token(i)[1:], i
}

// reqFlagTokenInt is r:flag_token_int(f): false when the flag is absent
// or carries no token (or one longer than 22 bytes); true and the integer,
// or true alone when the token is not an integer.
func reqFlagTokenInt(L *glua.LState) int {
	rq := checkRequest(L, 1)
	if len(L.CheckString(2)) != 1 {
		L.RaiseError("has_flag(): meta flag must be a single character")
	}
	tok, i := rq.flagToken(L.CheckString(2)[0])
	if i < 0 || len(tok) == 0 {
		L.Push(glua.LFalse)
		return 1
	}
	v, err := tokenInt(tok)
	switch err {
	case errTokOK:
		L.Push(glua.LTrue)
		L.Push(glua.LNumber(v))
		return 2
	case errTokLong:
		L.Push(glua.LFalse)
	default:
		L.Push(glua.LTrue)
	}
	return 1
}

// editFlag reads the flag argument n of the flag editing methods.
func editFlag(L *glua.LState, n int) byte {
	f := L.CheckString(n)
	if len(f) != 1 {
		L.RaiseError("request: meta flag must be a single character")
	}
	if f[0] < 'A' || f[0] > 'z' {
		L.RaiseError("request: invalid flag, must be A-Z,a-z")
	}
	return f[0]
}

// editToken reads the optional token argument n of the flag editing
// methods: a string, a number (written as Lua writes it) or nothing.
func editToken(L *glua.LState, n int) []byte {
	switch v := L.Get(n).(type) {
	case glua.LString:
		return []byte(v)
	case glua.LNumber:
		return []byte(v.String())
	case *glua.LNilType:
		return nil
	}
	L.RaiseError("request: invalid flag argument")
	return nil
}

// reparse makes line (without its line end) and the request's value the
// request, and reports whether it parses.
func (rq *request) reparse(line []byte) bool {
	if len(line)+2 > maxRequestLine {
		return false
	}
	buf := make([]byte, 0, len(line)+2+len(rq.req.Wire)-rq.lineEnd)
	buf = append(append(buf, line...), "\r\n"...)
	buf = append(buf, rq.rest()...)
	req, err := rq.w.parse(buf)
	if err != nil {
		return false
	}
	rq.req, rq.owned, rq.split = req, true, false
	return true
}

// appendToken adds " " + tok at the end of the request line.
func (rq *request) appendToken(tok []byte) bool {
	rq.tokenize()
	line := rq.line()
	out := make([]byte, 0, len(line)+1+len(tok))
	out = append(append(append(out, line...), ' '), tok...)
	return rq.reparse(out)
}

// replaceToken replaces token i with tok, or removes it when tok is
// empty, keeping every other byte of the line as it was.
func (rq *request) replaceToken(i int, tok []byte) bool {
	rq.tokenize()
	line := rq.line()
	s := rq.toks[i]
	out := make([]byte, 0, len(line)+len(tok))
	out = append(append(out, line[:s.start]...), tok...)
	if i+1 < len(rq.toks) {
		if len(tok) > 0 {
			out = append(out, ' ')
		}
		out = append(out, line[rq.toks[i+1].start:]...)
	} else {
		out = bytes.TrimRight(out, " ")
	}
	return rq.reparse(out)
}

// flagged returns flag f followed by tok.
func flagged(f byte, tok []byte) []byte {
	return append([]byte{f}, tok...)
}

// reqFlagAdd is r:flag_add(f[, token]): adds the flag at the end of the
// line unless it is there; returns whether it did.
func reqFlagAdd(L *glua.LState) int {
	rq := checkRequest(L, 1)
	noRESP(L, rq, "flag_add")
	f := editFlag(L, 2)
	if rq.findFlag(f) >= 0 {
		L.Push(glua.LFalse)
		return 1
	}
	L.Push(glua.LBool(rq.appendToken(flagged(f, editToken(L, 3)))))
	return 1
}

// reqFlagSet is r:flag_set(f[, token]): replaces the flag's token, or adds
// the flag at the end of the line.
func reqFlagSet(L *glua.LState) int {
	rq := checkRequest(L, 1)
	noRESP(L, rq, "flag_set")
	f := editFlag(L, 2)
	L.Push(glua.LBool(rq.putFlag(f, flagged(f, editToken(L, 3)))))
	return 1
}

// reqFlagReplace is r:flag_replace(f, new[, token]): puts flag new (and
// its token) where f was, or adds it at the end of the line when f is
// absent.
func reqFlagReplace(L *glua.LState) int {
	rq := checkRequest(L, 1)
	noRESP(L, rq, "flag_replace")
	f := editFlag(L, 2)
	L.Push(glua.LBool(rq.putFlag(f, flagged(editFlag(L, 3), editToken(L, 4)))))
	return 1
}

// putFlag writes tok (a flag and its token) where flag f is, or at the
// end of the line when f is absent, and reports whether it changed rq.
func (rq *request) putFlag(f byte, tok []byte) bool {
	if i := rq.findFlag(f); i >= 0 {
		return rq.replaceToken(i, tok)
	}
	return rq.appendToken(tok)
}

// reqFlagDel is r:flag_del(f): removes the flag; returns whether it was
// there.
func reqFlagDel(L *glua.LState) int {
	rq := checkRequest(L, 1)
	noRESP(L, rq, "flag_del")
	f := editFlag(L, 2)
	i := rq.findFlag(f)
	L.Push(glua.LBool(i >= 0 && rq.replaceToken(i, nil)))
	return 1
}

// replyFlag returns the token after flag f in a reply line (the flags are
// the tokens after the first that start with a letter), and whether f is
// there.
func replyFlag(line []byte, f byte) ([]byte, bool) {
	for i, tok := 0, 0; i < len(line); tok++ {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' {
			j++
		}
		if j == i {
			break
		}
		if tok > 0 {
			c := line[i]
			isLetter := c >= 'A' && c <= 'z'
			if !isLetter && (c < '0' || c > '9') {
				break // mcmc's tokenizer stops at such a token
			}
			if c == f {
				return line[i+1 : j], true
			}
		}
		i = j
	}
	return nil, false
}

// reqMatchRes is r:match_res(res): whether res answers r, comparing the
// response's k flag with the key and r's opaque (O) with the response's.
// It returns (true, nil) on a match, (false, reason) on a mismatch, and
// (false, nil) when there was nothing to compare.
func reqMatchRes(L *glua.LState) int {
	rq := checkRequest(L, 1)
	res, ok := userValue[*response](L.Get(2))
	if !ok {
		L.ArgError(2, "mcp.response expected")
	}
	noRESP(L, rq, "match_res")
	fail := func(msg string) int {
		L.Push(glua.LFalse)
		L.Push(glua.LString(msg))
		return 2
	}
	if res.raw == nil {
		return fail("failed to parse response")
	}
	line := res.raw
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = bytes.TrimSuffix(line[:i], []byte("\r"))
	}
	matched := false
	if k, ok := replyFlag(line, 'k'); ok {
		if matched = bytes.Equal(rq.key(), k); !matched {
			return fail("key in response does not match request key")
		}
	}
	if opaque, i := rq.flagToken('O'); i >= 0 && len(opaque) > 0 {
		o, ok := replyFlag(line, 'O')
		if !ok {
			return fail("opaque in request but not in response")
		}
		if matched = bytes.Equal(opaque, o); !matched {
			return fail("request opaque does not match response opaque")
		}
	}
	L.Push(glua.LBool(matched))
	L.Push(glua.LNil)
	return 2
}
