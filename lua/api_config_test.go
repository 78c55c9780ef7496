package lua_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/lua"
	_ "shardproxy/memcache"
)

func memcacheDialect(t testing.TB) codec.Dialect {
	t.Helper()
	d, ok := codec.Lookup("memcache")
	if !ok {
		t.Fatal("memcache dialect not registered")
	}
	return d
}

// load builds a router for src (named routes.lua) without starting any
// backend: backends dial at first use.
func load(t testing.TB, src string) (*lua.Router, error) {
	t.Helper()
	r, err := lua.New(lua.Config{
		Path: "routes.lua", Source: []byte(src), Dialect: memcacheDialect(t),
		Workers: 2, SetupTimeout: 2 * time.Second, MaxAlloc: 32 << 20, Logger: discard(),
	})
	if err == nil {
		t.Cleanup(r.Close)
	}
	return r, err
}

const okPools = `
function mcp_config_pools()
  return { main = mcp.pool({ mcp.backend("b1", "127.0.0.1", 11211) }) }
end
`

const okRoutes = `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return p.main(r) end)
end
`

// TestConfigErrors checks that every kind of broken route file is refused
// with the file and the line of the problem.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want string // the whole error text
	}{
		{"syntax error", "function mcp_config_pools()\n  return {\nend\n",
			"lua: routes.lua:3: syntax error near 'end'"},
		{"unterminated", "function mcp_config_pools()\n  local x = 1\n",
			"lua: routes.lua:2: syntax error at end of file"},
		{"missing routes", okPools,
			"lua: routes.lua: mcp_config_routes is not defined (a route file must define mcp_config_pools and mcp_config_routes)"},
		{"missing pools", okRoutes,
			"lua: routes.lua: mcp_config_pools is not defined (a route file must define mcp_config_pools and mcp_config_routes)"},
		{"error at top level", "local x = nil\nx.y = 1\n" + okPools + okRoutes,
			"lua: routes.lua:2: loading: attempt to index a non-table object(nil) with key 'y'"},
		{"bad backend option type", "function mcp_config_pools()\n  return mcp.pool({\n    mcp.backend({ label = 'b1', host = '127.0.0.1', port = 11211, readtimeout = 'soon' }) })\nend\n" + okRoutes,
			"lua: routes.lua:3: mcp_config_pools: backend option readtimeout must be a number, not string"},
		{"unknown backend option", "function mcp_config_pools()\n  return mcp.pool({ mcp.backend({ label = 'b1', host = 'h', port = 1, retrytimout = 1 }) })\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: backend: unknown option \"retrytimout\""},
		{"backend without port", "function mcp_config_pools()\n  return mcp.pool({ mcp.backend({ label = 'b1', host = 'h' }) })\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: backend must have a port argument"},
		{"bad port", "function mcp_config_pools()\n  return mcp.pool({ mcp.backend('b1', 'h', 'http') })\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: backend b1: bad port \"http\""},
		{"bad dist", "function mcp_config_pools()\n  local b = mcp.backend('b1', 'h', 1)\n  return mcp.pool({ b }, { dist = 'ketama' })\nend\n" + okRoutes,
			"lua: routes.lua:3: mcp_config_pools: pool: dist must be one of mcp.dist_jump_hash, mcp.dist_ring_hash, mcp.dist_ketama, mcp.dist_modula, mcp.dist_random"},
		{"unknown pool option", "function mcp_config_pools()\n  return mcp.pool({ mcp.backend('b1', 'h', 1) }, { hahs = mcp.hash_xxhash })\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: pool: unknown option hahs"},
		{"filter without conf", "function mcp_config_pools()\n  return mcp.pool({ mcp.backend('b1', 'h', 1) }, { filter = 'stop' })\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: pool: hash filter requires 'filter_conf' string"},
		{"empty pool", "function mcp_config_pools()\n  return mcp.pool({})\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: pool must have at least one backend"},
		{"negative failure limit", "function mcp_config_pools()\n  mcp.backend_failure_limit(-1)\n  return {}\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: backend_failure_limit must be >= 0"},
		{"function in pools table", "function mcp_config_pools()\n  return { f = print }\nend\n" + okRoutes,
			"lua: routes.lua: mcp_config_pools: unhandled function in configuration table (at result.f): only tables, strings, numbers, booleans, pools and global rate limits can be passed to mcp_config_routes"},
		{"attach a table", okPools + "function mcp_config_routes(p)\n  mcp.attach(mcp.CMD_GET, {})\nend\n",
			"lua: routes.lua:6: mcp_config_routes: Must pass a function to mcp.attach"},
		{"attach unknown command", okPools + "function mcp_config_routes(p)\n  mcp.attach(99, function(r) end)\nend\n",
			"lua: routes.lua:6: mcp_config_routes: mcp.attach: unknown command 99"},
		{"long tag", okPools + "function mcp_config_routes(p)\n  mcp.attach(mcp.CMD_GET, function(r) end, 'ninechars')\nend\n",
			"lua: routes.lua:6: mcp_config_routes: mcp.attach: tag must be 1 to 8 characters"},
		{"no handler", okPools + "function mcp_config_routes(p)\nend\n",
			"lua: routes.lua: mcp_config_routes attached no handler (call mcp.attach)"},
		{"pool at route stage", okPools + "function mcp_config_routes(p)\n  mcp.pool({})\nend\n",
			"lua: routes.lua:6: mcp_config_routes: mcp.pool can only be called from mcp_config_pools"},
		{"endless config", "function mcp_config_pools()\n  while true do end\nend\n" + okRoutes,
			"lua: routes.lua:2: mcp_config_pools: ran longer than 2s"},
		{"endless routes", okPools + "function mcp_config_routes(p)\n  mcp.attach(mcp.CMD_GET, function(r) end)\n  repeat until false\nend\n",
			"lua: routes.lua:7: mcp_config_routes: ran longer than 2s"},
		{"endless top level", "local n = 0\nwhile true do n = n + 1 end\n" + okPools + okRoutes,
			"lua: routes.lua:2: loading: ran longer than 2s"},
		{"greedy config", "function mcp_config_pools()\n  local t = {}\n  while true do t[#t + 1] = string.rep('x', 1e6) end\nend\n" + okRoutes,
			"lua: routes.lua:3: mcp_config_pools: allocated more than 32 MiB"},
		{"greedy routes", okPools + "function mcp_config_routes(p)\n  local t, mb = {}, string.rep('y', 1e6)\n  while true do t[#t + 1] = mb .. #t end\nend\n",
			"lua: routes.lua:7: mcp_config_routes: allocated more than 32 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantConfigError(t, tc.src, tc.want) })
	}
}

// wantConfigError checks that src is refused with a *lua.ConfigError for
// routes.lua whose whole text is want.
func wantConfigError(t *testing.T, src, want string) {
	t.Helper()
	_, err := load(t, src)
	if err == nil {
		t.Fatal("loaded")
	}
	var ce *lua.ConfigError
	if !errors.As(err, &ce) || ce.File != "routes.lua" {
		t.Errorf("not a *ConfigError for routes.lua: %#v", err)
	}
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}

func TestConfigLoads(t *testing.T) {
	if _, err := load(t, okPools+okRoutes); err != nil {
		t.Fatal(err)
	}
	_ = strings.TrimSpace
}

// sink keeps an allocation from being optimised away.
var sink []byte

// TestSetupAllocBudgetIsPerRun checks that a setup stage is charged with
// what is allocated while it runs, not since the process started: after
// the process has allocated more than MaxAlloc, a stage that runs for
// several of the guard's ticks without allocating still loads.
func TestSetupAllocBudgetIsPerRun(t *testing.T) {
	for range 4 {
		sink = make([]byte, 16<<20) // 64 MiB in all, twice the budget of load
	}
	sink = nil
	_, err := load(t, `
function mcp_config_pools()
  local stop = os.clock() + 0.1
  while os.clock() < stop do end
  return { main = mcp.pool({ mcp.backend("b1", "127.0.0.1", 11211) }) }
end
`+okRoutes)
	if err != nil {
		t.Fatal(err)
	}
}
