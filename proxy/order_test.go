package proxy_test

import (
	"fmt"
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
