package lua_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/lua"
)

// FuzzConfig loads arbitrary route files: loading never panics, never runs
// past its time limit, and either succeeds or reports a *ConfigError for
// the file.
func FuzzConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "lua", "*.lua"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		okPools + okRoutes,
		"function mcp_config_pools() return { a = { b = { 1, 'x', true } } } end\n" + okRoutes,
		"local t = {} t.t = t function mcp_config_pools() return t end\n" + okRoutes,
		"function mcp_config_pools() while true do end end",
		"local x <const> = 1 function mcp_config_pools() return x end",
		"function mcp_config_pools() return mcp.pool({ mcp.backend('a', 'h', 1) }, { dist = mcp.dist_ring_hash, omode = 'evcache', obuckets = 7 }) end\n" + okRoutes,
		"][",
	} {
		f.Add([]byte(s))
	}
	d := memcacheDialect(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := lua.New(lua.Config{Path: "fuzz.lua", Source: src, Dialect: d, Workers: 1,
			SetupTimeout: 20 * time.Millisecond, Logger: discard()})
		if err != nil {
			var ce *lua.ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.lua" {
				t.Fatalf("error is not a *ConfigError for fuzz.lua: %v", err)
			}
			return
		}
		r.Close()
	})
}

// fuzzMethods calls every Lua-facing request method, the inspectors and
// the mutators on a request parsed from the fuzzer's line, with the
// fuzzer's arguments, each under pcall. The client's ms carries the input
// in its value: line, a, b and n separated by NUL bytes.
const fuzzMethods = `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", 1) })
end
local function split(s)
  local out, i = {}, 1
  while true do
    local j = string.find(s, "\0", i, true)
    if not j then out[#out + 1] = string.sub(s, i) return out end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  fg:new_handle(p)
  local ins = mcp.req_inspector_new({ t = "sepkey" }, { t = "sepkey", sep = "/", pos = 2, map = { a = 1 } },
    { t = "keybegin", str = "a" }, { t = "keyis", str = "a/b" }, { t = "hasflag", flag = "v" },
    { t = "flagtoken", flag = "O" }, { t = "flagint", flag = "N" }, { t = "flagis", flag = "T", str = "1" })
  local rins = mcp.res_inspector_new({ t = "flagtoken", flag = "O" }, { t = "flagint", flag = "t" })
  local muts = {
    mcp.req_mutator_new({ t = "cmdcopy", idx = 1 }, { t = "keycopy", idx = 1 }, { t = "flagcopy", flag = "O", idx = 1 },
      { t = "valcopy", idx = 1 }),
    mcp.req_mutator_new({ t = "cmdcopy", idx = 2 }, { t = "keycopy", idx = 3 }, { t = "flagcopy", flag = "T", idx = 4 },
      { t = "flagset", flag = "N", val = 5 }, { t = "valcopy", idx = 3 }),
    mcp.req_mutator_new({ t = "cmdset", cmd = "ms" }, { t = "keycopy", idx = 2 }, { t = "valcopy", idx = 3 },
      { t = "flagcopyall", idx = 2 }),
  }
  local rmuts = {
    mcp.res_mutator_new({ t = "rescodecopy", idx = 2 }, { t = "flagcopy", flag = "O", idx = 1 }, { t = "valcopy", idx = 3 }),
    mcp.res_mutator_new({ t = "resnull", idx = 1 }, { t = "flagcopyall", idx = 2 }),
  }
  fg:ready({ n = "fuzz", u = 2, f = function(rctx)
    local nreq, nres = rctx:request_new(), rctx:response_new()
    return function(r)
      local parts = split(r:raw_value() or "")
      local line, a, b, n = parts[1] or "", parts[2] or "", parts[3] or "", tonumber(parts[4] or "") or 0
      local ok, q = pcall(mcp.request, line)
      if not ok then q = r end
      local calls = {
        { q.key }, { q.command }, { q.raw_line }, { q.raw_value }, { q.ntokens }, { q.token, n }, { q.token_int, n },
        { q.has_flag, a }, { q.flag_token, a }, { q.flag_token_int, a }, { q.flag_add, a, b }, { q.flag_add, a, n },
        { q.flag_set, a, b }, { q.flag_replace, a, b, n }, { q.flag_del, a }, { q.flag_token, a, b },
        { q.token, n, b }, { q.ltrimkey, n }, { q.rtrimkey, n }, { ins },
      }
      for _, c in ipairs(calls) do
        local f = table.remove(c, 1)
        if f == ins then pcall(ins, q) else pcall(f, q, unpack(c)) end
      end
      for _, m in ipairs(muts) do
        pcall(m, nreq, q, a, b, n)
        pcall(nreq.raw_line, nreq)
        pcall(m, q, nreq, b, a)
      end
      local res = mcp.request("mg x\r\n")
      for _, m in ipairs(rmuts) do
        pcall(m, nres, q, a, b)
        pcall(rins, nres)
        pcall(nres.flag_blank, nres, a)
        pcall(q.match_res, q, nres)
        pcall(nres.raw_string, nres)
        pcall(nres.close, nres)
      end
      return "HD\r\n"
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`

// FuzzRequestMethods parses a random request line and calls the
// Lua-facing request methods, inspectors and mutators on it with random
// arguments: the worker never panics, and every request is answered.
func FuzzRequestMethods(f *testing.F) {
	for _, s := range []struct {
		line, a, b string
		n          int
	}{
		{"mg a/b v N5 O123 T1\r\n", "O", "x", 2},
		{"ms a/b 2 T0\r\nhi\r\n", "T", "30", 3},
		{"get a/b c d\r\n", "v", "", 1},
		{"set a/b 0 0 2 noreply\r\nhi\r\n", "F", "1.5", 5},
		{"gat 10 a/b\r\n", "k", "\r\n", -1},
		{"mg  a//b  v  \r\n", "1", "hello\r\n", 0},
		{"ma a/b N0 D5 MI\r\n", "N", "", 1 << 30},
		{"md\r\n", "", "", 0},
	} {
		f.Add(s.line, s.a, s.b, s.n)
	}
	d := memcacheDialect(f)
	var logs logBuffer
	r, err := lua.New(lua.Config{Path: "fuzz.lua", Source: []byte(fuzzMethods), Dialect: d, Workers: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(r.Close)
	f.Fuzz(func(t *testing.T, line, a, b string, n int) {
		payload := line + "\x00" + a + "\x00" + b + "\x00" + strconv.Itoa(n)
		req := fmt.Sprintf("ms fuzz %d\r\n%s\r\n", len(payload), payload)
		if got := route(t, r, d, req); got != "HD\r\n" {
			t.Fatalf("answer %q", got)
		}
		if strings.Contains(logs.String(), "panic") {
			t.Fatalf("worker panicked:\n%s", logs.String())
		}
	})
}
