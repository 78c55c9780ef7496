package lua

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"shardproxy/codec"
)

// chanCompletion collects what a router answers.
type chanCompletion chan string

func (c chanCompletion) Complete(out []byte) { c <- string(out) }

// TestV2DirectTaken routes requests through a generator's direct handler
// and checks that they never entered Lua: no coroutine was made, and the
// generator's one request context is free again. A handler of another
// shape, in the same router, does enter Lua.
func TestV2DirectTaken(t *testing.T) {
	d, ok := codec.Lookup("memcache")
	if !ok {
		t.Fatal("memcache dialect not registered")
	}
	r, err := New(Config{Path: "t.lua", Dialect: d, Workers: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Source: []byte(`
function mcp_config_pools()
    return mcp.pool({ mcp.backend({ label = "b1", host = "127.0.0.1", port = 1, down = true }) })
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(p)
    fg:ready({ a = h, f = function(rctx, h) return function(r) return rctx:enqueue_and_wait(r, h) end end })
    mcp.attach(mcp.CMD_GET, fg)
    local other = mcp.funcgen_new()
    local h2 = other:new_handle(p)
    other:ready({ a = h2, f = function(rctx, h) return function(r) local res = rctx:enqueue_and_wait(r, h) return res end end })
    mcp.attach(mcp.CMD_SET, other)
    local lua = mcp.funcgen_new()
    local h3 = lua:new_handle(p)
    lua:ready({ a = h3, f = function(rctx, h) return function(r) return (rctx:enqueue_and_wait(r, h)) or "x" end end })
    mcp.attach(mcp.CMD_TOUCH, lua)
end`)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := r.workers[0]
	coroutines := func() int {
		w.state.Lock()
		defer w.state.Unlock()
		return len(w.coFree)
	}
	for _, s := range []string{"get k\r\n", "get k\r\n", "set k 0 0 1\r\nx\r\n"} {
		if out := routeOne(t, r, d, s); !strings.HasPrefix(out, "SERVER_ERROR") {
			t.Errorf("%q to a backend that is down: %q", s, out)
		}
	}
	if n := coroutines(); n != 0 {
		t.Errorf("%d coroutine(s) made: a direct handler entered Lua", n)
	}
	if out := routeOne(t, r, d, "touch k 10\r\n"); !strings.HasPrefix(out, "SERVER_ERROR") {
		t.Errorf("touch: %q", out)
	}
	if n := coroutines(); n != 1 {
		t.Errorf("%d coroutine(s) after a handler that must run in Lua, want 1", n)
	}
}
