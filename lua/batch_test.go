package lua

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// batchRoutes attach a direct handler to get and one that runs in Lua to
// set, in V1 and in V2; PORT is the backend's port.
var batchRoutes = map[string]string{
	"v1": `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b", "127.0.0.1", PORT) })
end
function mcp_config_routes(p)
    mcp.attach(mcp.CMD_GET, function(r) return p(r) end)
    mcp.attach(mcp.CMD_SET, function(r) local res = p(r) return res end)
end`,
	"v2": `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b", "127.0.0.1", PORT) })
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    fg:ready({ a = fg:new_handle(p), f = function(rctx, h) return function(r) return rctx:enqueue_and_wait(r, h) end end })
    mcp.attach(mcp.CMD_GET, fg)
    local lua = mcp.funcgen_new()
    lua:ready({ a = lua:new_handle(p), f = function(rctx, h) return function(r) return (rctx:enqueue_and_wait(r, h)) or "x" end end })
    mcp.attach(mcp.CMD_SET, lua)
end`,
}

// TestDirectStagedInBatch routes requests of direct handlers with a batch,
// as a session routes one client read: none reaches the backend before the
// batch is flushed, and then all of them do, and are answered. A request
// that runs in Lua, or is queued for the state, flushes what was staged
// before it, so it cannot overtake the client's earlier requests.
func TestDirectStagedInBatch(t *testing.T) {
	d, ok := codec.Lookup("memcache")
	if !ok {
		t.Fatal("memcache dialect not registered")
	}
	mc := testserver.StartMemcached(t)
	for name, src := range batchRoutes {
		t.Run(name, func(t *testing.T) {
			r, err := New(Config{Path: "t.lua", Dialect: d, Workers: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Source: []byte(strings.ReplaceAll(src, "PORT", strconv.Itoa(mc.Port)))})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			st := r.Backends()[0].Stats()
			answers := make(chanCompletion, 64)
			var bt backend.Batch
			route := func(s string, bt *backend.Batch) {
				t.Helper()
				s = strings.Replace(s, " ", " "+name+"-", 1) // each subtest its own keys
				req := &codec.Request{}
				if n, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(s), req); err != nil || n != len(s) {
					t.Fatalf("parse %q: %d %v", s, n, err)
				}
				r.RouteBatch(req, 1, answers, bt)
			}
			wait := func(n int, want string) {
				t.Helper()
				for i := range n {
					select {
					case out := <-answers:
						if !strings.HasPrefix(out, want) {
							t.Errorf("answer %d: %q, want %q...", i, out, want)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("%d of %d answers", i, n)
					}
				}
			}
			// Twice: V1's second round takes the lock-free way (direct_fast.go).
			for round := range 2 {
				sent := st.Requests.Load()
				const n = 16
				for i := range n {
					route(fmt.Sprintf("get k%d\r\n", i), &bt)
				}
				if got := st.Requests.Load() - sent; got != 0 {
					t.Fatalf("round %d: %d of %d requests of direct handlers went out before the batch was flushed", round, got, n)
				}
				bt.Flush()
				if got := st.Requests.Load() - sent; got != n {
					t.Fatalf("round %d: %d requests sent after the flush, want %d", round, got, n)
				}
				wait(n, "END\r\n")
			}

			// A request that runs in Lua sends the staged ones first.
			sent := st.Requests.Load()
			route("get a\r\n", &bt)
			route("get b\r\n", &bt)
			route("set a 0 0 1\r\nx\r\n", &bt)
			if got := st.Requests.Load() - sent; got < 2 {
				t.Errorf("a request run in Lua: %d sent when it ran, want the 2 staged before it flushed first", got)
			}
			bt.Flush()
			wait(2, "END\r\n")
			wait(1, "STORED\r\n")

			// So does one queued for the state's goroutine.
			w := r.workers[0]
			sent = st.Requests.Load()
			route("get a\r\n", &bt)
			route("get b\r\n", &bt)
			w.state.Lock() // busy: the set is queued
			route("set b 0 0 1\r\ny\r\n", &bt)
			got := st.Requests.Load() - sent
			w.state.Unlock()
			if got < 2 {
				t.Errorf("a request queued for the state: %d sent when it was queued, want the 2 staged before it flushed first", got)
			}
			bt.Flush()
			wait(3, "") // get a's value, get b's miss, STORED: in any order here
		})
	}
}
