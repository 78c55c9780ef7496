package lua_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// The V2 API (function generators, request contexts, routers) end to end:
// the route files of examples/lua, unchanged but for their ports, in front
// of real memcached servers.

// exampleRoutes loads examples/lua/name with each literal port in ports
// replaced by the port of the server started for it, and starts a proxy.
func exampleRoutes(t *testing.T, name string, ports map[int]int) (string, *logBuffer) {
	t.Helper()
	return fileRoutes(t, filepath.Join("..", "examples", "lua", name), ports, "")
}

func TestV2Basic(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := exampleRoutes(t, "v2_basic.lua", map[int]int{11211: mc[0].Port})
	c := dial(t, addr)
	if got := c.do(setReq("k1", "hello")); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	if v, ok := get(t, mc[0].Addr, "k1"); !ok || v != "hello" {
		t.Fatalf("backend has %q %v", v, ok)
	}
	if got := c.do("get k1\r\n"); got != valueReply("k1", "hello") {
		t.Errorf("get: %q", got)
	}
	if got := c.do("get nope\r\n"); got != "END\r\n" {
		t.Errorf("get miss: %q", got)
	}
	if got := c.do("mg k1 v\r\n"); got != "VA 5\r\nhello\r\n" {
		t.Errorf("mg: %q", got)
	}
	// a multi-get runs the handler per key, each in a request context of its own
	if got := c.do("get k1 nope k1\r\n"); got != "VALUE k1 0 5\r\nhello\r\nVALUE k1 0 5\r\nhello\r\nEND\r\n" {
		t.Errorf("multi-get: %q", got)
	}
}

// Many requests in flight at once each get a request context of their own.
func TestV2Pipelined(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 20*time.Millisecond)
	addr, _ := exampleRoutes(t, "v2_basic.lua", map[int]int{11211: slow})
	c := dial(t, addr)
	var b strings.Builder
	for i := range 50 {
		b.WriteString(setReq(fmt.Sprintf("p%d", i), strconv.Itoa(i)))
	}
	c.send(b.String())
	for i := range 50 {
		if got := c.reply(); got != "STORED\r\n" {
			t.Fatalf("set %d: %q", i, got)
		}
	}
	b.Reset()
	for i := range 50 {
		fmt.Fprintf(&b, "get p%d\r\n", i)
	}
	c.send(b.String())
	for i := range 50 {
		if got := c.reply(); got != valueReply(fmt.Sprintf("p%d", i), strconv.Itoa(i)) {
			t.Fatalf("get %d: %q", i, got)
		}
	}
}

func TestV2Failover(t *testing.T) {
	mc := memcached(t, 1)
	dead := closedPort(t)
	addr, _ := exampleRoutes(t, "v2_failover.lua", map[int]int{11311: dead, 11312: mc[0].Port})
	c := dial(t, addr)
	if got := c.do(setReq("f1", "x")); got != "STORED\r\n" {
		t.Fatalf("set through a dead primary: %q", got)
	}
	if v, ok := get(t, mc[0].Addr, "f1"); !ok || v != "x" {
		t.Fatalf("secondary has %q %v", v, ok)
	}
	if got := c.do("get f1\r\n"); got != valueReply("f1", "x") {
		t.Errorf("get: %q", got)
	}
}

// A live primary that misses: the secondary answers.
func TestV2FailoverOnMiss(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_failover.lua", map[int]int{11311: mc[0].Port, 11312: mc[1].Port})
	set(t, mc[1].Addr, "only2", "two")
	set(t, mc[0].Addr, "both", "one")
	set(t, mc[1].Addr, "both", "two")
	c := dial(t, addr)
	if got := c.do("get only2\r\n"); got != valueReply("only2", "two") {
		t.Errorf("get only2: %q", got)
	}
	if got := c.do("get both\r\n"); got != valueReply("both", "one") {
		t.Errorf("get both: %q", got)
	}
}

func TestV2AllAndFastest(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_allfastest.lua", map[int]int{11411: mc[0].Port, 11412: mc[1].Port})
	c := dial(t, addr)
	// enqueue to two pools + wait_cond(2, WAIT_ANY) + res_any
	if got := c.do(setReq("r1", "v")); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	for i, s := range mc {
		if v, ok := get(t, s.Addr, "r1"); !ok || v != "v" {
			t.Errorf("server %d has %q %v", i, v, ok)
		}
	}
	// wait_cond(1, WAIT_GOOD) over two handles
	if got := c.do("get r1\r\n"); got != valueReply("r1", "v") {
		t.Errorf("get: %q", got)
	}
	set(t, mc[1].Addr, "on2", "b")
	if got := c.do("get on2\r\n"); got != valueReply("on2", "b") {
		t.Errorf("get of a key on the second pool only: %q", got)
	}
	if got := c.do("get none\r\n"); got != "END\r\n" {
		t.Errorf("miss everywhere: %q", got)
	}
}

// WAIT_GOOD returns at the first hit: a slow pool does not hold it up.
func TestV2FastestDoesNotWait(t *testing.T) {
	mc := memcached(t, 2)
	slow := delayRelay(t, mc[0].Addr, 500*time.Millisecond)
	addr, _ := exampleRoutes(t, "v2_allfastest.lua", map[int]int{11411: slow, 11412: mc[1].Port})
	set(t, mc[0].Addr, "k", "slow")
	set(t, mc[1].Addr, "k", "fast")
	c := dial(t, addr)
	got, took := c.timed("get k\r\n")
	if got != valueReply("k", "fast") {
		t.Errorf("get: %q", got)
	}
	if took > 400*time.Millisecond {
		t.Errorf("took %v: waited for the slow pool", took)
	}
	// the late reply comes back to a request context that has answered; the
	// next requests are served normally
	if got := c.do("get k\r\n"); got != valueReply("k", "fast") {
		t.Errorf("second get: %q", got)
	}
}

func TestV2Router(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_router.lua", map[int]int{11511: mc[0].Port, 11512: mc[1].Port})
	c := dial(t, addr)
	for _, tc := range []struct {
		req, want string
	}{
		{setReq("users/1", "u"), "STORED\r\n"},
		{setReq("items/1", "i"), "STORED\r\n"},
		{setReq("other/1", "o"), "SERVER_ERROR no route for this key\r\n"},
		{setReq("noslash", "o"), "SERVER_ERROR no route for this key\r\n"},
		{setReq("/users", "o"), "SERVER_ERROR no route for this key\r\n"}, // empty prefix
		{"get users/1\r\n", valueReply("users/1", "u")},
		// anchor mode: "/" + name + "/"
		{"ms /users/2 1\r\nU\r\n", "HD\r\n"},
		{"mg /users/2 v\r\n", "VA 1\r\nU\r\n"},
		{"mg users/1 v\r\n", "SERVER_ERROR lua start failure\r\n"}, // no anchor, no default
		{"mg /nobody/1 v\r\n", "SERVER_ERROR lua start failure\r\n"},
		{"mg /users v\r\n", "SERVER_ERROR lua start failure\r\n"}, // no stop
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	if _, ok := get(t, mc[0].Addr, "users/1"); !ok {
		t.Error("users/1 is not on the users pool")
	}
	if _, ok := get(t, mc[1].Addr, "items/1"); !ok {
		t.Error("items/1 is not on the items pool")
	}
	if _, ok := get(t, mc[0].Addr, "/users/2"); !ok {
		t.Error("/users/2 is not on the users pool")
	}
}

// A file mixing V1 handlers (pool(r)) and V2 generators.
func TestV2WithV1(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", {{MC}}) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return p(r) end) -- V1
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  fg:ready({ f = function(rctx) return function(r) return rctx:enqueue_and_wait(r, h) end end })
  mcp.attach(mcp.CMD_SET, fg)
end`, map[string]int{"MC": mc[0].Port}, "")
	c := dial(t, addr)
	if got := c.do(setReq("k", "v")); got != "STORED\r\n" {
		t.Fatalf("set (V2): %q", got)
	}
	if got := c.do("get k\r\n"); got != valueReply("k", "v") {
		t.Errorf("get (V1): %q", got)
	}
}

// v2Semantics is a route file whose handler does, for each key, one thing
// the tests check: handle 0 is a live memcached, handle 1 a backend that
// never answers.
const v2Semantics = `
function mcp_config_pools()
  return {
    live = mcp.pool({ mcp.backend("live", "127.0.0.1", {{LIVE}}) }),
    silent = mcp.pool({ mcp.backend({ label = "silent", host = "127.0.0.1", port = {{SILENT}}, readtimeout = 0.5 }) }),
  }
end

local function gen(rctx, h)
  local uses = 0
  return function(r)
    uses = uses + 1
    local k = r:key()
    if k == "timeout_cond" then
      rctx:enqueue(r, { h.live, h.silent })
      local done, timedout = rctx:wait_cond(2, mcp.WAIT_ANY, 0.1)
      return "HD d" .. done .. " t" .. tostring(timedout) .. "\r\n"
    elseif k == "timeout_handle" then
      local res, timedout = rctx:enqueue_and_wait(r, h.silent, 0.1)
      return "HD r" .. tostring(res) .. " t" .. tostring(timedout) .. "\r\n"
    elseif k == "readtimeout" then
      -- no rctx timeout: the backend's read timeout answers the call
      local res = rctx:enqueue_and_wait(r, h.silent)
      local _, flag = rctx:result(h.silent)
      return "HD ok" .. tostring(res:ok()) .. " f" .. flag .. "\r\n"
    elseif k == "codes" or k == "codes_miss" then
      rctx:enqueue(r, h.live)
      local done = rctx:wait_cond(1, mcp.WAIT_OK)
      local res, flag = rctx:result(h.live)
      local good = rctx:res_good(h.live) ~= nil
      local ok = rctx:res_ok(h.live) ~= nil
      return "HD d" .. done .. " f" .. flag .. " g" .. tostring(good) .. " o" .. tostring(ok) .. "\r\n"
    elseif k == "unwaited" then
      return "HD r" .. tostring(rctx:res_any(h.live)) .. "\r\n"
    elseif k == "background" then
      rctx:enqueue(r, h.live)
      local done = rctx:wait_cond(0)
      return "HD d" .. done .. "\r\n"
    elseif k == "uses" then
      return "HD u" .. uses .. "\r\n"
    elseif k == "fail" then
      error("boom")
    elseif k == "pcall" then
      local ok, err = pcall(function() return rctx:enqueue_and_wait(r, h.live) end)
      return "HD ok" .. tostring(ok) .. "\r\n"
    elseif k == "badmode" then
      rctx:wait_cond(1, 99)
    elseif k == "unqueued" then
      rctx:wait_handle(h.live)
    elseif k == "sleep" then
      local t = os.clock()
      rctx:sleep(0.05)
      return "HD slept\r\n"
    end
    return rctx:enqueue_and_wait(r, h.live)
  end
end

function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = { live = fg:new_handle(p.live), silent = fg:new_handle(p.silent) }
  fg:ready({ n = "semantics", f = gen, a = h })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`

func TestV2Semantics(t *testing.T) {
	mc := memcached(t, 1)
	addr, logs := luaRoutes(t, v2Semantics, map[string]int{"LIVE": mc[0].Port, "SILENT": silentPort(t)}, "")
	set(t, mc[0].Addr, "codes", "x")
	c := dial(t, addr)
	// one client, one request at a time: the same context serves them all
	if a, b := c.do("mg uses\r\n"), c.do("mg uses\r\n"); a != "HD u1\r\n" || b != "HD u2\r\n" {
		t.Errorf("uses: %q then %q", a, b)
	}
	for _, tc := range []struct {
		req, want string
	}{
		{"mg timeout_cond\r\n", "HD d1 ttrue\r\n"},            // the live one answered, then the timeout
		{"mg timeout_handle\r\n", "HD rnil ttrue\r\n"},        // no response, timed out
		{"mg readtimeout\r\n", "HD okfalse f32\r\n"},          // RES_ANY (an error)
		{"mg codes v\r\n", "HD d1 f8 gtrue otrue\r\n"},        // a hit: RES_GOOD
		{"mg codes_miss v\r\n", "HD d1 f16 gfalse otrue\r\n"}, // a miss: RES_OK
		{"mg unwaited\r\n", "HD rnil\r\n"},
		{"mg background\r\n", "HD d0\r\n"},
		{"mg fail\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg pcall\r\n", "HD okfalse\r\n"},
		{"mg badmode\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg unqueued\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg sleep\r\n", "HD slept\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	for _, msg := range []string{"boom", "invalid mode sent to wait_cond", "wait_handle called on unqueued handle"} {
		if logs.count(msg) == 0 {
			t.Errorf("log lacks %q:\n%s", msg, logs)
		}
	}
}

// TestV2ConfigErrors checks the route stage's refusals of misused V2
// objects, with memcached's wording where memcached has one.
func TestV2ConfigErrors(t *testing.T) {
	ready := `local ok = mcp.funcgen_new(); ok:ready({ f = function(rctx) return function(r) return "HD\r\n" end end })
`
	for _, tc := range []struct {
		name, routes, want string
	}{
		{"no f", `mcp.funcgen_new():ready({})`, "Must specify generator function ('f') to fgen:ready"},
		{"ready twice", ready + `ok:ready({ f = function() end })`, "cannot modify function generator after calling ready"},
		{"handle after ready", ready + `ok:new_handle(p.main)`, "cannot modify function generator after calling ready"},
		{"bad handle", `mcp.funcgen_new():new_handle(5)`, "invalid argument to new_handle"},
		{"internal handler", `mcp.funcgen_new():new_handle(mcp.internal_handler)`,
			"mcp.internal_handler: the pool has no internal cache (a Redis pool has none)"},
		{"unready fgen handle", `local f = mcp.funcgen_new(); f:new_handle(mcp.funcgen_new()); f:ready({ f = function() return print end })`,
			"fgen:ready: handle 0 is a function generator that is not ready (call its ready first)"},
		{"fgen its own handle", `local f = mcp.funcgen_new(); f:new_handle(f); f:ready({ f = function() return print end })`,
			"fgen:ready: handle 0 is a function generator that is not ready"},
		{"router handle", ready + `mcp.funcgen_new():new_handle(mcp.router_new({ map = { a = ok } }))`, "cannot assign a router to a handle in new_handle"},
		{"generator error", `mcp.funcgen_new():ready({ f = function() error("gen broke") end })`, "gen broke"},
		{"generator returns nothing", `mcp.funcgen_new():ready({ f = function() end })`, "function generator didn't return a function"},
		{"u out of range", `mcp.funcgen_new():ready({ f = function() return print end, u = 0 })`, "user obj ('u') in fgen:ready must be between 1 and 255"},
		{"attach not ready", `mcp.attach(mcp.CMD_GET, mcp.funcgen_new())`, "function generator is not ready"},
		{"router no map", `mcp.router_new({})`, "Must pass map and/or cmap to mcp.router_new"},
		{"router mode", ready + `mcp.router_new({ map = { a = ok }, mode = "suffix" })`, "unknown type passed to mcp.router_new"},
		{"router anchor", ready + `mcp.router_new({ map = { a = ok }, mode = "anchor", start = "/" })`, "must specify start and stop if mode is anchor in mcp.router_new"},
		{"router long stop", ready + `mcp.router_new({ map = { a = ok }, mode = "prefix", stop = "123456" })`, "stop is too long in mcp.router_new"},
		{"router bad value", `mcp.router_new({ map = { a = 1 } })`, "unhandled data in router_new map"},
		{"router bad command", ready + `mcp.router_new({ cmap = { [mcp.CMD_STATS] = ok } })`, "Bad command in router command map in router_new"},
		{"router not ready", `mcp.router_new({ map = { a = mcp.funcgen_new() } })`, "function generator is not ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := okPools + "function mcp_config_routes(p)\n" + tc.routes + "\nmcp.attach(mcp.CMD_GET, function(r) return p.main(r) end)\nend\n"
			_, err := load(t, src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A generator that fails when a request needs a new context answers that
// request "SERVER_ERROR lua start failure"; the others are served.
func TestV2GeneratorFailsAtRuntime(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 100*time.Millisecond)
	addr, logs := luaRoutes(t, `
armed = false
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", {{MC}}) })
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  fg:ready({ n = "fragile", f = function(rctx)
    if armed then error("no more contexts") end
    return function(r)
      armed = true
      return rctx:enqueue_and_wait(r, h)
    end
  end })
  mcp.attach(mcp.CMD_MG, fg)
end`, map[string]int{"MC": slow}, "")
	c := dial(t, addr)
	c.send("mg a\r\nmg b\r\n")
	if got := c.reply(); got != "EN\r\n" {
		t.Errorf("first: %q", got)
	}
	if got := c.reply(); got != "SERVER_ERROR lua start failure\r\n" {
		t.Errorf("second: %q", got)
	}
	if got := c.do("mg c\r\n"); got != "EN\r\n" { // the first context is free again
		t.Errorf("third: %q", got)
	}
	if logs.count("no more contexts") == 0 {
		t.Errorf("the generator's error is not logged:\n%s", logs)
	}
}

// TestV2RouterCommandMaps: a router's map entry may be a table by command,
// and a router may have a cmap (by command, for keys no map entry takes)
// and a default. A command an entry's table lacks goes to the cmap, then
// to the default; a router with a cmap alone takes the default for every
// other command.
func TestV2RouterCommandMaps(t *testing.T) {
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("unused", "127.0.0.1", 1) })
end
local function answer(text)
  local g = mcp.funcgen_new()
  g:ready({ f = function() return function() return "SERVER_ERROR " .. text .. "\r\n" end end })
  return g
end
function mcp_config_routes(p)
  local by_prefix = {
    acct = { [mcp.CMD_GET] = answer("acct read"), [mcp.CMD_SET] = answer("acct write") },
    sess = { [mcp.CMD_ANY_STORAGE] = answer("sess any") },
  }
  local by_command = { [mcp.CMD_DECR] = answer("decr by command") }
  mcp.attach(mcp.CMD_ANY_STORAGE, mcp.router_new({ map = by_prefix, cmap = by_command,
    mode = "prefix", stop = ":", default = answer("fallback") }))
  mcp.attach(mcp.CMD_GETS, mcp.router_new({ cmap = { [mcp.CMD_GETS] = answer("gets by command") } }))
  mcp.attach(mcp.CMD_GAT, mcp.router_new({ cmap = { [mcp.CMD_GETS] = answer("unused") },
    default = answer("gat fallback") }))
end`, nil, "")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"get acct:7\r\n", "SERVER_ERROR acct read\r\n"},
		{setReq("acct:7", "x"), "SERVER_ERROR acct write\r\n"},
		{"delete acct:7\r\n", "SERVER_ERROR fallback\r\n"},
		{"delete sess:7\r\n", "SERVER_ERROR sess any\r\n"},
		{"decr unknown:7 1\r\n", "SERVER_ERROR decr by command\r\n"},
		{"decr acct:7 1\r\n", "SERVER_ERROR decr by command\r\n"},
		{"gets any:7\r\n", "SERVER_ERROR gets by command\r\n"},
		{"gat 5 any:7\r\n", "SERVER_ERROR gat fallback\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// The V2 objects work on a Redis pool too: a prefix router over two
// servers, commands by name in a command map.
func TestV2Redis(t *testing.T) {
	rs := []*testserver.Server{testserver.StartRedis(t), testserver.StartRedis(t)}
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return { a = mcp.pool({ mcp.backend("a", "127.0.0.1", {{A}}) }), b = mcp.pool({ mcp.backend("b", "127.0.0.1", {{B}}) }) }
end
local function direct(pool)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(pool)
  fg:ready({ f = function(rctx) return function(r) return rctx:enqueue_and_wait(r, h) end end })
  return fg
end
function mcp_config_routes(p)
  local ro = mcp.funcgen_new()
  ro:ready({ f = function() return function() return "-ERR read only\r\n" end end })
  mcp.attach(mcp.CMD_ANY_STORAGE, mcp.router_new({
    map = { a = direct(p.a), b = { [mcp.CMD_GET] = direct(p.b), [mcp.CMD_SET] = ro } },
    mode = "prefix", stop = ":", default = direct(p.a),
  }))
end`, map[string]int{"A": rs[0].Port, "B": rs[1].Port}, "  redis: true\n")
	c := dialRESP(t, addr)
	if got := c.do("SET", "a:1", "x"); got != "+OK" {
		t.Errorf("set a:1: %q", got)
	}
	if got := c.do("SET", "b:1", "y"); got != "-ERR read only" {
		t.Errorf("set b:1: %q", got)
	}
	if got := c.do("GET", "b:1"); got != "$-1" {
		t.Errorf("get b:1: %q", got)
	}
	if got := c.do("GET", "a:1"); got != "$1 x" {
		t.Errorf("get a:1: %q", got)
	}
}

// TestV2BestWorstResult: best_result prefers a good result to a miss to an
// error, worst_result an error to a miss to a good result, each among the
// handles it is given and whatever their order.
func TestV2BestWorstResult(t *testing.T) {
	mc := memcached(t, 2)
	keys := []string{"best_all", "best_nohit", "worst_hitmiss", "worst_all"}
	for _, k := range keys {
		set(t, mc[0].Addr, k, "x")
	}
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return {
    hit = mcp.pool({ mcp.backend("hit", "127.0.0.1", {{HIT}}) }),
    miss = mcp.pool({ mcp.backend("miss", "127.0.0.1", {{MISS}}) }),
    down = mcp.pool({ mcp.backend("down", "127.0.0.1", {{DOWN}}) }),
  }
end
local function gen(rctx, h)
  local among = {
    best_all = { "best_result", { h.miss, h.hit, h.down } },
    best_nohit = { "best_result", { h.down, h.miss } },
    worst_hitmiss = { "worst_result", { h.hit, h.miss } },
    worst_all = { "worst_result", { h.miss, h.down, h.hit } },
  }
  return function(r)
    rctx:enqueue(r, { h.hit, h.miss, h.down })
    rctx:wait_cond(3, mcp.WAIT_ANY)
    local how = among[r:key()]
    return (rctx[how[1]](rctx, how[2]))
  end
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = { hit = fg:new_handle(p.hit), miss = fg:new_handle(p.miss), down = fg:new_handle(p.down) }
  fg:ready({ n = "bestworst", f = gen, a = h })
  mcp.attach(mcp.CMD_MG, fg)
end`, map[string]int{"HIT": mc[0].Port, "MISS": mc[1].Port, "DOWN": closedPort(t)}, "")
	c := dial(t, addr)
	for _, tc := range []struct{ key, want string }{
		{"best_all", "VA 1\r\nx\r\n"},
		{"best_nohit", "EN\r\n"},
		{"worst_hitmiss", "EN\r\n"},
		{"worst_all", "SERVER_ERROR backend failure\r\n"},
	} {
		got := c.do("mg " + tc.key + " v\r\n")
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.key, got, tc.want)
		}
	}
}

// rctx:cfd() numbers the client connection: the same for every request of
// one connection, different between two.
func TestV2Cfd(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("a", "127.0.0.1", {{MC}}) })
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  fg:new_handle(p)
  fg:ready{ n = "cfd", f = function(rctx)
    return function(r) return "HD c" .. tostring(rctx:cfd()) .. "\r\n" end
  end }
  mcp.attach(mcp.CMD_MG, fg)
end
`, map[string]int{"MC": mc[0].Port}, "")
	a, b := dial(t, addr), dial(t, addr)
	a1, a2, b1 := a.do("mg k\r\n"), a.do("mg k\r\n"), b.do("mg k\r\n")
	if !strings.HasPrefix(a1, "HD c") || a1 == "HD cnil\r\n" {
		t.Fatalf("cfd: %q", a1)
	}
	if a1 != a2 {
		t.Errorf("one connection, two numbers: %q and %q", a1, a2)
	}
	if a1 == b1 {
		t.Errorf("two connections, one number: %q", a1)
	}
}

// A request context keeps its copy of the client's request for its next
// request, and a call that outlives its handler (a wait for one handle of
// two) keeps its own: the slow pool gets every set as the client sent it,
// of every size, while the contexts are reused round after round.
func TestV2RequestCopyReuse(t *testing.T) {
	mc := memcached(t, 2)
	slow := delayRelay(t, mc[1].Addr, 30*time.Millisecond)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
    return { fast = mcp.pool({ mcp.backend("f", "127.0.0.1", {{fast}}) }),
             slow = mcp.pool({ mcp.backend("s", "127.0.0.1", {{slow}}) }) }
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local hf = fg:new_handle(p.fast)
    local hs = fg:new_handle(p.slow)
    fg:ready({ n = "copy", f = function(rctx)
        return function(r)
            rctx:enqueue(r, { hf, hs })
            return rctx:wait_handle(hf)
        end
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`, map[string]int{"fast": mc[0].Port, "slow": slow}, "")
	c := dial(t, addr)
	sizes := []int{1, 5000, 3, 40000, 40, 100000, 7}
	value := func(round, i int) string { return strings.Repeat(string(rune('a'+round*len(sizes)+i)), sizes[i]) }
	for round := range 3 {
		var b strings.Builder
		for i := range sizes {
			b.WriteString(setReq(fmt.Sprintf("k%d", i), value(round, i)))
		}
		c.send(b.String()) // pipelined: several contexts in flight
		for i := range sizes {
			if got := c.reply(); got != "STORED\r\n" {
				t.Fatalf("round %d, set %d: %q", round, i, got)
			}
		}
		for i := range sizes {
			key, want := fmt.Sprintf("k%d", i), value(round, i)
			eventually(t, "the slow pool has "+key+" of round "+strconv.Itoa(round), func() bool {
				v, ok := get(t, mc[1].Addr, key)
				return ok && v == want
			})
			if got := c.do("get " + key + "\r\n"); got != valueReply(key, want) {
				t.Fatalf("round %d: get %s: %.60q", round, key, got)
			}
		}
	}
}

// v2Handler is a route stage whose generator returns handler (Lua source
// using rctx and h) for the pool main.
func v2Handler(handler string) string {
	return `
function mcp_config_pools()
    return { main = mcp.pool({ mcp.backend("b1", "127.0.0.1", {{mc}}) }) }
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(p.main)
    fg:ready({ n = "t", a = h, f = function(rctx, h)
        return ` + handler + `
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`
}

// A handler that only does `return rctx:enqueue_and_wait(r, h)` is routed
// without Lua (direct_v2.go); the client sees what the same handler run in
// Lua gives, request for request: hits, misses, stores, noreply, meta
// flags, quiet mode, multi-gets and a backend that is down.
func TestV2DirectSameReplies(t *testing.T) {
	mc := memcached(t, 1)
	direct, _ := luaRoutes(t, v2Handler(`function(r) return rctx:enqueue_and_wait(r, h) end`),
		map[string]int{"mc": mc[0].Port}, "")
	inLua, _ := luaRoutes(t, v2Handler(`function(r) local res = rctx:enqueue_and_wait(r, h) return res or "x" end`),
		map[string]int{"mc": mc[0].Port}, "")
	dead := closedPort(t)
	directDown, _ := luaRoutes(t, v2Handler(`function(r) return rctx:enqueue_and_wait(r, h) end`),
		map[string]int{"mc": dead}, "")
	inLuaDown, _ := luaRoutes(t, v2Handler(`function(r) local res = rctx:enqueue_and_wait(r, h) return res or "x" end`),
		map[string]int{"mc": dead}, "")
	steps := []struct{ req, key string }{
		{setReq("d1", "hello"), "d1"},
		{"get d1\r\n", "d1"},
		{"get nope\r\n", ""},
		{"add d1 0 0 1\r\nx\r\n", ""},
		{"set d2 5 0 2 noreply\r\nab\r\nget d2\r\n", "d2"},
		{"get d1 d2 nope\r\n", ""},
		{"mg d1 v f t k\r\n", ""},
		{"mg nope v q\r\nmg d1 v q\r\nmn\r\n", ""},
		{"ms d3 2 T0\r\nhi\r\n", "d3"},
		{"md d3 q\r\nmn\r\n", ""},
		{"incr nope 1\r\n", ""},
		{"delete d1\r\n", "d1"},
		{"touch d2 10\r\n", ""},
	}
	for _, pair := range []struct {
		name       string
		a, b       string
		flushFirst bool
	}{{"backend up", direct, inLua, true}, {"backend down", directDown, inLuaDown, false}} {
		t.Run(pair.name, func(t *testing.T) {
			run := func(addr string) []string {
				if pair.flushFirst {
					if got := dial(t, mc[0].Addr).do("flush_all\r\n"); got != "OK\r\n" {
						t.Fatalf("flush_all: %q", got)
					}
				}
				c := dial(t, addr)
				var out []string
				for _, s := range steps {
					c.send(s.req)
					out = append(out, readFor(t, c, s.req))
				}
				return out
			}
			a, b := run(pair.a), run(pair.b)
			for i := range steps {
				if a[i] != b[i] {
					t.Errorf("%q: direct %q, in Lua %q", steps[i].req, a[i], b[i])
				}
			}
		})
	}
}

// readFor reads the replies to req: one per request that has a reply
// (noreply has none; quiet meta requests end at mn's MN).
func readFor(t *testing.T, c *client, req string) string {
	t.Helper()
	var b strings.Builder
	lines := strings.Split(strings.TrimSuffix(req, "\r\n"), "\r\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
			continue
		case f[0] == "set" || f[0] == "add" || f[0] == "ms":
			i++ // its value line
			if f[len(f)-1] == "noreply" {
				continue
			}
		case strings.HasSuffix(l, " q"):
			continue // quiet: only mn shows whether it answered
		}
		b.WriteString(c.reply())
	}
	return b.String()
}

// A handler of the direct shape whose conditions do not hold at a request
// runs in Lua, with Lua's outcome: a handle out of range is an error, and
// an enqueue_and_wait replaced in the context's metatable is the one
// called.
func TestV2DirectFallsBack(t *testing.T) {
	mc := memcached(t, 1)
	ports := map[string]int{"mc": mc[0].Port}
	bad, logs := luaRoutes(t, v2Handler(`function(r) return rctx:enqueue_and_wait(r, 5) end`), ports, "")
	if got := dial(t, bad).do("get k\r\n"); got != "SERVER_ERROR lua failure\r\n" {
		t.Errorf("handle 5 of 1: %q", got)
	}
	if logs.count("invalid handle") == 0 {
		t.Errorf("no log line for the invalid handle:\n%s", logs)
	}
	replaced, _ := luaRoutes(t, v2Handler(`(function()
            getmetatable(rctx).__index.enqueue_and_wait = function(self, r, h) return "HD replaced\r\n" end
            return function(r) return rctx:enqueue_and_wait(r, h) end
        end)()`), ports, "")
	if got := dial(t, replaced).do("get k\r\n"); got != "HD replaced\r\n" {
		t.Errorf("replaced enqueue_and_wait: %q", got)
	}
}

// A handler of the direct shape (only enqueue_and_wait to one handle)
// still runs in Lua when that handle is a sub-generator or has a callback:
// the child's handler and the callback must run.
func TestV2DirectShapeChildAndCallback(t *testing.T) {
	mc := memcached(t, 1)
	set(t, mc[0].Addr, "k", "v")
	addr, logs := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("a", "127.0.0.1", {{MC}}) })
end
function mcp_config_routes(p)
  local child = mcp.funcgen_new()
  local ch = child:new_handle(p)
  child:ready{ n = "child", f = function(rctx)
    return function(r) return "HD child\r\n" end
  end }
  local parent = mcp.funcgen_new()
  local h = parent:new_handle(child)
  parent:ready{ n = "parent", f = function(rctx)
    return function(r) return rctx:enqueue_and_wait(r, h) end
  end }
  mcp.attach(mcp.CMD_MG, parent)

  local cbg = mcp.funcgen_new()
  local hp = cbg:new_handle(p)
  cbg:ready{ n = "cb", f = function(rctx)
    rctx:handle_set_cb(hp, function(res, req)
      mcp.log("callback ran for " .. req:key())
    end)
    return function(r) return rctx:enqueue_and_wait(r, hp) end
  end }
  mcp.attach(mcp.CMD_GET, cbg)
end
`, map[string]int{"MC": mc[0].Port}, "")
	c := dial(t, addr)
	for i := 0; i < 3; i++ {
		if got := c.do("mg k v\r\n"); got != "HD child\r\n" {
			t.Fatalf("mg through the child: %q", got)
		}
	}
	if got := c.do("get k\r\n"); got != "VALUE k 0 1\r\nv\r\nEND\r\n" {
		t.Fatalf("get: %q", got)
	}
	eventually(t, "the callback's log line", func() bool { return logs.count("callback ran for k") == 1 })
}

// TestV2NearCache runs examples/lua/v2_near_cache.lua: a second get of a
// key is answered from the proxy's own cache without reaching the
// backend; a write through the proxy drops the near copy first; a write
// that bypasses the proxy shows once the near copy expires (NEAR_TTL, 5
// seconds). What the client sees and what reaches the backend are what
// memcached 1.6.45's proxy does with the same file.
func TestV2NearCache(t *testing.T) {
	mc := memcached(t, 1)
	port, tp := tapRelay(t, mc[0].Addr)
	addr, _ := exampleRoutes(t, "v2_near_cache.lua", map[int]int{11611: port})
	c := dial(t, addr)
	for _, s := range []struct{ req, want, sent string }{
		{"set k 3 0 2\r\nv1\r\n", "STORED\r\n", "set k 3 0 2\r\nv1\r\n"},
		{"get k\r\n", "VALUE k 3 2\r\nv1\r\nEND\r\n", "get k\r\n"},
		{"get k\r\n", "VALUE k 3 2\r\nv1\r\nEND\r\n", ""}, // from the near cache
		{"set k 4 0 2\r\nv2\r\n", "STORED\r\n", "set k 4 0 2\r\nv2\r\n"},
		{"get k\r\n", "VALUE k 4 2\r\nv2\r\nEND\r\n", "get k\r\n"},
		{"get k\r\n", "VALUE k 4 2\r\nv2\r\nEND\r\n", ""},
		{"delete k\r\n", "DELETED\r\n", "delete k\r\n"},
		{"get k\r\n", "END\r\n", "get k\r\n"},
		{"mg k v\r\n", "EN\r\n", "mg k v\r\n"},
		{"incr k 1\r\n", "NOT_FOUND\r\n", "incr k 1\r\n"},
	} {
		tp.reset()
		if got := c.do(s.req); got != s.want {
			t.Errorf("%q: got %q, want %q", s.req, got, s.want)
		}
		tp.waitSent(t, s.req, s.sent)
	}

	// A write that bypasses the proxy: the near copy serves the old value
	// until it expires.
	if got := c.do("get far\r\n"); got != "END\r\n" {
		t.Fatalf("get far: %q", got)
	}
	set(t, mc[0].Addr, "far", "old")
	if got := c.do("get far\r\n"); got != valueReply("far", "old") {
		t.Fatalf("get far: %q", got)
	}
	set(t, mc[0].Addr, "far", "new")
	if got := c.do("get far\r\n"); got != valueReply("far", "old") {
		t.Errorf("get far within NEAR_TTL of a write that bypassed the proxy: %q, want the near copy", got)
	}
	deadline := time.Now().Add(8 * time.Second) // NEAR_TTL and the store's one-second clock
	for c.do("get far\r\n") != valueReply("far", "new") {
		if time.Now().After(deadline) {
			t.Fatal("the near copy outlived NEAR_TTL")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
