package proxy_test

import (
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// TestIdleConnectionCost opens idle client connections and reports what
// each costs the proxy in heap and goroutine stacks (the client ends live in
// the same process, so their small cost is included: an upper bound).
func TestIdleConnectionCost(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	_, addr := startProxy(t, fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1\n", mc.Addr), "mc")
	const n = 2000
	measure := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	before := measure()
	conns := make([]net.Conn, 0, n)
	for range n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, nc)
	}
	// One request on each, so every session has read and written once.
	buf := make([]byte, 64)
	for _, nc := range conns {
		fmt.Fprintf(nc, "version\r\n")
	}
	for _, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := nc.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	after := measure()
	per := float64(after-before) / n
	t.Logf("%d idle connections: %.1f KiB each (heap + stacks, client ends included)", n, per/1024)
	for _, nc := range conns {
		nc.Close()
	}
	if per > 64<<10 {
		t.Errorf("an idle connection costs %.1f KiB", per/1024)
	}
}
