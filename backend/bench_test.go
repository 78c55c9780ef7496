package backend_test

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// benchBackend starts memcached with a 100-byte value at "small" and a
// 64 KiB one at "big", and returns a backend of one socket to it.
func benchBackend(b *testing.B) *backend.Backend {
	b.Helper()
	srv := testserver.StartMemcached(b)
	be := backend.New(backend.Config{Addr: srv.Addr, Dialect: mc, Timeout: 5 * time.Second})
	b.Cleanup(be.Close)
	for _, kv := range [][2]string{{"small", strings.Repeat("s", 100)}, {"big", strings.Repeat("b", 64<<10)}} {
		set := "set " + kv[0] + " 0 0 " + strconv.Itoa(len(kv[1])) + "\r\n" + kv[1] + "\r\n"
		if r := roundTrip(b, be, request(b, set)); string(r.Raw) != "STORED\r\n" {
			b.Fatalf("set %s: %q %v", kv[0], r.Raw, r.Err)
		}
	}
	return be
}

// roundTrip sends req on socket 0 and waits for its reply.
func roundTrip(tb testing.TB, be *backend.Backend, req *codec.Request) codec.Reply {
	tb.Helper()
	done := make(chan struct{})
	call := backend.Call{Req: req, Done: func(*backend.Call) { close(done) }}
	be.Send(&call, 0)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		tb.Fatal("call not completed")
	}
	return call.Reply
}

// BenchmarkSend measures a call's way through a Backend to memcached and
// back: one at a time (P1), 64 staged together (P64), from many
// goroutines on one socket (Parallel: they contend for its queue), and
// with a reply over the arena's limit (Big: the read buffer is handed
// over). Replies are released, so a call allocates nothing.
func BenchmarkSend(b *testing.B) {
	be := benchBackend(b)
	small, big := request(b, "get small\r\n"), request(b, "get big\r\n")
	one := func(b *testing.B, req *codec.Request) {
		done := make(chan struct{}, 1)
		call := backend.Call{Req: req, Done: func(*backend.Call) { done <- struct{}{} }}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			be.Send(&call, 0)
			<-done
			if call.Reply.Err != nil {
				b.Fatal(call.Reply.Err)
			}
			call.Release()
		}
	}
	b.Run("P1", func(b *testing.B) { one(b, small) })
	b.Run("Big", func(b *testing.B) { one(b, big) })
	b.Run("P64", func(b *testing.B) {
		const depth = 64
		var left atomic.Int32
		done := make(chan struct{}, 1)
		calls := make([]backend.Call, depth)
		for i := range calls {
			calls[i] = backend.Call{Req: small, Done: func(*backend.Call) {
				if left.Add(-1) == 0 {
					done <- struct{}{}
				}
			}}
		}
		var bt backend.Batch
		b.ReportAllocs()
		b.ResetTimer()
		for n := 0; n < b.N; n += depth {
			left.Store(depth)
			for i := range calls {
				be.Stage(&calls[i], 0, &bt)
			}
			bt.Flush()
			<-done
			for i := range calls {
				if calls[i].Reply.Err != nil {
					b.Fatal(calls[i].Reply.Err)
				}
				calls[i].Release()
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.SetParallelism(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			done := make(chan struct{}, 1)
			call := backend.Call{Req: small, Done: func(*backend.Call) { done <- struct{}{} }}
			for pb.Next() {
				be.Send(&call, 0)
				<-done
				call.Release()
			}
		})
	})
}

// BenchmarkHugeReply measures one request answered by an array of 10k,
// 100k and 400k elements that arrives in 16 KiB writes, through a real
// Backend, per element: with the resp dialect, and with a dialect that
// resumes framing where the previous read stopped (resuming), which
// shows what the backend itself costs.
func BenchmarkHugeReply(b *testing.B) {
	srv := startArrayServer(b, nil)
	dialects := []struct {
		name string
		d    codec.Dialect
	}{{"resp", redis}, {"resuming", &resuming{Dialect: redis}}}
	for _, d := range dialects {
		for _, n := range []int{10_000, 100_000, 400_000} {
			b.Run(d.name+"/"+strconv.Itoa(n/1000)+"k", func(b *testing.B) {
				be := backend.New(backend.Config{Addr: srv.addr, Dialect: d.d})
				defer be.Close()
				req := command(b, "LRANGE", strconv.Itoa(n), "0", "-1")
				want := len(srv.array(n))
				roundTrip(b, be, req) // dialled, buffers warm
				b.ResetTimer()
				for range b.N {
					if r := roundTrip(b, be, req); r.Err != nil || len(r.Raw) != want {
						b.Fatalf("reply of %d bytes (%v), want %d", len(r.Raw), r.Err, want)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/element")
			})
		}
	}
}

// BenchmarkIdleRefresh compares the two ways to refresh an idle socket
// (health.go): Check, the validation request on the open socket, which
// the idle check sends, and Redial, a new socket dialled and validated
// (TCP connect, "version", close) before the same request, which closing
// and redialling an idle socket would cost every interval.
func BenchmarkIdleRefresh(b *testing.B) {
	srv := testserver.StartMemcached(b)
	version := request(b, "version\r\n")
	b.Run("Check", func(b *testing.B) {
		be := backend.New(backend.Config{Addr: srv.Addr, Dialect: mc, Timeout: 5 * time.Second})
		defer be.Close()
		roundTrip(b, be, version)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if r := roundTrip(b, be, version); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	})
	b.Run("Redial", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			be := backend.New(backend.Config{Addr: srv.Addr, Dialect: mc, Timeout: 5 * time.Second})
			if r := roundTrip(b, be, version); r.Err != nil {
				b.Fatal(r.Err)
			}
			be.Close()
		}
	})
}
