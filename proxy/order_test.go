package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRedisBlockedOrder sends two clients' BRPOPLPUSH back to back, as
// Redis's suite does ("BRPOPLPUSH with multiple blocked clients"), round
// after round: the first sent must be served first, as by Redis. The
// proxy reads each client on its own goroutine, and the runtime often
// runs the second's first; unordered by arrival, the second client took
// the pushed element in most rounds.
func TestRedisBlockedOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 1, "  timeout: 300\n")
	_, addr := startProxy(t, yaml, "rd")
	pusher := respDial(t, addr)
	for round := 0; round < 20; round++ {
		src, dst1, dst2 := fmt.Sprint("src", round), fmt.Sprint("dst1-", round), fmt.Sprint("dst2-", round)
		first, second := respDial(t, addr), respDial(t, addr)
		first.do("PING") // both sessions are reading, as the suite's clients are
		second.do("PING")
		first.send(multibulk("BRPOPLPUSH", src, dst1, "0"))
		second.send(multibulk("BRPOPLPUSH", src, dst2, "0"))
		waitFor(t, 5*time.Second, "both clients blocked on the server", func() bool {
			return infoInt(t, servers[0].Addr, "blocked_clients") == 2
		})
		pusher.do("LPUSH", src, "foo")
		if got := first.reply(); got != bulk("foo") {
			t.Fatalf("round %d: the first client sent got %q, want the element", round, got)
		}
		pusher.do("LPUSH", src, "bar")
		if got := second.reply(); got != bulk("bar") {
			t.Fatalf("round %d: the second client got %q", round, got)
		}
		first.nc.Close()
		second.nc.Close()
	}
}

// TestRedisBlockedThenDeleted sends a blocking XREADGROUP and, once the
// proxy has read it (and holds it for its settle), a DEL of its stream
// from another client, as Redis's suite does: the DEL, which arrived
// after it, lets it through at once and reaches the server after it, so
// the blocked client is woken with the stream's deletion. Sent before
// it, the DEL would leave it no group to read.
func TestRedisBlockedThenDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 1, "  timeout: 300\n")
	srv, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	for round := 0; round < 10; round++ {
		s := fmt.Sprint("stream", round)
		c.do("XADD", s, "666", "f", "v")
		c.do("XGROUP", "CREATE", s, "g", "$")
		blocked := respDial(t, addr)
		blocked.do("PING")
		blocked.send(multibulk("XREADGROUP", "GROUP", "g", "Alice", "BLOCK", "0", "STREAMS", s, ">"))
		// Polled without a pause: the DEL must follow within the settle.
		for deadline := time.Now().Add(5 * time.Second); routerStat(t, srv, "rd", "blocked_clients") != 1; {
			if time.Now().After(deadline) {
				t.Fatal("the proxy never read the XREADGROUP")
			}
		}
		if got := c.do("DEL", s); got != ":1\r\n" {
			t.Fatalf("DEL: %q", got)
		}
		if got := blocked.reply(); !strings.Contains(got, "no longer exists") {
			t.Fatalf("round %d: the blocked XREADGROUP got %q, want the stream's deletion", round, got)
		}
		blocked.nc.Close()
		waitFor(t, 5*time.Second, "the XREADGROUP answered", func() bool { return routerStat(t, srv, "rd", "blocked_clients") == 0 })
	}
}
