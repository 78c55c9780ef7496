package lua_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"shardproxy/lua"
)

// loadCron builds a one-worker router for src, so that its handlers run in
// worker 0's state, where crons run.
func loadCron(t *testing.T, src string) *lua.Router {
	t.Helper()
	r, err := lua.New(lua.Config{
		Path: "routes.lua", Source: []byte(src), Dialect: memcacheDialect(t),
		Workers: 1, SetupTimeout: 500 * time.Millisecond, Logger: discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// cronHandler answers mg with the globals ticks and once.
const cronHandler = `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r)
    return "HD " .. tostring(ticks) .. " " .. tostring(once) .. "\r\n"
  end)
end
`

// TestCron checks that a cron registered in mcp_config_pools runs every
// second in worker 0's state, with a copy of the local it closes over,
// and that one with rerun = false (registered at the top level) runs once.
func TestCron(t *testing.T) {
	r := loadCron(t, `
mcp.register_cron("once", { every = 1, rerun = false, func = function() once = (once or 0) + 1 end })
function mcp_config_pools()
  local step = { by = 1 }
  mcp.register_cron("tick", { every = 1, func = function() ticks = (ticks or 0) + step.by end })
  return {}
end
`+cronHandler)
	d := memcacheDialect(t)
	var last string
	eventually(t, "three ticks", func() bool {
		last = route(t, r, d, "mg k\r\n")
		return strings.HasPrefix(last, "HD 3 ") || strings.HasPrefix(last, "HD 4 ")
	})
	if !strings.HasSuffix(last, " 1\r\n") {
		t.Errorf("after three ticks, %q: the rerun = false cron did not run exactly once", last)
	}
}

// TestCronStopsAtClose checks that Close (which a reload calls on the old
// router) stops the crons' goroutine.
func TestCronStopsAtClose(t *testing.T) {
	r, err := lua.New(lua.Config{
		Path: "routes.lua", Dialect: memcacheDialect(t), Workers: 1, Logger: discard(),
		Source: []byte(`function mcp_config_pools()
  mcp.register_cron("tick", { every = 1, func = function() ticks = (ticks or 0) + 1 end })
  return {}
end
` + cronHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close) // if it fails before its own Close
	running := func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "lua.(*Router).runCrons")
	}
	eventually(t, "the cron goroutine to start", running)
	r.Close()
	eventually(t, "the cron goroutine to end", func() bool { return !running() })
}

// TestCronErrors checks that bad register_cron arguments are refused at
// load time with the line of the call.
func TestCronErrors(t *testing.T) {
	pools := func(call string) string {
		return "function mcp_config_pools()\n  local f = function() end\n" + call + "\n  return {}\nend\n" + okRoutes
	}
	for _, tc := range []struct{ name, src, want string }{
		{"no func", pools("  mcp.register_cron('x', { every = 1 })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry missing 'func' field"},
		{"func not a function", pools("  mcp.register_cron('x', { every = 1, func = 'f' })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry 'func' must be a function, not string"},
		{"no every", pools("  mcp.register_cron('x', { func = f })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry missing 'every' field"},
		{"every zero", pools("  mcp.register_cron('x', { every = 0, func = f })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry 'every' must be > 0"},
		{"every negative", pools("  mcp.register_cron('x', { every = -5, func = f })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry 'every' must be > 0"},
		{"every fraction", pools("  mcp.register_cron('x', { every = 1.5, func = f })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry 'every' must be a whole number of seconds"},
		{"every a string", pools("  mcp.register_cron('x', { every = '1', func = f })"),
			"lua: routes.lua:3: mcp_config_pools: proxy cron entry 'every' must be a number, not string"},
		{"a function upvalue", pools("  mcp.register_cron('x', { every = 1, func = function() f() end })"),
			`lua: routes.lua:3: mcp.register_cron("x"): func uses the local f, a function: a cron runs in a worker state, and takes only tables, strings, numbers, booleans and pools from outside it (use a global instead)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.src)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}
