package lua_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/internal/testserver"
	"shardproxy/lua"
)

// Route stages the benchmarks run, given the pool p: "direct" is routed
// without entering Lua, "lua" runs in a coroutine, "v2" is a function
// generator whose handler calls rctx:enqueue_and_wait (the bench's V2
// route, examples/lua/v2_basic.lua's shape).
var benchHandlers = []struct{ name, routes string }{
	{"direct", "mcp.attach(mcp.CMD_GET, function(r) return p(r) end)"},
	{"lua", "mcp.attach(mcp.CMD_GET, function(r) local res = p(r) return res end)"},
	{"v2", `local fg = mcp.funcgen_new()
	local h = fg:new_handle(p)
	fg:ready({ n = "bench", a = h, f = function(rctx, h)
		return function(r) return rctx:enqueue_and_wait(r, h) end
	end })
	mcp.attach(mcp.CMD_GET, fg)`},
}

// BenchmarkRoute measures a get from Route to Complete against a real
// memcached, 32 requests in flight; "backend" is the same get sent with
// backend.Send directly, the floor.
func BenchmarkRoute(b *testing.B) {
	mc := testserver.StartMemcached(b)
	set(b, mc.Addr, "bench", "0123456789")
	d := memcacheDialect(b)
	for _, h := range benchHandlers {
		b.Run(h.name, func(b *testing.B) {
			r, err := lua.New(lua.Config{Path: "bench.lua", Dialect: d, Logger: discard(), Source: []byte(fmt.Sprintf(`
function mcp_config_pools() return mcp.pool({ mcp.backend("b1", "127.0.0.1", %d) }) end
function mcp_config_routes(p) %s end`, mc.Port, h.routes))})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				req := parseRequest(b, d, "get bench\r\n")
				c := make(completion, 1)
				for pb.Next() {
					r.Route(req, 1, c)
					<-c
				}
			})
		})
	}
	b.Run("backend", func(b *testing.B) {
		be := backend.New(backend.Config{Addr: mc.Addr, Dialect: d, Timeout: 3 * time.Second})
		defer be.Close()
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			req := parseRequest(b, d, "get bench\r\n")
			done := make(chan struct{}, 1)
			call := &backend.Call{Req: req}
			call.Done = func(*backend.Call) { done <- struct{}{} }
			for pb.Next() {
				*call = backend.Call{Req: req, Done: call.Done}
				be.Send(call, 1)
				<-done
			}
		})
	})
}

// BenchmarkRouteCPU measures the router's own work per request, without
// network: the backend is configured down, so every call fails at once.
func BenchmarkRouteCPU(b *testing.B) {
	d := memcacheDialect(b)
	handlers := append(benchHandlers[:len(benchHandlers):len(benchHandlers)], struct{ name, routes string }{
		// "compute" runs some 1000 VM instructions before its call: what
		// a per-instruction check (the cancellation of a handler that
		// runs too long) costs shows here.
		"compute", "mcp.attach(mcp.CMD_GET, function(r) local n = 0 for i = 1, 200 do n = n + i % 7 end local res = p(r) return res end)"})
	for _, h := range handlers {
		b.Run(h.name, func(b *testing.B) {
			r, err := lua.New(lua.Config{Path: "bench.lua", Dialect: d, Logger: discard(), Workers: 1, Source: []byte(`
function mcp_config_pools() return mcp.pool({ mcp.backend({ label = "b1", host = "127.0.0.1", port = 1, down = true }) }) end
function mcp_config_routes(p) ` + h.routes + ` end`)})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			req := parseRequest(b, d, "get bench\r\n")
			c := make(completion, 1)
			b.ReportAllocs()
			for b.Loop() {
				r.Route(req, 1, c)
				<-c
			}
		})
	}
}

// BenchmarkIdleWorkerMemory reports the Go heap an idle Lua worker state
// costs (issue 25 asks for it): a router with examples/lua/v2_basic.lua and
// 1 worker, then with 1+extra workers, heap in use after a GC each time;
// the difference divided by extra is "heap-B/worker". It is a figure to
// read, not a limit.
func BenchmarkIdleWorkerMemory(b *testing.B) {
	const extra = 8
	path := filepath.Join("..", "examples", "lua", "v2_basic.lua")
	d := memcacheDialect(b)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	build := func(workers int) uint64 {
		before := heap()
		r, err := lua.New(lua.Config{Path: path, Dialect: d, Logger: discard(), Workers: workers})
		if err != nil {
			b.Fatal(err)
		}
		grew := heap() - before
		r.Close()
		return grew
	}
	var per float64
	for b.Loop() {
		one, many := build(1), build(1+extra)
		per = (float64(many) - float64(one)) / extra
	}
	b.ReportMetric(per, "heap-B/worker")
	b.ReportMetric(0, "ns/op")
}
