package admin_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/internal/testserver"
)

// TestStatsServerCounters runs the stats port over a real proxy and real
// memcached servers and checks that traffic moves the counters, once the
// next aggregation has run.
func TestStatsServerCounters(t *testing.T) {
	f := newFixture(t, 2, "")
	stats := admin.NewStats(f.srv, admin.StatsConfig{Interval: 50 * time.Millisecond, Hostname: "h", Logger: testLogger(t)})
	if err := stats.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	addr := stats.Addr().String()

	before := statsDoc(t, readStats(t, addr))
	if before["service"] != "nutcracker" || before["source"] != "h" {
		t.Fatalf("header: %v", before)
	}
	c := dialMC(t, f.srv.Addr("mc").String())
	for i := range 20 {
		key := string(rune('a' + i))
		if r := c.do("set "+key+" 0 0 5\r\nhello\r\n", "STORED", "SERVER_ERROR"); r != "STORED\r\n" {
			t.Fatalf("set: %q", r)
		}
		if r := c.do("get "+key+"\r\n", "END", "SERVER_ERROR"); r != "VALUE "+key+" 0 5\r\nhello\r\nEND\r\n" {
			t.Fatalf("get: %q", r)
		}
	}

	type totals struct{ requests, requestBytes, responses, responseBytes, clients, conns float64 }
	sum := func(doc map[string]any) (s totals) {
		pool := doc["mc"].(map[string]any)
		s.clients = pool["client_connections"].(float64)
		for _, v := range pool {
			if srv, ok := v.(map[string]any); ok {
				s.requests += srv["requests"].(float64)
				s.requestBytes += srv["request_bytes"].(float64)
				s.responses += srv["responses"].(float64)
				s.responseBytes += srv["response_bytes"].(float64)
				s.conns += srv["server_connections"].(float64)
			}
		}
		return s
	}
	var got totals
	var doc map[string]any
	eventually(t, "counters to move", func() bool {
		doc = statsDoc(t, readStats(t, addr))
		got = sum(doc)
		return got.requests >= 40 && got.responses >= 40
	})
	was := sum(before)
	if got.requests-was.requests != 40 || got.responses-was.responses != 40 {
		t.Errorf("requests %v, responses %v; want 40 more each than %v", got.requests, got.responses, was)
	}
	// The bytes the servers were sent and answered. The pool's default
	// server_protocol (auto) sends each get to memcached as a meta get:
	// 20 x "set k 0 0 5\r\nhello\r\n" (20 bytes) + 20 x "mg k k f v\r\n" (12).
	if got.requestBytes-was.requestBytes != 20*20+20*12 {
		t.Errorf("request_bytes %v, want %d", got.requestBytes-was.requestBytes, 20*20+20*12)
	}
	// 20 x "STORED\r\n" (8) + 20 x "VA 5 kk f0\r\nhello\r\n" (19).
	if got.responseBytes-was.responseBytes != 20*8+20*19 {
		t.Errorf("response_bytes %v, want %d", got.responseBytes-was.responseBytes, 20*8+20*19)
	}
	if got.clients != 1 || got.conns < 1 {
		t.Errorf("client_connections %v, server_connections %v; want 1 and >= 1", got.clients, got.conns)
	}
	if doc["total_connections"].(float64) < 1 || doc["curr_connections"].(float64) != 1 {
		t.Errorf("total_connections %v, curr_connections %v", doc["total_connections"], doc["curr_connections"])
	}
}

// TestStatsServerMove moves the stats port: the new address serves, the old
// one refuses, and an address that cannot be bound keeps the current one.
func TestStatsServerMove(t *testing.T) {
	stats := admin.NewStats(fakeSource{}, admin.StatsConfig{Logger: testLogger(t)})
	defer stats.Close()
	if err := stats.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	old := stats.Addr().String()
	if err := stats.Listen("127.0.0.1:0"); err != nil { // same address: no move
		t.Fatal(err)
	}
	if stats.Addr().String() != old {
		t.Fatalf("same address moved: %s -> %s", old, stats.Addr())
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := stats.Listen(busy.Addr().String()); err == nil {
		t.Fatal("Listen on a busy address succeeded")
	}
	statsDoc(t, readStats(t, old)) // still serving

	moved := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	if err := stats.Listen(moved); err != nil {
		t.Fatal(err)
	}
	if got := stats.Addr().String(); got != moved {
		t.Fatalf("Addr %s after moving to %s", got, moved)
	}
	statsDoc(t, readStats(t, moved))
	if nc, err := net.DialTimeout("tcp", old, time.Second); err == nil {
		nc.Close()
		t.Errorf("old address %s still accepts", old)
	}
	if err := stats.Close(); err != nil {
		t.Fatal(err)
	}
	if err := stats.Listen("127.0.0.1:0"); err != admin.ErrClosed {
		t.Errorf("Listen after Close: %v, want ErrClosed", err)
	}
}
