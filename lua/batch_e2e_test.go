package lua_test

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// readCounter is a relay in front of a backend that counts the reads it
// makes of what the proxy sends: each read drains what the proxy wrote
// so far, so a batch of requests the proxy writes at once is one read.
type readCounter struct {
	addr  string
	reads atomic.Int64
}

func relayCountingReads(t *testing.T, backend string) *readCounter {
	t.Helper()
	rc := &readCounter{}
	port := relayTo(t, backend, relayEach(func([]byte) { rc.reads.Add(1) }), relayCopy)
	rc.addr = fmt.Sprintf("127.0.0.1:%d", port)
	return rc
}

// TestDirectPipelineOneWrite sends pipelined gets in one client write to
// a Lua pool whose get handler is direct, in V1 (`return pool(r)`) and in
// V2 (examples/lua/v2_basic.lua's shape): each client read must reach the
// backend in one write, not one per request.
func TestDirectPipelineOneWrite(t *testing.T) {
	mc := memcached(t, 1)
	for name, src := range map[string]string{
		"v1": `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b", "127.0.0.1", {{PORT}}) })
end
function mcp_config_routes(p)
    mcp.attach(mcp.CMD_GET, function(r) return p(r) end)
end`,
		"v2": `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b", "127.0.0.1", {{PORT}}) })
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    fg:ready({ a = fg:new_handle(p), f = function(rctx, h) return function(r) return rctx:enqueue_and_wait(r, h) end end })
    mcp.attach(mcp.CMD_GET, fg)
end`,
	} {
		t.Run(name, func(t *testing.T) {
			relay := relayCountingReads(t, mc[0].Addr)
			_, port, _ := net.SplitHostPort(relay.addr)
			var p int
			fmt.Sscan(port, &p)
			addr, _ := luaRoutes(t, src, map[string]int{"PORT": p}, "  server_connections: 1\n")
			c := dial(t, addr)
			if got := c.do("get warm\r\n"); got != "END\r\n" { // the socket is up
				t.Fatalf("get warm: %q", got)
			}
			const n, rounds = 16, 10
			for round := range rounds {
				before := relay.reads.Load()
				var b strings.Builder
				for i := range n {
					fmt.Fprintf(&b, "get k%d\r\n", i)
				}
				c.send(b.String())
				for i := range n {
					if got := c.reply(); got != "END\r\n" {
						t.Fatalf("round %d, get %d: %q", round, i, got)
					}
				}
				if got := relay.reads.Load() - before; got != 1 {
					t.Errorf("round %d: %d gets read by the proxy at once reached the backend in %d writes, want 1", round, n, got)
				}
			}
		})
	}
}
