package lua_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServerStatsSections checks that mcp.server_stats gives a cron the
// sections the pool's "stats NAME" answers, as memcached's gives its own:
// the pool's settings, its listening socket under "conns", the internal
// cache under "items" and "slabs" (a table per class number) and the
// generators under "proxyfuncs" (summed over the workers, as memcached
// sums its threads'); and that a client's "stats NAME" shows the same.
func TestServerStatsSections(t *testing.T) {
	addr, logs := luaRoutes(t, `
function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end
function mcp_config_pools()
  mcp.register_cron("stats", { every = 1, func = function()
    local items = mcp.server_stats("items")
    if not items[1] then return end
    local settings = mcp.server_stats("settings")
    local conns = mcp.server_stats("conns")
    local slabs = mcp.server_stats("slabs")
    local funcs = mcp.server_stats("proxyfuncs")
    local threads = tonumber(mcp.server_stats().threads) -- each worker's generators count
    mcp.log(string.format("settings>=10:%s pool=%s conns=%s items=%s/%d slabs=%s/%s funcs=%d/%d",
      tostring(count(settings) >= 10), settings.pool, conns[1].state, items[1].number, count(items[1]),
      slabs[1].used_chunks, slabs.active_slabs, funcs.funcs_anonymous / threads, funcs.slots_anonymous / threads))
  end })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return mcp.internal(r) end)
end
`, nil, "")
	c := dial(t, addr)
	if got := c.do("set foo 0 0 2\r\nhi\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	want := "settings>=10:true pool=lp conns=conn_listening items=1/5 slabs=1/1 funcs=1/1"
	eventually(t, "the cron's line", func() bool { return strings.Contains(logs.String(), want) })
	n := strconv.Itoa(min(runtime.GOMAXPROCS(0), 16)) // the workers
	for req, want := range map[string]string{
		"stats proxyfuncs\r\n": "STAT funcs_anonymous " + n + "\r\nSTAT slots_anonymous " + n + "\r\nEND\r\n",
		"stats conns\r\n":      "STAT 1:addr tcp:" + addr + "\r\nSTAT 1:state conn_listening\r\nEND\r\n",
	} {
		if got := statsText(c, req); got != want {
			t.Errorf("%q: got %q, want %q", req, got, want)
		}
	}
}

// TestStatsProxyfuncs checks "stats proxyfuncs" against memcached's: each
// attached generator and those it reaches count once per worker under
// their name, a router as mcp_router with no slots, a generator no route
// reaches not at all; a generator's slots grow with the requests it
// serves at once (a sub-generator's with its parent's).
func TestStatsProxyfuncs(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({mcp.backend("b1", "127.0.0.1", {{SLOW}})})
end
function gen(h)
  local fg = mcp.funcgen_new()
  local handle = fg:new_handle(h)
  fg:ready({ n = "foo", f = function(rctx)
    return function(r) return rctx:enqueue_and_wait(r, handle) end
  end })
  return fg
end
function mcp_config_routes(p)
  gen(p) -- reached by no route
  mcp.attach(mcp.CMD_MG, mcp.router_new({ map = { two = gen(gen(p)) } }))
end
`, map[string]int{"SLOW": delayRelay(t, mc[0].Addr, 200*time.Millisecond)}, "")
	w := min(runtime.GOMAXPROCS(0), 16) // the workers
	stats := func() string { return statsText(dial(t, addr), "stats proxyfuncs\r\n") }
	want := fmt.Sprintf("STAT funcs_foo %d\r\nSTAT slots_foo %d\r\nSTAT funcs_mcp_router %d\r\nSTAT slots_mcp_router 0\r\nEND\r\n", 2*w, 2*w, w)
	if got := stats(); got != want {
		t.Errorf("at start: got %q, want %q", got, want)
	}
	c := dial(t, addr)
	c.send(strings.Repeat("mg two/k v\r\n", 5))
	for range 5 {
		if got := c.line(); got != "EN" {
			t.Fatalf("mg: %q", got)
		}
	}
	// one worker served the five at once: its parent and child have five
	// contexts each, not one
	want = fmt.Sprintf("STAT funcs_foo %d\r\nSTAT slots_foo %d\r\nSTAT funcs_mcp_router %d\r\nSTAT slots_mcp_router 0\r\nEND\r\n", 2*w, 2*w+8, w)
	if got := stats(); got != want {
		t.Errorf("after five at once: got %q, want %q", got, want)
	}
}
