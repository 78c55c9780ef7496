package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// TestRedisBlockedOrder sends two clients' BRPOPLPUSH back to back, as
// Redis's suite does ("BRPOPLPUSH with multiple blocked clients"), round
// after round: the first sent must be served first, as by Redis. The
// proxy reads each client on its own goroutine, and the runtime often
// runs the second's first; unordered by arrival, the second client took
// the pushed element in most rounds. The pool's sessions have the kernel
// stamp their reads once it has ordered a blocking command (the BRPOP
// that times out first); before that, reads are ordered as the proxy
// read them, and the kernel starts stamping a moment after the first
// socket asks it to (the pause).
func TestRedisBlockedOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 1, "  timeout: 300\n")
	_, addr := startProxy(t, yaml, "rd")
	pusher := respDial(t, addr)
	if got := pusher.do("BRPOP", "nothing", "0.01"); got != "*-1\r\n" {
		t.Fatalf("BRPOP of an empty list: %q", got)
	}
	pusher.do("PING") // its session's next read turns the stamps on
	time.Sleep(100 * time.Millisecond)
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
// it, the DEL would leave it no group to read. Written in that order on
// two sockets, the two can still reach redis-server in one pass of its
// event loop, which reads its sockets in its own order: a round in
// about a hundred lost that way here, so two rounds of twenty may
// (unordered, 19 or 20 of 20 do).
func TestRedisBlockedThenDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 1, "  timeout: 300\n")
	srv, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	var lost []string
	for round := 0; round < 20; round++ {
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
		switch got := blocked.reply(); {
		case strings.Contains(got, "no longer exists"):
		case strings.HasPrefix(got, "-NOGROUP"):
			lost = append(lost, fmt.Sprint(round))
		default:
			t.Fatalf("round %d: the blocked XREADGROUP got %q, want the stream's deletion", round, got)
		}
		blocked.nc.Close()
		waitFor(t, 5*time.Second, "the XREADGROUP answered", func() bool { return routerStat(t, srv, "rd", "blocked_clients") == 0 })
	}
	if len(lost) > 2 {
		t.Errorf("rounds %v of 20: the DEL reached the server before the XREADGROUP", lost)
	}
}

// TestRedisBlockedOrderAfterReload is TestRedisBlockedOrder with clients
// that connected before a reload: the pool that ordered the first blocking
// command is the reload's, not the one their sessions started on, and
// their reads must be stamped all the same once they have moved to it.
func TestRedisBlockedOrderAfterReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 1, "  timeout: 300\n")
	yaml = strings.Replace(yaml, "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)), 1)
	srv, reload := reloadable(t, yaml)
	addr := srv.Addr("rd").String()
	const rounds = 20
	var firsts, seconds []*respClient
	for range rounds {
		first, second := respDial(t, addr), respDial(t, addr)
		first.do("PING") // sessions on the first pool, which never blocks
		second.do("PING")
		firsts, seconds = append(firsts, first), append(seconds, second)
	}
	if err := reload(strings.Replace(yaml, "timeout: 300", "timeout: 301", 1)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := srv.Addr("rd").String(); got != addr {
		t.Fatalf("the reload moved the pool from %s to %s", addr, got)
	}
	pusher := respDial(t, addr)
	if got := pusher.do("BRPOP", "nothing", "0.01"); got != "*-1\r\n" {
		t.Fatalf("BRPOP of an empty list: %q", got)
	}
	pusher.do("PING") // its session's next read turns the stamps on
	time.Sleep(100 * time.Millisecond)
	for i := range rounds {
		firsts[i].do("PING") // moves the session to the reload's pool
		seconds[i].do("PING")
	}
	for round := range rounds {
		first, second := firsts[round], seconds[round]
		src, dst1, dst2 := fmt.Sprint("src", round), fmt.Sprint("dst1-", round), fmt.Sprint("dst2-", round)
		first.send(multibulk("BRPOPLPUSH", src, dst1, "0"))
		second.send(multibulk("BRPOPLPUSH", src, dst2, "0"))
		waitFor(t, 5*time.Second, "both clients blocked on the server", func() bool {
			return infoInt(t, servers[0].Addr, "blocked_clients") == 2
		})
		pusher.do("LPUSH", src, "foo", "bar") // the first blocked takes foo, the tail
		if got1, got2 := first.reply(), second.reply(); got1 != bulk("foo") || got2 != bulk("bar") {
			t.Fatalf("round %d: the first client sent got %q and the second %q; want foo, then bar", round, got1, got2)
		}
		first.nc.Close()
		second.nc.Close()
	}
}
