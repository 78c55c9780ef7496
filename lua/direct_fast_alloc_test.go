package lua_test

import (
	"fmt"
	"runtime"
	"testing"

	"shardproxy/internal/testserver"
	"shardproxy/lua"
)

// signal is a Completion that keeps the answer's length and allocates
// nothing.
type signal chan int

func (s signal) Complete(out []byte) { s <- len(out) }

// TestDirectWayGarbage routes gets of a 100-byte value through the direct
// ways (V1 `return p(r)`, V2 enqueue_and_wait) against a real memcached
// and checks the heap they allocate per request: the reply's buffer must
// go back to the backend's reader (which carves replies from 64 KiB
// chunks) rather than to the garbage collector, which cost some 150 bytes
// a request.
func TestDirectWayGarbage(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	mc := testserver.StartMemcached(t)
	set(t, mc.Addr, "k", fmt.Sprintf("%0100d", 0))
	d := memcacheDialect(t)
	for _, h := range benchHandlers {
		if h.name == "lua" {
			continue // copies the reply into a response object
		}
		t.Run(h.name, func(t *testing.T) {
			r, err := lua.New(lua.Config{Path: "t.lua", Dialect: d, Logger: discard(), Workers: 1, Source: []byte(fmt.Sprintf(`
function mcp_config_pools() return mcp.pool({ mcp.backend("b1", "127.0.0.1", %d) }) end
function mcp_config_routes(p) %s end`, mc.Port, h.routes))})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			req := parseRequest(t, d, "get k\r\n")
			c := make(signal, 1)
			run := func(n int) {
				for range n {
					r.Route(req, 1, c)
					if got := <-c; got != len("VALUE k 0 100\r\n\r\nEND\r\n")+100 {
						t.Fatalf("answer of %d bytes", got)
					}
				}
			}
			run(2000) // warm up: pools, buffers, the lock-free way
			const n = 20000
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			run(n)
			runtime.ReadMemStats(&after)
			if per := float64(after.TotalAlloc-before.TotalAlloc) / n; per > 40 {
				t.Errorf("%.0f bytes allocated per request, want under 40", per)
			}
		})
	}
}
