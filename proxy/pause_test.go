package proxy_test

import (
	"strings"
	"testing"
	"time"
)

// TestRedisClientPause pauses writes through the proxy: a client's SET,
// and the GET it pipelined after it, wait until CLIENT UNPAUSE while
// another client's reads of the same server are answered at once; the
// server counts the held client in blocked_clients; and every request
// is answered once, in order.
func TestRedisClientPause(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 2, "  timeout: 3000\n  redis_config: true\n")
	_, addr := startProxy(t, yaml, "rd")
	admin, writer, reader := respDial(t, addr), respDial(t, addr), respDial(t, addr)
	if got := admin.do("CLIENT", "PAUSE", "60000", "WRITE"); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE: %q", got)
	}
	writer.send(multibulk("SET", "k", "v") + multibulk("GET", "k"))
	blocked := func() int {
		return infoInt(t, servers[0].Addr, "blocked_clients") + infoInt(t, servers[1].Addr, "blocked_clients")
	}
	waitFor(t, 5*time.Second, "the SET held by its server", func() bool { return blocked() == 1 })
	for i := 0; i < 3; i++ {
		if got := reader.do("GET", "k"); got != "$-1\r\n" {
			t.Fatalf("GET during the pause: %q, want nil at once", got)
		}
	}
	if got := reader.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING during the pause: %q", got)
	}
	time.Sleep(100 * time.Millisecond)
	if blocked() != 1 {
		t.Fatalf("blocked_clients %d before UNPAUSE, want 1", blocked())
	}
	if got := admin.do("CLIENT", "UNPAUSE"); got != "+OK\r\n" {
		t.Fatalf("CLIENT UNPAUSE: %q", got)
	}
	if got := writer.reply(); got != "+OK\r\n" {
		t.Fatalf("the held SET: %q", got)
	}
	if got := writer.reply(); got != "$1\r\nv\r\n" {
		t.Fatalf("the GET pipelined after the held SET: %q, want its value", got)
	}
	// A pause that ends by its timeout: the write waits for it.
	if got := admin.do("CLIENT", "PAUSE", "300"); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE 300: %q", got)
	}
	start := time.Now()
	if got := writer.do("SET", "k", "w"); got != "+OK\r\n" {
		t.Fatalf("SET in a pause of 300 ms: %q", got)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("SET answered %v into a pause of 300 ms", el)
	}
	if got := admin.do("CLIENT", "PAUSE", "x"); !strings.HasPrefix(got, "-ERR") {
		t.Fatalf("CLIENT PAUSE x: %q, want the server's error", got)
	}
	if got := writer.do("SET", "k", "x"); got != "+OK\r\n" {
		t.Fatalf("SET after a refused pause: %q", got)
	}
}
