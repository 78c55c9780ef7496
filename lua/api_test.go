package lua_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// apiRoutes exposes the request and response methods to the tests.
//
//   - mg KEY FLAGS...: answers what the request methods say about it.
//   - set/ms: rewrites the request as its key asks, then sends it on.
//   - mg res:CASE: runs one backend request and answers what the
//     response methods say about its response.
//   - get ret:CASE: returns something other than a response.
const apiRoutes = `
function mcp_config_pools()
  return {
    main = mcp.pool({ mcp.backend("main", "127.0.0.1", {{MAIN}}) }),
    slow = mcp.pool({ mcp.backend("slow", "127.0.0.1", {{SLOW}}) }),
    fail = mcp.pool({ mcp.backend("fail", "127.0.0.1", {{FAIL}}) }),
  }
end

local function b(v) return tostring(v) end

local function describe(res)
  return string.format("ok=%s hit=%s vlen=%d code=%d line=%s",
    b(res:ok()), b(res:hit()), res:vlen(), res:code(), b(res:line()))
end

local cases = {}
local stash

function mcp_config_routes(p)
  cases = {
    getmiss = function() return p.main(mcp.request("get nothere\r\n")) end,
    gethit = function() return p.main(mcp.request("get hitkey\r\n")) end,
    set = function() return p.main(mcp.request("set newkey 0 0 2\r\n", "hi\r\n")) end,
    addexisting = function() return p.main(mcp.request("add hitkey 0 0 2\r\n", "hi\r\n")) end,
    delmissing = function() return p.main(mcp.request("delete nothere\r\n")) end,
    touch = function() return p.main(mcp.request("touch hitkey 0\r\n")) end,
    incr = function() return p.main(mcp.request("incr counter 5\r\n")) end,
    incrbad = function() return p.main(mcp.request("incr hitkey 5\r\n")) end,
    mghit = function() return p.main(mcp.request("mg hitkey v t f\r\n")) end,
    mgmiss = function() return p.main(mcp.request("mg nothere v\r\n")) end,
    ms = function() return p.main(mcp.request("ms mskey 2 O123\r\n", "hi\r\n")) end,
    mdmissing = function() return p.main(mcp.request("md nothere\r\n")) end,
    failed = function() return p.fail(mcp.request("get hitkey\r\n")) end,
  }
  mcp.attach(mcp.CMD_MG, function(r)
    local key = r:key()
    local case = string.match(key, "^res:(.+)")
    if case == "elapsed" then
      local res = p.slow(mcp.request("get hitkey\r\n"))
      return string.format("HD elapsed=%d\r\n", res:elapsed())
    elseif case then
      return "HD " .. describe(cases[case]()) .. "\r\n"
    end
    if string.find(key, "^q") or key == "hitkey" then return p.main(r) end
    if key == "stash" then
      stash = r
      return "HD\r\n"
    elseif key == "unstash" then
      return "HD " .. stash:key() .. "\r\n"
    elseif key == "sort" then
      local t = { 2, 1 }
      table.sort(t, function(a, b) p.main(r) return a < b end)
      return "HD sorted\r\n"
    elseif key == "meta" then
      local t = setmetatable({}, { __index = function(_, k) return p.main(r) end })
      return t.x
    elseif key == "pcall" then
      local ok, err = pcall(function() return p.main(r) end)
      return "HD " .. b(ok) .. " " .. string.gsub(err, "^.-:%d+: ", "") .. "\r\n"
    end
    local Texists, T = r:flag_token("T")
    local Nexists, N = r:flag_token("N")
    return string.format("HD cmd=%d key=%s n=%d t1=%s t3=%s t99=%s v=%s q=%s T=%s,%s N=%s,%s s=%s\r\n",
      r:command(), key, r:ntokens(), r:token(1), b(r:token(3)), b(r:token(99)),
      b(r:has_flag("v")), b(r:has_flag("q")), b(Texists), b(T), b(Nexists), b(N), tostring(r))
  end)
  mcp.attach(mcp.CMD_SET, function(r)
    local key = r:key()
    if string.find(key, "^/l/") then r:ltrimkey(3) end
    if string.find(key, "/r$") then r:rtrimkey(2) end
    if string.find(key, "^ttl") then r:token(4, "100") end
    if key == "cmd" then r:token(1, "add") end
    return p.main(r)
  end)
  mcp.attach(mcp.CMD_MS, function(r)
    r:flag_token("F", "F9")
    local had, old = r:flag_token("T", "")
    return p.main(r)
  end)
  mcp.attach(mcp.CMD_GET, function(r)
    local what = string.match(r:key(), "^ret:(.+)")
    if what == "string" then return "END\r\n" end
    if what == "nil" then return nil end
    if what == "number" then return 42 end
    if what == "error" then error("handler exploded") end
    if what == "failed" then return p.fail(r) end
    if what == "copy" then
      local g = p.main(mcp.request("get hitkey\r\n"))
      p.main(mcp.request("set copied 0 0 " .. g:vlen() .. "\r\n", g))
      local src = mcp.request("set copied2 0 0 3\r\n", "abc\r\n")
      p.main(mcp.request("set copied3 0 0 3\r\n", src))
      return p.main(mcp.request("get copied\r\n"))
    end
    return p.main(r)
  end)
end
`

func startAPI(t *testing.T) (*client, string, *logBuffer) {
	mc := memcached(t, 2)
	addr, logs := luaRoutes(t, apiRoutes, map[string]int{
		"MAIN": mc[0].Port,
		"SLOW": delayRelay(t, mc[1].Addr, 150*time.Millisecond),
		"FAIL": closedPort(t),
	}, "")
	set(t, mc[0].Addr, "hitkey", "hello")
	set(t, mc[1].Addr, "hitkey", "hello")
	return dial(t, addr), mc[0].Addr, logs
}

// TestRequestMethods checks r:command, r:key, r:token, r:ntokens,
// r:has_flag, r:flag_token and tostring(r).
func TestRequestMethods(t *testing.T) {
	c, _, _ := startAPI(t)
	for _, tc := range []struct{ req, want string }{
		{"mg foo v T30 k\r\n", "HD cmd=1 key=foo n=5 t1=mg t3=v t99=nil v=true q=false T=true,30 N=false,nil s=mg foo v T30 k\r\n"},
		{"mg foo T q\r\nmn\r\n", "HD cmd=1 key=foo n=4 t1=mg t3=T t99=nil v=false q=true T=true,nil N=false,nil s=mg foo T q\r\nMN\r\n"},
	} {
		c.send(tc.req)
		got := c.reply()
		if strings.HasSuffix(tc.req, "mn\r\n") {
			got += c.reply()
		}
		if got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.req, got, tc.want)
		}
	}
}

// TestRequestRewrites checks that r:ltrimkey, r:rtrimkey, r:token(n, new)
// and r:flag_token(f, new) change what reaches the backend.
func TestRequestRewrites(t *testing.T) {
	c, main, _ := startAPI(t)
	for _, tc := range []struct{ req, want, key, value string }{
		{"set /l/left 0 0 1\r\nL\r\n", "STORED\r\n", "left", "L"},
		{"set right/r 0 0 1\r\nR\r\n", "STORED\r\n", "right", "R"},
		{"set /l/both/r 0 0 1\r\nB\r\n", "STORED\r\n", "both", "B"},
		{"set ttlkey 0 0 1\r\nT\r\n", "STORED\r\n", "ttlkey", "T"},
		{"set cmd 0 0 1\r\nC\r\n", "SERVER_ERROR lua failure\r\n", "", ""},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
		if tc.key != "" {
			if v, ok := get(t, main, tc.key); !ok || v != tc.value {
				t.Errorf("%q: backend has %s=%q (%v)", tc.req, tc.key, v, ok)
			}
		}
	}
	// token(4, "100") set the TTL.
	d := dial(t, main)
	if got := d.do("mg ttlkey t\r\n"); !regexp.MustCompile(`^HD t(9\d|100)\r\n$`).MatchString(got) {
		t.Errorf("ttl after token rewrite: %q", got)
	}
	// flag_token replaced F and removed T.
	if got := c.do("ms flagged 2 F5 T1\r\nhi\r\n"); got != "HD\r\n" {
		t.Fatalf("ms: %q", got)
	}
	if got := d.do("mg flagged f t v\r\n"); got != "VA 2 f9 t-1\r\nhi\r\n" {
		t.Errorf("flags after flag_token rewrite: %q", got)
	}
}

// TestResponseMethods checks r:ok, r:hit, r:vlen, r:code, r:line and
// r:elapsed against memcached's mcmc classification.
func TestResponseMethods(t *testing.T) {
	c, _, _ := startAPI(t)
	for _, tc := range []struct{ name, want string }{
		{"gethit", "ok=true hit=true vlen=5 code=15 line=hitkey"},
		{"getmiss", "ok=true hit=false vlen=0 code=17 line=nil"},
		{"set", "ok=true hit=true vlen=0 code=8 line=nil"},
		{"addexisting", "ok=true hit=true vlen=0 code=14 line=nil"},
		{"delmissing", "ok=true hit=true vlen=0 code=13 line=nil"},
		{"touch", "ok=true hit=true vlen=0 code=11 line=nil"},
		{"incr", "ok=true hit=true vlen=0 code=13 line=nil"},
		{"incrbad", "ok=false hit=false vlen=0 code=22 line=nil"},
		{"mghit", "ok=true hit=true vlen=5 code=15 line=t-1 f0"},
		{"mgmiss", "ok=true hit=false vlen=0 code=17 line=nil"},
		{"ms", "ok=true hit=true vlen=0 code=15 line=O123"},
		{"mdmissing", "ok=true hit=true vlen=0 code=13 line=nil"},
		{"failed", "ok=false hit=false vlen=0 code=23 line=nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.do("mg res:" + tc.name + "\r\n"); got != "HD "+tc.want+"\r\n" {
				t.Errorf("got %q, want %q", got, "HD "+tc.want+"\r\n")
			}
		})
	}
	t.Run("elapsed", func(t *testing.T) {
		got := c.do("mg res:elapsed\r\n")
		us, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(got, "HD elapsed="), "\r\n"))
		if err != nil || us < 150000 || us > 2000000 {
			t.Errorf("elapsed of a reply held 150ms: %q", got)
		}
	})
}

// TestHandlerResults checks what the client sees for each kind of handler
// result, and that a script error is logged once with its line.
func TestHandlerResults(t *testing.T) {
	c, main, logs := startAPI(t)
	for _, tc := range []struct{ req, want string }{
		{"get ret:string\r\n", "END\r\n"},
		{"get hitkey\r\n", "VALUE hitkey 0 5\r\nhello\r\nEND\r\n"},
		{"get ret:nil\r\n", "SERVER_ERROR bad response\r\n"},
		{"get ret:number\r\n", "SERVER_ERROR bad response\r\n"},
		{"get ret:error\r\n", "SERVER_ERROR lua failure\r\n"},
		{"get ret:error\r\n", "SERVER_ERROR lua failure\r\n"},
		{"get ret:failed\r\n", "SERVER_ERROR backend failure\r\n"},
		{"get ret:copy\r\n", "VALUE copied 0 5\r\nhello\r\nEND\r\n"},
		{"mg stash\r\n", "HD\r\n"},
		{"mg unstash\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg pcall\r\n", "HD false pool(r) cannot wait inside pcall, xpcall, table.sort or string.gsub\r\n"},
		{"mg sort\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg meta\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg meta\r\n", "SERVER_ERROR lua failure\r\n"},
		{"get hitkey\r\n", "VALUE hitkey 0 5\r\nhello\r\nEND\r\n"},
		{"set nr 0 0 1 noreply\r\nx\r\nget nr\r\n", "VALUE nr 0 1\r\nx\r\nEND\r\n"},
		{"set cmd 0 0 1 noreply\r\nC\r\nmn\r\n", "MN\r\n"},
		{"mg qmiss v q\r\nmn\r\n", "MN\r\n"},
		{"mg hitkey v q\r\nmn\r\n", "VA 5\r\nhello\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	if got := c.reply(); got != "MN\r\n" {
		t.Errorf("after a quiet hit: %q", got)
	}
	if v, ok := get(t, main, "copied3"); !ok || v != "abc" {
		t.Errorf("mcp.request with a request's value: %q %v", v, ok)
	}
	if n := logs.count("handler exploded"); n != 1 {
		t.Errorf("the error was logged %d times, want once:\n%s", n, logs)
	}
	line := 1 + strings.Count(apiRoutes[:strings.Index(apiRoutes, `error("handler exploded")`)], "\n")
	if !strings.Contains(logs.String(), fmt.Sprintf("routes.lua:%d: handler exploded", line)) {
		t.Errorf("the log does not name the line:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "request used after its reply was sent") {
		t.Errorf("stale request use not logged:\n%s", logs)
	}
}

// TestMultiGet checks that a multi-key get runs the handler once per key,
// as memcached's proxy does, and answers in the client's key order.
func TestMultiGet(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return { a = mcp.pool({ mcp.backend("a", "127.0.0.1", {{A}}) }), b = mcp.pool({ mcp.backend("b", "127.0.0.1", {{B}}) }) }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r)
    if r:ntokens() ~= 2 then return "SERVER_ERROR not split\r\n" end
    if string.find(r:key(), "^b") then return p.b(r) end
    if r:key() == "err" then error("boom") end
    return p.a(r)
  end)
end`, map[string]int{"A": mc[0].Port, "B": mc[1].Port}, "")
	set(t, mc[0].Addr, "a1", "x")
	set(t, mc[1].Addr, "b1", "yy")
	set(t, mc[1].Addr, "a2", "wrong pool")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"get a1 b1 a2 a1\r\n", "VALUE a1 0 1\r\nx\r\nVALUE b1 0 2\r\nyy\r\nVALUE a1 0 1\r\nx\r\nEND\r\n"},
		{"get b1 nothing\r\n", "VALUE b1 0 2\r\nyy\r\nEND\r\n"},
		{"get a1 err\r\n", "VALUE a1 0 1\r\nx\r\nSERVER_ERROR lua failure\r\nEND\r\n"}, // in its place
	} {
		c.send(tc.req)
		if got := c.readN(len(tc.want)); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// TestAttach checks CMD_ANY, CMD_ANY_STORAGE, the order of attaches and an
// unattached command.
func TestAttach(t *testing.T) {
	d := memcacheDialect(t)
	r, err := load(t, okPools+`
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY, function(r) return "HD any\r\n" end)
  mcp.attach(mcp.CMD_GET, function(r) return "HD get\r\n" end)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return "HD storage\r\n" end)
  mcp.attach(mcp.CMD_DELETE, function(r) return "HD delete\r\n" end)
  mcp.attach("touch", function(r) return "HD touch by name\r\n" end)
end`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ req, want string }{
		{"get k\r\n", "HD storage\r\n"},   // ANY_STORAGE came after GET
		{"mg k\r\n", "HD storage\r\n"},    // a key command
		{"delete k\r\n", "HD delete\r\n"}, // DELETE came after ANY_STORAGE
		{"touch k 1\r\n", "HD touch by name\r\n"},
		{"flush_all\r\n", "HD any\r\n"}, // not a key command: only ANY covers it
	} {
		if got := route(t, r, d, tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	r2, err := load(t, okPools+`function mcp_config_routes(p) mcp.attach(mcp.CMD_GET, function(r) return "END\r\n" end) end`)
	if err != nil {
		t.Fatal(err)
	}
	if got := route(t, r2, d, "set k 0 0 1\r\nx\r\n"); got != "SERVER_ERROR no route for command set\r\n" {
		t.Errorf("unattached command: %q", got)
	}
}

// TestLogs checks mcp.log, mcp.log_req and mcp.log_reqsample.
func TestLogs(t *testing.T) {
	mc := memcached(t, 1)
	addr, logs := luaRoutes(t, `
function mcp_config_pools()
  mcp.log("configuring")
  return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{P}}) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r)
    local res = p(r)
    mcp.log("user line " .. r:key())
    mcp.log_req(r, res, "always")
    mcp.log_reqsample(0, 0, true, r, res, "errors only")
    mcp.log_reqsample(0, 1, false, r, res, "every one")
    mcp.log_reqsample(1000000, 0, false, r, res, "never")
    return res
  end)
end`, map[string]int{"P": mc[0].Port}, "")
	c := dial(t, addr)
	c.do("get logged\r\n")
	for _, want := range []string{
		`msg="lua log" pool=lp file=`, "msg=configuring",
		"msg=\"user line logged\"",
		`req="get logged"`, "detail=always", `detail="every one"`, "backend=b1", "code=17", "status=0",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, not := range []string{`detail="errors only"`, "detail=never"} {
		if strings.Contains(logs.String(), not) {
			t.Errorf("log has %q:\n%s", not, logs)
		}
	}
}

// TestStats checks mcp.add_stat and mcp.stat: an id past the highest
// declared fails the handler (memcached's "stat index out of range").
func TestStats(t *testing.T) {
	d := memcacheDialect(t)
	r, err := load(t, `
local HITS <const> = 1
local MISSES <const> = 3
function mcp_config_pools()
  mcp.add_stat(HITS, "hits")
  mcp.add_stat(MISSES, "misses")
  return {}
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r)
    if r:key() == "hit" then mcp.stat(HITS, 1) else mcp.stat(MISSES, 2) end
    if r:key() == "bad" then mcp.stat(4, 1) end
    return "END\r\n"
  end)
end`)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hit", "hit", "other"} {
		route(t, r, d, "get "+k+"\r\n")
	}
	if got := route(t, r, d, "get bad\r\n"); got != "SERVER_ERROR lua failure\r\n" {
		t.Errorf("a stat past the highest declared: %q", got)
	}
	got := fmt.Sprint(r.Stats())
	for _, want := range []string{"{user_hits 2}", "{user_misses 4}", "{lua_requests 4}", "{lua_failures 1}"} {
		if !strings.Contains(got, want) {
			t.Errorf("stats %s lack %s", got, want)
		}
	}
}

// TestDirectHandler checks that a `return pool(r)` handler, which the
// router runs without entering Lua, behaves as in Lua: it follows the
// upvalue when the script changes it, and errors come from Lua.
func TestDirectHandler(t *testing.T) {
	mc := memcached(t, 2)
	addr, logs := luaRoutes(t, `
function mcp_config_pools()
  return { a = mcp.pool({ mcp.backend("a", "127.0.0.1", {{A}}) }), b = mcp.pool({ mcp.backend("b", "127.0.0.1", {{B}}) }) }
end
function mcp_config_routes(p)
  local pool = p.a
  mcp.attach(mcp.CMD_ANY, function(r) return pool(r) end)
  mcp.attach(mcp.CMD_MG, function(r)
    local k = r:key()
    if k == "use-b" then pool = p.b end
    if k == "use-string" then pool = "not a pool" end
    if k == "use-a" then pool = p.a end
    if k == "hijack" then getmetatable(p.a).__call = function(self, r) return "HD hijacked\r\n" end end
    return "HD\r\n"
  end)
end`, map[string]int{"A": mc[0].Port, "B": mc[1].Port}, "")
	set(t, mc[0].Addr, "k", "a")
	set(t, mc[1].Addr, "k", "b")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"get k\r\n", valueReply("k", "a")},
		{"mg use-b\r\n", "HD\r\n"},
		{"get k\r\n", valueReply("k", "b")},
		{"get k k\r\n", "VALUE k 0 1\r\nb\r\nVALUE k 0 1\r\nb\r\nEND\r\n"},
		{"mg use-string\r\n", "HD\r\n"},
		{"get k\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg use-a\r\n", "HD\r\n"},
		{"get k\r\n", valueReply("k", "a")},
		{"mg hijack\r\n", "HD\r\n"},
		{"get k\r\n", "HD hijacked\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	// (A keyless command no longer reaches a memcache pool's handler:
	// memcached's proxy parses none but those it answers itself, and
	// closes the connection on the others, flush_all among them.)
	for _, want := range []string{"attempt to call a non-function object"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}
