package lua

import (
	"bytes"

	glua "github.com/yuin/gopher-lua"
)

// checkRequest returns argument n as a live request object.
func checkRequest(L *glua.LState, n int) *request {
	rq, ok := userValue[*request](L.Get(n))
	if !ok {
		L.ArgError(n, "request expected")
	}
	if rq.req == nil {
		L.RaiseError("%s", errDetached.Error())
	}
	return rq
}

// checkResponse returns argument n as a response object.
func checkResponse(L *glua.LState, n int) *response {
	res, ok := userValue[*response](L.Get(n))
	if !ok {
		L.ArgError(n, "response expected")
	}
	res.parse()
	return res
}

// requestMethods are the methods of request objects (memcached's
// mcplib_request_m).
func (w *worker) requestMethods() map[string]glua.LGFunction {
	m := map[string]glua.LGFunction{
		"command":    reqCommand,
		"key":        reqKey,
		"ltrimkey":   func(L *glua.LState) int { return trimKey(L, true) },
		"rtrimkey":   func(L *glua.LState) int { return trimKey(L, false) },
		"token":      reqToken,
		"ntokens":    reqNTokens,
		"has_flag":   reqHasFlag,
		"flag_token": reqFlagToken,
		"__tostring": reqString,
	}
	addRequestMethodsV2(m)
	return m
}

// reqCommand is r:command(): the CMD_* number (memcache) or the lower-case
// command name (Redis).
func reqCommand(L *glua.LState) int {
	rq := checkRequest(L, 1)
	if rq.w.r.cfg.Redis {
		L.Push(glua.LString(rq.req.Name))
	} else {
		L.Push(glua.LNumber(mcCommandNumber(rq.req.Name)))
	}
	return 1
}

// reqKey is r:key(); "" for a request without a key.
func reqKey(L *glua.LState) int {
	L.Push(glua.LString(checkRequest(L, 1).key()))
	return 1
}

// trimKey is r:ltrimkey(n) and r:rtrimkey(n): drop n bytes from the start
// or the end of the key. As in memcached's proxy, the dropped bytes become
// spaces on the wire ("mg abcdef v" with ltrimkey(3) is sent as
// "mg    def v"), n may be the key's whole length, and the call returns n.
// On a Redis pool the key argument is shortened (and must keep a byte).
func trimKey(L *glua.LState, left bool) int {
	rq := checkRequest(L, 1)
	rq.tokenize()
	n := L.CheckInt(2)
	name := map[bool]string{true: "ltrimkey", false: "rtrimkey"}[left]
	if rq.keyTok < 0 {
		L.RaiseError("%s: request has no key", name)
	}
	key := rq.toks[rq.keyTok]
	if n < 0 || n > key.end-key.start || rq.w.r.cfg.Redis && n == key.end-key.start {
		L.RaiseError("%s cannot zero out key", name)
	}
	if rq.w.r.cfg.Redis { // the key argument, shortened
		k := rq.token(rq.keyTok)
		if left {
			k = k[n:]
		} else {
			k = k[:len(k)-n]
		}
		if err := rq.rewrite(map[int][]byte{rq.keyTok: bytes.Clone(k)}); err != nil {
			L.RaiseError("%s: %s", name, err.Error())
		}
		L.Push(glua.LNumber(n))
		return 1
	}
	buf := make([]byte, 0, len(rq.req.Wire))
	buf = append(buf, rq.view[:rq.lineEnd]...)
	blank := buf[key.start : key.start+n]
	if !left {
		blank = buf[key.end-n : key.end]
	}
	for i := range blank {
		blank[i] = ' '
	}
	buf = append(buf, rq.rest()...)
	if err := rq.replace(buf); err != nil {
		L.RaiseError("%s: %s", name, err.Error())
	}
	L.Push(glua.LNumber(n))
	return 1
}

// reqToken is r:token(n[, new]): token n (1 is the command), nil when out
// of range; with new, token n is replaced ("" removes it).
func reqToken(L *glua.LState) int {
	rq := checkRequest(L, 1)
	rq.tokenize()
	if L.GetTop() < 2 {
		L.Push(glua.LNil)
		return 1
	}
	n := L.CheckInt(2)
	if n < 1 || n > min(len(rq.toks), maxTokens) {
		L.Push(glua.LNil)
		return 1
	}
	if L.GetTop() < 3 {
		L.Push(glua.LString(rq.token(n - 1)))
		return 1
	}
	repl := L.CheckString(3)
	if n == 1 {
		L.RaiseError("token: the command (token 1) cannot be replaced")
	}
	if err := rq.rewrite(map[int][]byte{n - 1: []byte(repl)}); err != nil {
		L.RaiseError("token: %s", err.Error())
	}
	return 0
}

// reqNTokens is r:ntokens().
func reqNTokens(L *glua.LState) int {
	rq := checkRequest(L, 1)
	rq.tokenize()
	L.Push(glua.LNumber(min(len(rq.toks), maxTokens)))
	return 1
}

// checkFlag reads a meta flag argument: one letter A-Z or a-z.
func checkFlag(L *glua.LState, fn string) byte {
	f := L.CheckString(2)
	if len(f) != 1 {
		L.RaiseError("%s(): meta flag must be a single character", fn)
	}
	if f[0] < 65 || f[0] > 122 {
		L.RaiseError("%s(): invalid flag, must be A-Z,a-z", fn)
	}
	return f[0]
}

// findFlag returns the index of the token carrying flag f, or -1.
func (rq *request) findFlag(f byte) int {
	rq.tokenize()
	first := rq.metaFlagStart()
	if first < 0 {
		return -1
	}
	for i := first; i < len(rq.toks); i++ {
		if tok := rq.token(i); len(tok) > 0 && tok[0] == f {
			return i
		}
	}
	return -1
}

// reqHasFlag is r:has_flag(f): whether a meta request carries flag f.
func reqHasFlag(L *glua.LState) int {
	rq := checkRequest(L, 1)
	f := checkFlag(L, "has_flag")
	L.Push(glua.LBool(rq.findFlag(f) >= 0))
	return 1
}

// reqFlagToken is r:flag_token(f[, new]): whether flag f is there and the
// token after the flag letter, if any; new replaces the flag's whole token
// ("" removes it). A missing flag is not added.
func reqFlagToken(L *glua.LState) int {
	rq := checkRequest(L, 1)
	f := checkFlag(L, "flag_token")
	i := rq.findFlag(f)
	if i < 0 {
		L.Push(glua.LFalse)
		return 1
	}
	L.Push(glua.LTrue)
	ret := 1
	if tok := rq.token(i); len(tok) > 1 {
		L.Push(glua.LString(tok[1:]))
		ret = 2
	}
	if s, ok := L.Get(3).(glua.LString); ok {
		if err := rq.rewrite(map[int][]byte{i: []byte(s)}); err != nil {
			L.RaiseError("flag_token: %s", err.Error())
		}
	}
	return ret
}

// reqString is tostring(r): the request line.
func reqString(L *glua.LState) int {
	rq := checkRequest(L, 1)
	rq.tokenize()
	line := rq.view
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	L.Push(glua.LString(bytes.TrimSuffix(line, []byte("\r"))))
	return 1
}

// responseMethods are the methods of response objects (memcached's
// mcplib_response_m).
var responseMethods = map[string]glua.LGFunction{
	"ok": func(L *glua.LState) int {
		L.Push(glua.LBool(checkResponse(L, 1).ok()))
		return 1
	},
	"hit": func(L *glua.LState) int {
		L.Push(glua.LBool(checkResponse(L, 1).hit()))
		return 1
	},
	"vlen": func(L *glua.LState) int {
		L.Push(glua.LNumber(checkResponse(L, 1).vlen))
		return 1
	},
	"code": func(L *glua.LState) int {
		L.Push(glua.LNumber(checkResponse(L, 1).code))
		return 1
	},
	"line": func(L *glua.LState) int {
		if res := checkResponse(L, 1); res.line != nil {
			L.Push(glua.LString(res.line))
		} else {
			L.Push(glua.LNil)
		}
		return 1
	},
	"elapsed": func(L *glua.LState) int {
		L.Push(glua.LNumber(checkResponse(L, 1).elapsed.Microseconds()))
		return 1
	},
}
