package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	slow := slowServer(t, 300*time.Millisecond)
	pool := func(extra string) string {
		return fmt.Sprintf("lim:\n  listen: 127.0.0.1:0\n  timeout: 2000\n%s  servers:\n    - %s:1\n", extra, slow)
	}

	t.Run("max_keys", func(t *testing.T) {
		mcs, yaml := memcachedPool(t, 2, "  max_keys: 4\n")
		_ = mcs
		_, addr := startProxy(t, yaml, "mc")
		c := dial(t, addr)
		if got := c.do("get a b c d e\r\n"); got != "CLIENT_ERROR too many keys: 5, max_keys is 4\r\n" {
			t.Fatalf("5 keys: %q", got)
		}
		if got := c.do("get a b c d\r\n"); got != "END\r\n" {
			t.Fatalf("4 keys: %q", got)
		}
	})

	t.Run("active_req_limit", func(t *testing.T) {
		_, addr := startProxy(t, pool("  active_req_limit: 1\n"), "lim")
		first := dial(t, addr)
		first.send("get a\r\n") // in flight for 300 ms
		time.Sleep(50 * time.Millisecond)
		if got := dial(t, addr).do("get b\r\n"); got != "SERVER_ERROR active request limit reached\r\n" {
			t.Fatalf("over the limit: %q", got)
		}
		if got := first.reply(); got != "END\r\n" {
			t.Fatalf("first: %q", got)
		}
		if got := dial(t, addr).do("get c\r\n"); got != "END\r\n" {
			t.Fatalf("after the first finished: %q", got)
		}
	})

	t.Run("buffer_memory_limit", func(t *testing.T) {
		_, addr := startProxy(t, pool("  buffer_memory_limit: 1\n"), "lim")
		big := strings.Repeat("x", 2000)
		first := dial(t, addr)
		first.send(fmt.Sprintf("set a 0 0 %d\r\n%s\r\n", len(big), big)) // 2 KB in flight
		time.Sleep(50 * time.Millisecond)
		if got := dial(t, addr).do("get b\r\n"); got != "SERVER_ERROR buffer memory limit reached\r\n" {
			t.Fatalf("over the limit: %q", got)
		}
		first.reply()
		if got := dial(t, addr).do("get c\r\n"); got != "END\r\n" {
			t.Fatalf("after the first finished: %q", got)
		}
	})

	t.Run("client_connections", func(t *testing.T) {
		_, addr := startProxy(t, pool("  client_connections: 2\n"), "lim")
		a, b := dial(t, addr), dial(t, addr)
		a.do("version\r\n")
		b.do("version\r\n")
		c := dial(t, addr)
		if got := c.line(); got != "SERVER_ERROR too many client connections" {
			t.Fatalf("third client: %q", got)
		}
		c.expectClosed()
		a.nc.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			d := dial(t, addr)
			d.send("version\r\n")
			if l := d.line(); strings.HasPrefix(l, "VERSION") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a freed slot was not reused")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
