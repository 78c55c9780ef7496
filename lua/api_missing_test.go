package lua_test

import (
	"log/slog"
	"strings"
	"testing"

	"shardproxy/lua"
)

// TestUnsupportedNames checks that a route file calling what shardproxy
// lacks (memcached's V2 API, the files a route file may load) is refused
// naming it, with the file and the line of the call.
func TestUnsupportedNames(t *testing.T) {
	routesWith := func(body string) string {
		return okPools + "function mcp_config_routes(p)\n" + body + "\nend\n" // body from line 5
	}
	poolsWith := func(body string) string {
		return "function mcp_config_pools()\n" + body + "\n  return {}\nend\n" + okRoutes // body from line 2
	}
	for _, tc := range []struct {
		name string
		src  string
		want string // the whole error text
	}{
		{"a route-stage function at the top level", "-- a V2 route file\nlocal fg = mcp.funcgen_new()\n" + okPools + okRoutes,
			"lua: routes.lua:2: loading: mcp.funcgen_new can only be called from mcp_config_routes"},
		{"os.execute in mcp_config_routes", routesWith("  local m = os.execute()\n  mcp.attach(mcp.CMD_GET, function(r) end)"),
			"lua: routes.lua:6: mcp_config_routes: os.execute is not available in shardproxy route files"},
		{"a route-stage function in mcp_config_pools", poolsWith("  local fg = mcp.funcgen_new()"),
			"lua: routes.lua:2: mcp_config_pools: mcp.funcgen_new can only be called from mcp_config_routes"},
		{"server_stats at the route stage", routesWith("  mcp.server_stats(\n    'settings')"),
			"lua: routes.lua:6: mcp_config_routes: mcp.server_stats can only be called from mcp_config_pools or a cron"},
		{"server_stats unknown section", poolsWith("  mcp.server_stats('bogus')"),
			"lua: routes.lua:2: mcp_config_pools: unknown subcommand passed to server_stats"},
		{"ratelim_global_tbf at the route stage", routesWith("  local lim = mcp.ratelim_global_tbf({ limit = 10, fillrate = 5, tickrate = 10 })"),
			"lua: routes.lua:6: mcp_config_routes: mcp.ratelim_global_tbf can only be called from mcp_config_pools"},
		{"ratelim_tbf at the config stage", poolsWith("  local lim = mcp.ratelim_tbf({ limit = 10 })"),
			"lua: routes.lua:2: mcp_config_pools: mcp.ratelim_tbf can only be called from mcp_config_routes"},
		{"ratelim_tbf out of range", routesWith("  local lim = mcp.ratelim_tbf({ limit = -1 })"),
			"lua: routes.lua:6: mcp_config_routes: mcp.ratelim_tbf: arguments must be unsigned 32 bit integer"},
		{"dofile", "dofile(\"x.lua\")\n" + okPools + okRoutes,
			"lua: routes.lua:1: loading: cannot open x.lua: no such file"},
		{"require", "local lib = require(\"x\")\n" + okPools + okRoutes,
			"lua: routes.lua:1: loading: module 'x' not found: no file x.lua or x/init.lua in ."},
		{"dofile in mcp_config_pools", poolsWith("  dofile('mode.lua')"),
			"lua: routes.lua:2: mcp_config_pools: cannot open mode.lua: no such file"},
		{"the call, not the argument", routesWith("  mcp.attach(mcp.CMD_ANY_STORAGE,\n    mcp.router_new({ map = { a = os.execute() } }))"),
			"lua: routes.lua:7: mcp_config_routes: os.execute is not available in shardproxy route files"},
		{"a constant argument", routesWith("  local r = os.execute({ mode = 'anchor', wait = mcp.WAIT_ANY })"),
			"lua: routes.lua:6: mcp_config_routes: os.execute is not available in shardproxy route files"},
		{"tail call", routesWith("  return os.execute()"),
			"lua: routes.lua:6: mcp_config_routes: os.execute is not available in shardproxy route files"},
		{"unknown mcp name", "mcp.funcgen_neww()\n" + okPools + okRoutes,
			"lua: routes.lua:1: loading: mcp.funcgen_neww does not exist"},
		{"route function at the config stage", poolsWith("  mcp.attach(mcp.CMD_GET, function(r) end)"),
			"lua: routes.lua:2: mcp_config_pools: mcp.attach can only be called from mcp_config_routes"},
		{"io", "io.write('hello')\n" + okPools + okRoutes,
			"lua: routes.lua:1: loading: io is not available in shardproxy route files"},
		{"os.execute", "os.execute('true')\n" + okPools + okRoutes,
			"lua: routes.lua:1: loading: os.execute is not available in shardproxy route files"},
		{"routelib config", "pools{\n  main = { backends = { \"127.0.0.1:11211\" } }\n}\n" +
			"routes{\n  default = route_direct{ child = \"main\" }\n}\n",
			"lua: routes.lua:1: loading: pools belongs to memcached's routelib: give the pool lua: ROUTELIB.lua (routelib.lua of memcached) and lua_arg: THIS_FILE"},
		{"undefined global", "setup()\n" + okPools + okRoutes,
			"lua: routes.lua:1: loading: attempt to call a nil value (global 'setup')"},
		{"nil local keeps gopher-lua's error", "local f\nf()\n" + okPools + okRoutes,
			"lua: routes.lua:2: loading: attempt to call a non-function object"},
		{"nil field keeps gopher-lua's error", "local t = {}\nlocal x = t.a.b\n" + okPools + okRoutes,
			"lua: routes.lua:2: loading: attempt to index a non-table object(nil) with key 'b'"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantConfigError(t, tc.src, tc.want) })
	}
}

// TestUnsupportedNamesRead checks that reading an absent name is still
// nil, so a file that tests for memcached's V2 API (or for a global) takes
// its other branch and loads.
func TestUnsupportedNamesRead(t *testing.T) {
	r, err := load(t, `
local gen = "v1"
if os.execute then
  gen = "v2"
  local m = os.execute()
end
if mcp.start_arg or os.execute or mcp.frobnicate or module or io then gen = "?" end
if pcall(os.execute, {}) then gen = "?" end
function mcp_config_pools()
  if os.execute then os.execute("x") end
  return {}
end
function mcp_config_routes(p)
  if undefined_global ~= nil then gen = "?" end
  mcp.attach(mcp.CMD_MG, function(r)
    if os.execute or DEBUG then return "HD v2\r\n" end
    return "HD " .. gen .. "\r\n"
  end)
end
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := route(t, r, memcacheDialect(t), "mg k\r\n"); got != "HD v1\r\n" {
		t.Errorf("got %q, want HD v1", got)
	}
}

// TestUnsupportedNamesInHandler checks that a handler calling what
// shardproxy lacks answers "lua failure" and the log names it.
func TestUnsupportedNamesInHandler(t *testing.T) {
	src := okPools + `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return os.execute(r) end)
  local fg = mcp.funcgen_new()
  fg:ready{ n = "cn", f = function(rctx)
    return function(r) return rctx:tls_peer_cn() end
  end }
  mcp.attach(mcp.CMD_MD, fg)
end
`
	logs := &logBuffer{}
	d := memcacheDialect(t)
	r, err := lua.New(lua.Config{Path: "routes.lua", Source: []byte(src), Dialect: d, Workers: 1,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct{ req, log string }{
		{"mg k\r\n", `err="routes.lua:7: os.execute is not available in shardproxy route files"`},
		{"md k\r\n", `err="routes.lua:10: rctx:tls_peer_cn is not supported by shardproxy yet"`},
	} {
		if got := route(t, r, d, tc.req); got != "SERVER_ERROR lua failure\r\n" {
			t.Errorf("%q: got %q", tc.req, got)
		}
		if !strings.Contains(logs.String(), tc.log) {
			t.Errorf("%q: the log lacks %s:\n%s", tc.req, tc.log, logs)
		}
	}
}
