package lua_test

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/lua"
)

// spinRoutes answers mg through the pool; for the key "spin" the handler
// then logs "spinning" and spins for SPIN seconds before it returns.
const spinRoutes = `
function mcp_config_pools() return mcp.pool({ mcp.backend("b1", "127.0.0.1", %d) }) end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r)
    local res = p(r)
    if r:key() == "spin" then
      mcp.log("spinning")
      local t0 = os.clock()
      while os.clock() - t0 < %g do end
    end
    return res
  end)
end`

// TestReplyLeavesBackendReader checks that a handler resumed by its
// backend's reply does not run on the goroutine that reads that backend's
// socket: while one client's handler spins after its reply, the goroutine
// running it has no backend frame on its stack, and another client's
// request on the same socket is answered before the spinning one.
func TestReplyLeavesBackendReader(t *testing.T) {
	const spin = 3 * time.Second // far longer than a loopback round trip
	mc := testserver.StartMemcached(t)
	d := memcacheDialect(t)
	logs := &logBuffer{}
	r, err := lua.New(lua.Config{
		Path: "routes.lua", Dialect: d, Workers: 2, MaxRun: time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Source: []byte(fmt.Sprintf(spinRoutes, mc.Port, spin.Seconds())),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := route(t, r, d, "mg warm v\r\n"); got != "EN\r\n" { // one socket, connected
		t.Fatalf("warm-up: %q", got)
	}

	spinning, other := make(completion, 1), make(completion, 1)
	// Routed from a goroutine of its own, as a session's reader would: a
	// reply that arrives while its handler is still sending the call is
	// resumed by the goroutine sending it (lua/engine_await.go), which would then
	// spin here, in the test's goroutine.
	go r.Route(parseRequest(t, d, "mg spin v\r\n"), 0, spinning) // worker 0
	eventually(t, "the handler to spin", func() bool { return logs.count("spinning") > 0 })

	// The handler is running now: find the goroutine that runs it.
	var runners []string
	for _, g := range goroutines() {
		if strings.Contains(g, "shardproxy/lua.(*worker).run(") {
			runners = append(runners, g)
		}
	}
	if len(runners) != 1 {
		t.Errorf("%d goroutines run a handler, want 1:\n%s", len(runners), strings.Join(runners, "\n\n"))
	}
	for _, g := range runners {
		if strings.Contains(g, "shardproxy/backend.") {
			t.Errorf("the resumed handler runs on a backend goroutine:\n%s", g)
		}
	}

	r.Route(parseRequest(t, d, "mg other v\r\n"), 1, other) // worker 1, same socket
	select {
	case got := <-spinning:
		t.Errorf("the spinning handler answered (%q) before a request behind its reply on the same socket", got)
		<-other
	case got := <-other:
		if got != "EN\r\n" {
			t.Errorf("other client: %q", got)
		}
		if got := <-spinning; got != "EN\r\n" {
			t.Errorf("spinning client: %q", got)
		}
	}
}

// goroutines returns the stack of every goroutine, one string each.
func goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWorkerGoroutinesExit checks that Close stops every worker's
// goroutine, with requests in flight on a backend that never answers.
func TestWorkerGoroutinesExit(t *testing.T) {
	loops := func() int {
		n := 0
		for _, g := range goroutines() {
			if strings.Contains(g, "shardproxy/lua.(*worker).loop(") {
				n++
			}
		}
		return n
	}
	// Earlier tests' routers are closed, but their workers may still be
	// unwinding: counting them in before would make this one's count off.
	eventually(t, "earlier tests' worker goroutines to exit", func() bool { return loops() == 0 })
	before := loops()
	d := memcacheDialect(t)
	r, err := lua.New(lua.Config{Path: "routes.lua", Dialect: d, Workers: 3, Logger: discard(),
		Source: []byte(fmt.Sprintf(`
function mcp_config_pools() return mcp.pool({ mcp.backend("b1", "127.0.0.1", %d) }) end
function mcp_config_routes(p) mcp.attach(mcp.CMD_MG, function(r) local res = p(r) return res end) end`, silentPort(t)))})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 worker goroutines", func() bool { return loops()-before == 3 })
	answers := make(completion, 6)
	for i := range 6 {
		r.Route(parseRequest(t, d, "mg k v\r\n"), uint32(i), answers)
	}
	r.Close()
	for range 6 {
		if got := <-answers; !strings.HasPrefix(got, "SERVER_ERROR") {
			t.Errorf("in flight at Close: %q", got)
		}
	}
	// Close has waited for them; they may still be unwinding.
	eventually(t, "the worker goroutines to exit", func() bool { return loops() == before })
}

// TestClientOrder checks that a client's requests reach the backend in
// its order while requests are queued, inline and direct at once: each
// client sets its key without waiting (noreply, through a Lua handler)
// and at once gets it (through a direct handler), which must see the set.
func TestClientOrder(t *testing.T) {
	mc := testserver.StartMemcached(t)
	d := memcacheDialect(t)
	r, err := lua.New(lua.Config{Path: "routes.lua", Dialect: d, Workers: 2, Logger: discard(),
		Source: []byte(fmt.Sprintf(`
function mcp_config_pools() return mcp.pool({ mcp.backend("b1", "127.0.0.1", %d) }) end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_SET, function(r)
    for _ = 1, 200 do end -- time for the get to overtake it, if it could
    local res = p(r)
    return res
  end)
  mcp.attach(mcp.CMD_GET, function(r) return p(r) end)
end`, mc.Port))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const clients, rounds = 8, 300
	errs := make(chan error, clients)
	for i := range clients {
		key := fmt.Sprintf("k%d", i)
		sets := make([]*codec.Request, rounds)
		for n := range sets {
			value := fmt.Sprintf("v%d", n)
			sets[n] = parseRequest(t, d, fmt.Sprintf("set %s 0 0 %d noreply\r\n%s\r\n", key, len(value), value))
		}
		get := parseRequest(t, d, "get "+key+"\r\n")
		go func() {
			quiet, answers := make(completion, rounds), make(completion, 1)
			for n := range rounds {
				r.Route(sets[n], uint32(i), quiet)
				r.Route(get, uint32(i), answers)
				want := fmt.Sprintf("VALUE %s 0 %d\r\nv%d\r\nEND\r\n", key, len(fmt.Sprint(n))+1, n)
				if got := <-answers; got != want {
					errs <- fmt.Errorf("client %d round %d: got %q, want %q", i, n, got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
