package lua

import (
	"bytes"

	glua "github.com/yuin/gopher-lua"
)

// The response methods memcached's V2 proxy added (proxy_result.c in
// memcached 1.6.45): raw_string, flag_blank and close; and the responses
// a script makes itself (rctx:response_new, filled by a response
// mutator).

func init() { addResponseMethodsV2(responseMethods) }

// addResponseMethodsV2 adds the V2 response methods to m.
func addResponseMethodsV2(m map[string]glua.LGFunction) {
	m["raw_string"] = resRawString
	m["flag_blank"] = resFlagBlank
	m["close"] = resClose
}

// emptyResponse is a response with no reply: what rctx:response_new makes
// and what close leaves. Like memcached's, it is ok() with code 0; a
// handler that returns it sends the client nothing.
func emptyResponse(redis bool) *response {
	return &response{redis: redis, made: true, parsed: true, status: mcmcOK}
}

// clear empties res (close, and a request context's end of request for
// the responses it owns). ok() keeps its answer, as in memcached.
func (res *response) clear() {
	res.parse()
	status := res.status
	*res = response{ud: res.ud, redis: res.redis, made: true, parsed: true, status: status} // ud: the Lua object holds it
}

// resRawString is res:raw_string(): the reply as received (or as a
// mutator wrote it), value included; nil when there is none.
func resRawString(L *glua.LState) int {
	res := checkResponse(L, 1)
	if res.raw == nil {
		L.Push(glua.LNil)
	} else {
		L.Push(glua.LString(res.raw))
	}
	return 1
}

// resClose is res:close(): drops the reply's bytes.
func resClose(L *glua.LState) int {
	checkResponse(L, 1).clear()
	return 0
}

// metaFlagsAt returns where a meta reply's flags start and end in raw (after
// the code, and after the size of a VA), or ok false for a reply that is
// not a meta reply (memcached's MCMC_RESP_META: a two-letter code other
// than OK).
func metaFlagsAt(raw []byte) (start, end int, ok bool) {
	end = bytes.IndexByte(raw, '\n')
	if end < 0 {
		return 0, 0, false
	}
	if end > 0 && raw[end-1] == '\r' {
		end--
	}
	line := raw[:end]
	code, _, _ := bytes.Cut(line, []byte(" "))
	if len(code) != 2 || string(code) == "OK" || code[0] >= '0' && code[0] <= '9' {
		return 0, 0, false
	}
	start = min(3, end)
	if string(code) == "VA" {
		for start < end && line[start] != ' ' {
			start++
		}
		if start < end {
			start++
		}
	}
	return start, end, true
}

// resFlagBlank is res:flag_blank(f): overwrites flag f and its token in a
// meta reply with spaces, in place; returns whether it found the flag.
func resFlagBlank(L *glua.LState) int {
	res := checkResponse(L, 1)
	f := L.CheckString(2)
	if len(f) != 1 {
		L.RaiseError("request: meta flag must be a single character")
	}
	if f[0] < 'A' || f[0] > 'z' {
		L.RaiseError("request: invalid flag, must be A-Z,a-z")
	}
	if res.redis {
		L.RaiseError("flag_blank: meta flags have no meaning for a Redis reply")
	}
	start, end, ok := metaFlagsAt(res.raw)
	if !ok {
		L.Push(glua.LFalse)
		return 1
	}
	for i := start; i < end; i++ {
		if res.raw[i] != f[0] || (i > start && res.raw[i-1] != ' ') {
			continue
		}
		if !res.ownRaw { // the reply's bytes may be shared: write a copy
			res.raw, res.ownRaw = bytes.Clone(res.raw), true
		}
		for ; i < end && res.raw[i] != ' '; i++ {
			res.raw[i] = ' '
		}
		res.parsed, res.line = false, nil
		L.Push(glua.LTrue)
		return 1
	}
	L.Push(glua.LFalse)
	return 1
}
