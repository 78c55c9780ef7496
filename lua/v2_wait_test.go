package lua_test

import "testing"

// A wait with a timeout that its reply ends in time returns what it
// counted (wait_cond) or the response (wait_handle), and nil for "timed
// out", as in memcached: a script that tests the second result takes the
// no-timeout branch.
func TestV2WaitNoTimeout(t *testing.T) {
	mc := memcached(t, 1)
	src := `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{mc}}) })
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(p)
    fg:ready({ n = "nowait", f = function(rctx)
        return function(r)
            rctx:enqueue(r, h)
            local a, b
            if string.find(r:key(), "^cond/") then
                a, b = rctx:wait_cond(1, mcp.WAIT_ANY, 5)
            else
                a, b = rctx:wait_handle(h, 5)
            end
            if b then return "SERVER_ERROR timed out " .. type(b) .. "\r\n" end
            return "SERVER_ERROR in time " .. type(a) .. "\r\n"
        end
    end })
    mcp.attach(mcp.CMD_MG, fg)
end
`
	addr, _ := luaRoutes(t, src, map[string]int{"mc": mc[0].Port}, "")
	c := dial(t, addr)
	for key, want := range map[string]string{
		"cond/a":   "SERVER_ERROR in time number\r\n",
		"handle/a": "SERVER_ERROR in time userdata\r\n",
	} {
		for range 2 { // the second request reuses the context
			if got := c.do("mg " + key + " v\r\n"); got != want {
				t.Errorf("mg %s: %q, want %q", key, got, want)
			}
		}
	}
}
