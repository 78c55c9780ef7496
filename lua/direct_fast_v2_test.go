package lua

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// fastV2Routes has one generator with a handle to each of two memcached
// servers; its handler sends every request to the handle in cur, an
// upvalue of the file. get and mg are attached to the generator itself,
// gets to a router that picks the same generator for every key, and touch
// to a V1 handler that flips cur.
const fastV2Routes = `
function mcp_config_pools()
    return { a = mcp.pool({ mcp.backend("a", "127.0.0.1", %d) }),
             b = mcp.pool({ mcp.backend("b", "127.0.0.1", %d) }) }
end
local cur
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local ha, hb = fg:new_handle(p.a), fg:new_handle(p.b)
    cur = ha
    fg:ready({ n = "direct", f = function(rctx)
        return function(r) return rctx:enqueue_and_wait(r, cur) end
    end })
    mcp.attach(mcp.CMD_GET, fg)
    mcp.attach(mcp.CMD_MG, fg)
    mcp.attach(mcp.CMD_GETS, mcp.router_new({ map = { k = fg }, mode = "prefix", default = fg }))
    mcp.attach(mcp.CMD_TOUCH, function(r)
        if cur == ha then cur = hb else cur = ha end
        return "TOUCHED\r\n"
    end)
end`

// fastV2Router starts two memcached servers holding "k" as "a" and "b",
// and a one-worker router of fastV2Routes over them.
func fastV2Router(t *testing.T) (*Router, codec.Dialect) {
	t.Helper()
	d, ok := codec.Lookup("memcache")
	if !ok {
		t.Fatal("memcache dialect not registered")
	}
	var ports [2]int
	for i, v := range []string{"a", "b"} {
		mc := testserver.StartMemcached(t)
		ports[i] = mc.Port
		nc, err := net.Dial("tcp", mc.Addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(nc, "set k 0 0 1\r\n%s\r\n", v)
		if l, err := bufio.NewReader(nc).ReadString('\n'); err != nil || l != "STORED\r\n" {
			t.Fatalf("set k on %s: %q %v", mc.Addr, l, err)
		}
		nc.Close()
	}
	r, err := New(Config{Path: "t.lua", Dialect: d, Workers: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Source: fmt.Appendf(nil, fastV2Routes, ports[0], ports[1])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, d
}

// routeLocked routes s while the test holds the worker's state for up to
// wait, and reports whether it was answered before the state was let go
// (the lock-free way) and what the answer was.
func routeLocked(t *testing.T, r *Router, d codec.Dialect, s string, wait time.Duration) (lockFree bool, out string) {
	t.Helper()
	req := &codec.Request{}
	if n, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(s), req); err != nil || n != len(s) {
		t.Fatalf("parse %q: %d %v", s, n, err)
	}
	c := make(chanCompletion, 1)
	w := r.workers[0]
	w.state.Lock()
	r.Route(req, 1, c)
	select {
	case out = <-c:
		lockFree = true
	case <-time.After(wait): // queued behind the state
	}
	w.state.Unlock()
	if !lockFree {
		select {
		case out = <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: no answer", s)
		}
	}
	return lockFree, out
}

// routeOne routes s and waits for its answer.
func routeOne(t *testing.T, r *Router, d codec.Dialect, s string) string {
	t.Helper()
	req := &codec.Request{}
	if n, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(s), req); err != nil || n != len(s) {
		t.Fatalf("parse %q: %d %v", s, n, err)
	}
	c := make(chanCompletion, 1)
	r.Route(req, 1, c)
	select {
	case out := <-c:
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("%q: no answer", s)
		return ""
	}
}

// TestV2FastWay checks that a direct V2 handler's requests take the
// lock-free way (direct_fast.go) once one of their command went the locked way,
// and that the way follows the route: a handler whose handle Lua code
// changed sends to the new one, a router's requests and a freed request
// context take the locked way, and every answer is the one the handle's
// server gives.
func TestV2FastWay(t *testing.T) {
	r, d := fastV2Router(t)
	const fromA, fromB = "VALUE k 0 1\r\na\r\nEND\r\n", "VALUE k 0 1\r\nb\r\nEND\r\n"
	// step routes s with the state held; a want ending in a space is the
	// answer's start (a gets answer's CAS varies).
	step := func(s string, wantFree bool, want string) {
		t.Helper()
		// A lock-free answer may take long on a busy machine; the locked
		// one is waited for only as long as a lock-free one usually takes.
		wait := 500 * time.Millisecond
		if wantFree {
			wait = 10 * time.Second
		}
		free, out := routeLocked(t, r, d, s, wait)
		match := out == want || strings.HasSuffix(want, " ") && strings.HasPrefix(out, want)
		if free != wantFree || !match {
			t.Errorf("%q: lock-free %t, answer %q; want lock-free %t, %q", s, free, out, wantFree, want)
		}
	}
	step("get k\r\n", false, fromA) // first of its command: the locked way, remembered
	step("get k\r\n", true, fromA)
	step("get k\r\n", true, fromA)
	step("mg k v\r\n", false, "VA 1\r\na\r\n") // each command is remembered on its own
	step("mg k v\r\n", true, "VA 1\r\na\r\n")

	// A router picks a generator by key: never remembered.
	step("gets k\r\n", false, "VALUE k 0 1 ")
	step("gets k\r\n", false, "VALUE k 0 1 ")

	// Lua code ran (the V1 touch handler): it flipped the handle.
	if out := routeOne(t, r, d, "touch k 0\r\n"); out != "TOUCHED\r\n" {
		t.Fatalf("touch: %q", out)
	}
	step("get k\r\n", false, fromB)
	step("get k\r\n", true, fromB)
	step("mg k v\r\n", false, "VA 1\r\nb\r\n")
	step("mg k v\r\n", true, "VA 1\r\nb\r\n")

	// A request context freed: the next request may take another one.
	w := r.workers[0]
	w.state.Lock()
	fg := w.v2.entries[w.hooks.lookup(&codec.Request{Name: "get"}, false, "")]
	rc, err := w.takeRctx(fg)
	if err != nil {
		w.state.Unlock()
		t.Fatal(err)
	}
	w.putRctx(rc)
	w.state.Unlock()
	step("get k\r\n", false, fromB)
	step("get k\r\n", true, fromB)
	if t.Failed() {
		return
	}

	// A multi-key get runs the handler per key, in Lua.
	if out := routeOne(t, r, d, "get k k\r\n"); out != "VALUE k 0 1\r\nb\r\nVALUE k 0 1\r\nb\r\nEND\r\n" {
		t.Errorf("get k k: %q", out)
	}
	step("get k\r\n", false, fromB) // Lua ran for it
	if a := r.active.Load(); a != 0 {
		t.Errorf("lua_active %d after every answer, want 0", a)
	}
	if n := r.bufferUsed.Load(); n != 0 {
		t.Errorf("buffer in use %d after every answer, want 0", n)
	}
}

// TestFastPoolPartOfLongGet keeps a part of a long get line (one key, but
// not the whole request) off the lock-free way: the locked way splits it
// and answers its key in place.
func TestFastPoolPartOfLongGet(t *testing.T) {
	r, _ := fastV2Router(t)
	w := r.workers[0]
	req := &codec.Request{Name: "get", Route: codec.RouteKey, Keys: [][]byte{[]byte("k")}, Wire: []byte("get k\r\n")}
	w.state.Lock()
	w.remember(req, r.pools[0])
	w.state.Unlock()
	if w.fastPool(req) == nil {
		t.Fatal("a whole one-key get is not taken by the remembered pool")
	}
	for _, part := range []codec.Part{codec.PartMore, codec.PartLast} {
		req.Part = part
		if w.fastPool(req) != nil {
			t.Errorf("a part (%d) of a long get line takes the lock-free way", part)
		}
	}
}

// TestCommandNumber checks the shortcut of mcCommandNumber against the
// command table, for every name and one that is none.
func TestCommandNumber(t *testing.T) {
	for i, name := range mcCommands {
		if name == "" {
			continue
		}
		if got := mcCommandNumber(name); got != i {
			t.Errorf("mcCommandNumber(%q) = %d, want %d", name, got, i)
		}
	}
	if got := mcCommandNumber("nope"); got != 0 {
		t.Errorf("mcCommandNumber(\"nope\") = %d, want 0", got)
	}
}

func BenchmarkCommandNumber(b *testing.B) {
	names := []string{"get", "set", "mg", "gets", "incr"}
	n := 0
	for i := 0; b.Loop(); i++ {
		n += mcCommandNumber(names[i%len(names)])
	}
	_ = n
}
