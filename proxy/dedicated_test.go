package proxy_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// The tests of blocking commands and transactions: real redis-servers
// behind a sharded pool (here) and a Redis Cluster (cluster_test.go),
// driven through the proxy's socket.

// routerStat returns the router counter name of pool, or fails.
func routerStat(t testing.TB, srv *proxy.Server, pool, name string) int64 {
	t.Helper()
	for _, p := range srv.Stats().Pools {
		if p.Name != pool {
			continue
		}
		for _, st := range p.Router {
			if st.Name == name {
				return st.Value
			}
		}
	}
	t.Fatalf("pool %s has no router stat %s", pool, name)
	return 0
}

// waitFor polls cond until it holds, or fails after within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoInt reads a number from a server's INFO.
func infoInt(t testing.TB, addr, field string) int {
	t.Helper()
	info, err := testserver.RedisDo(addr, "INFO", "clients")
	if err != nil {
		t.Fatalf("INFO on %s: %v", addr, err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("INFO on %s has no %s: %q", addr, field, info)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// keysOn returns n keys with prefix that the pool places on server addr.
func keysOn(where func(string) string, addr, prefix string, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := prefix + strconv.Itoa(i); where(k) == addr {
			keys = append(keys, k)
		}
	}
	return keys
}

// otherServer returns a key of prefix the pool places elsewhere than key.
func otherServer(where func(string) string, key, prefix string) string {
	for i := 0; ; i++ {
		if k := prefix + strconv.Itoa(i); where(k) != where(key) {
			return k
		}
	}
}

func TestRedisBlocking(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 300\n  blocking_connections: 2\n")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }

	t.Run("woken by a push", func(t *testing.T) {
		q := keysOn(where, servers[0].Addr, "wq", 1)[0]
		waiter, pusher := respDial(t, addr), respDial(t, addr)
		waiter.send(multibulk("BLPOP", q, "0"))
		waitFor(t, 5*time.Second, "client blocked on the server", func() bool { return infoInt(t, where(q), "blocked_clients") == 1 })
		if got := stat("blocked_clients"); got != 1 {
			t.Errorf("blocked_clients %d during BLPOP, want 1", got)
		}
		if got := pusher.do("LPUSH", q, "job"); got != ":1\r\n" {
			t.Fatalf("LPUSH: %q", got)
		}
		if got, want := waiter.reply(), "*2\r\n"+bulk(q)+bulk("job"); got != want {
			t.Fatalf("BLPOP: %q, want %q", got, want)
		}
		waitFor(t, 5*time.Second, "dedicated connection given back", func() bool {
			return stat("dedicated_connections") == 0 && stat("dedicated_idle") == 1 && stat("blocked_clients") == 0
		})
		// The connection is kept: a second BLPOP, with data present, uses it and answers at once.
		pusher.do("RPUSH", q, "a")
		if got, want := waiter.do("BRPOP", q, "0"), "*2\r\n"+bulk(q)+bulk("a"); got != want {
			t.Fatalf("BRPOP with data: %q, want %q", got, want)
		}
	})

	t.Run("timeout longer than the pool's", func(t *testing.T) {
		c := respDial(t, addr)
		start := time.Now()
		if got := c.do("BLPOP", "nothing-here", "1.2"); got != "*-1\r\n" {
			t.Fatalf("BLPOP 1.2 on an empty list: %q, want a nil array", got)
		}
		if el := time.Since(start); el < time.Second {
			t.Fatalf("BLPOP 1.2 answered after %v", el)
		}
		start = time.Now()
		if got := c.do("XREAD", "BLOCK", "800", "STREAMS", "nostream", "$"); got != "*-1\r\n" {
			t.Fatalf("XREAD BLOCK 800: %q", got)
		}
		if el := time.Since(start); el < 700*time.Millisecond {
			t.Fatalf("XREAD BLOCK 800 answered after %v", el)
		}
		// The forms that do not block answer as any command.
		c.do("XADD", "st", "1-1", "f", "v")
		if got := c.do("XREAD", "STREAMS", "st", "0"); !strings.Contains(got, "1-1") {
			t.Fatalf("XREAD: %q", got)
		}
		if got := c.do("BLPOP", "nothing-here", "-1"); got != "-ERR timeout is negative\r\n" {
			t.Fatalf("BLPOP -1: %q", got)
		}
	})

	t.Run("XREAD BLOCK woken by XADD", func(t *testing.T) {
		waiter, writer := respDial(t, addr), respDial(t, addr)
		waiter.send(multibulk("XREAD", "BLOCK", "0", "STREAMS", "xs", "$"))
		waitFor(t, 5*time.Second, "XREAD blocked", func() bool { return infoInt(t, where("xs"), "blocked_clients") == 1 })
		writer.do("XADD", "xs", "5-1", "f", "v")
		if got := waiter.reply(); !strings.Contains(got, "5-1") {
			t.Fatalf("XREAD BLOCK: %q", got)
		}
	})

	t.Run("keys on two servers", func(t *testing.T) {
		c := respDial(t, addr)
		a := "ka"
		b := otherServer(where, a, "kb")
		if got := c.do("BLPOP", a, b, "0"); got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
			t.Fatalf("BLPOP over two servers: %q", got)
		}
		if got := c.do("BLMOVE", a, b, "LEFT", "RIGHT", "0"); !strings.HasPrefix(got, "-CROSSSLOT") {
			t.Fatalf("BLMOVE over two servers: %q", got)
		}
	})

	t.Run("limit", func(t *testing.T) {
		q := keysOn(where, servers[1].Addr, "lq", 1)[0]
		refused := stat("dedicated_refused")
		var waiters []*respClient
		for range 2 {
			w := respDial(t, addr)
			w.send(multibulk("BLPOP", q, "0"))
			waiters = append(waiters, w)
		}
		waitFor(t, 5*time.Second, "two clients blocked", func() bool { return infoInt(t, where(q), "blocked_clients") == 2 })
		c := respDial(t, addr)
		want := "-ERR no dedicated connection free for server " + where(q) + ": 2 in use (blocking_connections)\r\n"
		if got := c.do("BLPOP", q, "0"); got != want {
			t.Fatalf("third BLPOP: %q, want %q", got, want)
		}
		if got := stat("dedicated_refused"); got != refused+1 {
			t.Fatalf("dedicated_refused %d, want %d", got, refused+1)
		}
		// Another server has connections of its own.
		other := keysOn(where, servers[2].Addr, "lo", 1)[0]
		if got := c.do("BLPOP", other, "0.1"); got != "*-1\r\n" {
			t.Fatalf("BLPOP on another server: %q", got)
		}
		c.do("RPUSH", q, "1", "2")
		for i, w := range waiters {
			if got := w.reply(); !strings.HasPrefix(got, "*2\r\n") {
				t.Fatalf("waiter %d: %q", i, got)
			}
		}
	})

	t.Run("client leaves while blocked", func(t *testing.T) {
		q := keysOn(where, servers[2].Addr, "dq", 1)[0]
		before := infoInt(t, where(q), "connected_clients")
		c := respDial(t, addr)
		c.send(multibulk("BRPOP", q, "0"))
		waitFor(t, 5*time.Second, "client blocked", func() bool { return infoInt(t, where(q), "blocked_clients") == 1 })
		inUse := stat("dedicated_connections")
		c.nc.Close()
		start := time.Now()
		waitFor(t, 2*time.Second, "the server forgets the blocked client", func() bool {
			return infoInt(t, where(q), "blocked_clients") == 0
		})
		waitFor(t, 2*time.Second, "the dedicated connection is closed", func() bool {
			return stat("dedicated_connections") == inUse-1 && infoInt(t, where(q), "connected_clients") <= before
		})
		t.Logf("released %v after the client left", time.Since(start))
		// Nothing was popped for the client that left.
		d := directRedis(t, where(q), "", 0)
		d.do("RPUSH", q, "kept")
		if got := d.do("LLEN", q); got != ":1\r\n" {
			t.Fatalf("LLEN after the blocked client left: %q", got)
		}
	})
}

func TestRedisTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 1000\n")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }

	t.Run("watch conflict", func(t *testing.T) {
		c, other := respDial(t, addr), respDial(t, addr)
		c.do("SET", "wk", "1")
		if got := c.do("WATCH", "wk"); got != "+OK\r\n" {
			t.Fatalf("WATCH: %q", got)
		}
		if got := stat("pinned_clients"); got != 1 {
			t.Fatalf("pinned_clients %d after WATCH", got)
		}
		if got := c.do("GET", "wk"); got != bulk("1") {
			t.Fatalf("GET while watching: %q", got)
		}
		other.do("SET", "wk", "2")
		for _, cmd := range [][]string{{"MULTI"}, {"SET", "wk", "3"}} {
			c.do(cmd...)
		}
		if got := c.do("EXEC"); got != "*-1\r\n" {
			t.Fatalf("EXEC after a concurrent write: %q, want a nil array", got)
		}
		if got := other.do("GET", "wk"); got != bulk("2") {
			t.Fatalf("wk after the aborted EXEC: %q", got)
		}
		waitFor(t, 2*time.Second, "pin ended", func() bool { return stat("pinned_clients") == 0 && stat("dedicated_connections") == 0 })
		// Without a conflict the transaction runs.
		c.do("WATCH", "wk")
		c.do("MULTI")
		c.do("INCR", "wk")
		if got := c.do("EXEC"); got != "*1\r\n:3\r\n" {
			t.Fatalf("EXEC: %q", got)
		}
	})

	t.Run("key on another server", func(t *testing.T) {
		c := respDial(t, addr)
		a := "ta"
		b := otherServer(where, a, "tb")
		want := []string{"+OK\r\n", "+QUEUED\r\n", "-CROSSSLOT Keys in request don't hash to the same slot\r\n", "+QUEUED\r\n",
			"-EXECABORT Transaction discarded because of previous errors.\r\n"}
		c.send(multibulk("MULTI") + multibulk("SET", a, "1") + multibulk("SET", b, "1") + multibulk("PING") + multibulk("EXEC"))
		for i, w := range want {
			if got := c.reply(); got != w {
				t.Fatalf("reply %d: %q, want %q", i, got, w)
			}
		}
		if got := c.do("EXISTS", a); got != ":0\r\n" {
			t.Fatalf("%s set by an aborted transaction: %q", a, got)
		}
		// An unknown command aborts it too, as in Redis.
		c.send(multibulk("MULTI") + multibulk("SET", a, "1") + multibulk("NOSUCH") + multibulk("EXEC"))
		for range 3 {
			c.reply()
		}
		if got := c.reply(); !strings.HasPrefix(got, "-EXECABORT") {
			t.Fatalf("EXEC after an unknown command: %q", got)
		}
		waitFor(t, 2*time.Second, "connections back", func() bool { return stat("dedicated_connections") == 0 })
	})

	t.Run("pipelined", func(t *testing.T) {
		c := respDial(t, addr)
		c.send(multibulk("MULTI") + multibulk("PING") + multibulk("SET", "pk", "5") + multibulk("INCR", "pk") + multibulk("EXEC") + multibulk("GET", "pk"))
		want := []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*3\r\n+PONG\r\n+OK\r\n:6\r\n", bulk("6")}
		for i, w := range want {
			if got := c.reply(); got != w {
				t.Fatalf("reply %d: %q, want %q", i, got, w)
			}
		}
		ctx := context.Background()
		rdb := newGoRedis(t, &redis.Options{Addr: addr})
		var incr *redis.IntCmd
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "gk", "10", 0)
			incr = p.Incr(ctx, "gk")
			return nil
		})
		if err != nil || len(cmds) != 2 || incr.Val() != 11 {
			t.Fatalf("TxPipelined: %v %v %d", err, cmds, incr.Val())
		}
		// go-redis's Watch: optimistic locking.
		err = rdb.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, "gk").Int()
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "gk", n*2, 0)
				return nil
			})
			return err
		}, "gk")
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		if got, _ := rdb.Get(ctx, "gk").Int(); got != 22 {
			t.Fatalf("gk after Watch: %d", got)
		}
	})

	t.Run("errors as Redis gives them", func(t *testing.T) {
		c := respDial(t, addr)
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
			{[]string{"DISCARD"}, "-ERR DISCARD without MULTI\r\n"},
			{[]string{"UNWATCH"}, "+OK\r\n"},
			{[]string{"MULTI"}, "+OK\r\n"},
			{[]string{"MULTI"}, "-ERR MULTI calls can not be nested\r\n"},
			{[]string{"WATCH", "x"}, "-ERR WATCH inside MULTI is not allowed\r\n"},
			{[]string{"SET", "dk", "1"}, "+QUEUED\r\n"},
			{[]string{"DISCARD"}, "+OK\r\n"},
			{[]string{"GET", "dk"}, "$-1\r\n"},
		} {
			if got := c.do(tc.cmd...); got != tc.want {
				t.Fatalf("%q: %q, want %q", tc.cmd, got, tc.want)
			}
		}
	})

	t.Run("client leaves while pinned", func(t *testing.T) {
		srvAddr := where("lk")
		before := infoInt(t, srvAddr, "connected_clients")
		c := respDial(t, addr)
		c.do("WATCH", "lk")
		c.do("MULTI")
		c.do("SET", "lk", "x")
		if got := infoInt(t, srvAddr, "connected_clients"); got <= before {
			// A connection was kept idle from an earlier test; it is in use now.
			t.Logf("connected_clients %d, before %d", got, before)
		}
		c.nc.Close()
		waitFor(t, 3*time.Second, "pin released", func() bool {
			return stat("pinned_clients") == 0 && stat("dedicated_connections") == 0
		})
		d := directRedis(t, srvAddr, "", 0)
		if got := d.do("EXISTS", "lk"); got != ":0\r\n" {
			t.Fatalf("a transaction left unfinished ran: %q", got)
		}
	})

	t.Run("WAIT", func(t *testing.T) {
		c := respDial(t, addr)
		if got := c.do("WAIT", "0", "0"); !strings.HasPrefix(got, "-ERR WAIT is not supported by shardproxy outside a transaction") {
			t.Fatalf("WAIT alone: %q", got)
		}
		c.do("WATCH", "wt")
		if got := c.do("WAIT", "0", "100"); got != ":0\r\n" {
			t.Fatalf("WAIT while pinned: %q", got)
		}
		c.do("UNWATCH")
	})
}

// TestRedisWatchFlush sends FLUSHALL and FLUSHDB from a client that
// WATCHes a key, before its MULTI, as Redis's suite does: they reach
// every server, and the watched key's server fails the EXEC when they
// deleted the key, and runs it when the key did not exist.
func TestRedisWatchFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 3, "  timeout: 1000\n  redis_flushall: true\n")
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	for _, flush := range []string{"FLUSHALL", "FLUSHDB"} {
		for _, tc := range []struct {
			exists bool
			want   string
		}{{true, "*-1\r\n"}, {false, "*1\r\n+PONG\r\n"}} {
			c.do("DEL", "x")
			c.do("SET", "other", "1")
			if tc.exists {
				c.do("SET", "x", "30")
			}
			if got := c.do("WATCH", "x"); got != "+OK\r\n" {
				t.Fatalf("WATCH: %q", got)
			}
			if got := c.do(flush); got != "+OK\r\n" {
				t.Fatalf("%s while watching: %q", flush, got)
			}
			c.do("MULTI")
			c.do("PING")
			if got := c.do("EXEC"); got != tc.want {
				t.Fatalf("EXEC after %s, the key existing %v: %q, want %q", flush, tc.exists, got, tc.want)
			}
			if got := c.do("EXISTS", "other"); got != ":0\r\n" {
				t.Fatalf("%s left another server's key: %q", flush, got)
			}
		}
	}
}
