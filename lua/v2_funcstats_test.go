package lua_test

import (
	"strings"
	"testing"
	"time"
)

// funcStatsRoutes has a named generator ("hold") that waits for its pool,
// and a router whose only route is it.
const funcStatsRoutes = `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{mc}}) })
end

function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(p)
    fg:ready({ n = "hold", f = function(rctx)
        return function(r)
            rctx:enqueue(r, h)
            rctx:wait_cond(1)
            return rctx:res_any(h)
        end
    end })
    local anon = mcp.funcgen_new()
    anon:ready({ f = function(rctx)
        return function(r) return "SERVER_ERROR anon\r\n" end
    end })
    mcp.attach(mcp.CMD_MG, mcp.router_new({ map = { hold = fg }, default = anon }))
end
`

// "stats proxyfuncs" counts generators and their request contexts by
// name, as memcached's proxy does: funcs_NAME ready generators (a router
// is "mcp_router", a generator without n "anonymous"), slots_NAME the
// contexts they made, one at ready and one more for each request in flight
// beyond those free; contexts go back to their generator, so the same
// load again makes none. "stats" shows proxy_req_active, the requests
// being served.
func TestV2FuncStats(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 300*time.Millisecond)
	addr, _ := luaRoutes(t, funcStatsRoutes, map[string]int{"mc": slow}, "")
	c, admin := dial(t, addr), dial(t, addr)

	before := statLines(t, admin, "stats proxyfuncs\r\n")
	workers := statInt(t, before, "funcs_hold")
	if workers < 1 {
		t.Fatalf("funcs_hold %d", workers)
	}
	for _, name := range []string{"hold", "anonymous", "mcp_router"} {
		if n := statInt(t, before, "funcs_"+name); n != workers {
			t.Errorf("funcs_%s = %d, want %d (one per worker)", name, n, workers)
		}
	}
	if n := statInt(t, before, "slots_hold"); n != workers {
		t.Errorf("slots_hold = %d before any request, want %d (the one ready made)", n, workers)
	}
	if n := statInt(t, statLines(t, admin, "stats\r\n"), "proxy_req_active"); n != 0 {
		t.Errorf("proxy_req_active %d when idle", n)
	}

	const inFlight = 4
	round := func() int {
		c.send(strings.Repeat("mg hold/k v\r\n", inFlight))
		active := 0
		eventually(t, "the requests to be served", func() bool {
			active = statInt(t, statLines(t, admin, "stats\r\n"), "proxy_req_active")
			return active == inFlight
		})
		for range inFlight {
			if got := c.reply(); got != "EN\r\n" {
				t.Fatalf("mg hold/k: %q", got)
			}
		}
		eventually(t, "no request to be active", func() bool {
			return statInt(t, statLines(t, admin, "stats\r\n"), "proxy_req_active") == 0
		})
		return statInt(t, statLines(t, admin, "stats proxyfuncs\r\n"), "slots_hold")
	}
	first := round()
	if first < workers+inFlight-1 {
		t.Errorf("slots_hold %d with %d requests in flight, want at least %d", first, inFlight, workers+inFlight-1)
	}
	if again := round(); again != first {
		t.Errorf("slots_hold %d after the same load again, want %d: contexts leak", again, first)
	}
	if got := c.do("mg other\r\n"); got != "SERVER_ERROR anon\r\n" {
		t.Errorf("default route: %q", got)
	}
}
