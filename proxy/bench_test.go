package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"shardproxy/internal/testserver"
	"shardproxy/observe"
)

// benchPipeline runs b.N gets of a 100-byte value through the proxy (or
// directly to memcached when direct is set) over conns connections, depth
// requests per batch.
func benchPipeline(b *testing.B, conns, depth int, direct bool) {
	benchPipelineWith(b, conns, depth, direct, "")
}

// benchPipelineWith is benchPipeline with extra keys in the proxy's pool.
func benchPipelineWith(b *testing.B, conns, depth int, direct bool, extra string) {
	mc := testserver.StartMemcached(b)
	addr := mc.Addr
	if !direct {
		_, addr = startProxy(b, fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  timeout: 5000\n%s  servers:\n    - %s:1\n",
			extra, mc.Addr), "mc")
	}
	benchGets(b, addr, conns, depth)
}

// benchLuaV2 is benchPipeline through a Lua pool running v2DirectRoute
// (the bench's V2 route, bench/fleet.go), with extra keys in the pool.
func benchLuaV2(b *testing.B, depth int, extra string) {
	mc := testserver.StartMemcached(b)
	file := v2DirectRoute(b, mc)
	_, addr := startProxy(b, fmt.Sprintf("lv2:\n  listen: 127.0.0.1:0\n  timeout: 5000\n  lua: %s\n%s", file, extra), "lv2")
	benchGets(b, addr, 50, depth)
}

// benchGets runs b.N gets of a 100-byte value against addr over conns
// connections, depth requests per batch.
func benchGets(b *testing.B, addr string, conns, depth int) {
	val := strings.Repeat("v", 100)
	setup, _ := net.Dial("tcp", addr)
	fmt.Fprintf(setup, "set bench 0 0 %d\r\n%s\r\n", len(val), val)
	bufio.NewReader(setup).ReadString('\n')
	setup.Close()
	want := fmt.Sprintf("VALUE bench 0 %d\r\n%s\r\nEND\r\n", len(val), val)
	batch := strings.Repeat("get bench\r\n", depth)
	per := b.N/(conns*depth) + 1
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer nc.Close()
			buf := make([]byte, len(want)*depth)
			for range per {
				if _, err := io.WriteString(nc, batch); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(nc, buf); err != nil {
					b.Error(err)
					return
				}
			}
			if string(buf[:len(want)]) != want {
				b.Errorf("reply %q", buf[:len(want)])
			}
		}()
	}
	wg.Wait()
}

func BenchmarkGetDirectP1(b *testing.B) { benchPipeline(b, 50, 1, true) }

// The near cache's hit path: every get after the first is answered by the
// proxy.
func BenchmarkGetNearP1(b *testing.B)    { benchPipelineWith(b, 50, 1, false, "  near_cache: 1\n") }
func BenchmarkGetNearP16(b *testing.B)   { benchPipelineWith(b, 50, 16, false, "  near_cache: 1\n") }
func BenchmarkGetProxyP1(b *testing.B)   { benchPipeline(b, 50, 1, false) }
func BenchmarkGetDirectP16(b *testing.B) { benchPipeline(b, 50, 16, true) }
func BenchmarkGetProxyP16(b *testing.B)  { benchPipeline(b, 50, 16, false) }

// A Lua pool running the bench's V2 route, its gets sent as the client
// wrote them (a Lua pool's default) or as meta gets.
func BenchmarkGetLuaV2P1(b *testing.B)      { benchLuaV2(b, 1, "") }
func BenchmarkGetLuaV2MetaP1(b *testing.B)  { benchLuaV2(b, 1, "  server_protocol: meta\n") }
func BenchmarkGetLuaV2P16(b *testing.B)     { benchLuaV2(b, 16, "") }
func BenchmarkGetLuaV2MetaP16(b *testing.B) { benchLuaV2(b, 16, "  server_protocol: meta\n") }

// BenchmarkGetProxyP16Tap* are BenchmarkGetProxyP16 while a tap client
// follows the pool with a key pattern: Miss's matches none of the load's
// keys (each request is still recorded and matched), Hit's matches every
// one, and its reader takes every line.
func BenchmarkGetProxyP16TapMiss(b *testing.B) { benchTap(b, "user:*") }
func BenchmarkGetProxyP16TapHit(b *testing.B)  { benchTap(b, "ben*") }

func benchTap(b *testing.B, pattern string) {
	mc := testserver.StartMemcached(b)
	srv, addr := startProxy(b, fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  timeout: 5000\n  servers:\n    - %s:1\n", mc.Addr), "mc")
	sub, err := srv.Tap().Subscribe(observe.Filter{Key: pattern})
	if err != nil {
		b.Fatal(err)
	}
	lines := make(chan int)
	go func() {
		n := 0
		var buf []byte
		for ok := true; ok; {
			buf, ok = sub.Next(buf[:0])
			n += bytes.Count(buf, []byte("\n"))
		}
		lines <- n
	}()
	benchGets(b, addr, 50, 16)
	b.StopTimer()
	sub.Close()
	b.ReportMetric(float64(<-lines)/float64(b.N), "lines/op")
}
