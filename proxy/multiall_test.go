package proxy_test

import (
	"fmt"
	"strings"
	"testing"

	"shardproxy/internal/testserver"
)

// TestRedisMultiEveryServer queues commands for every server inside MULTI,
// through a pool of three redis-servers: EXEC runs them on every server,
// in their place in the transaction on its own server, and answers their
// replies merged as outside a transaction; a transaction that does not run
// (a WATCH conflict) runs nothing elsewhere; a server that refuses is
// named by the merged reply in its place.
func TestRedisMultiEveryServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 3000\n  redis_flushall: true\n  redis_config: true\n")
	_, addr := startProxy(t, yaml, "rd")
	c, other := respDial(t, addr), respDial(t, addr)
	// Keys on every server: ten each.
	place := redisPlacement(t, addrsOf(servers), "")
	var keys []string
	per := map[string]int{}
	for i := 0; len(keys) < 10*len(servers); i++ {
		k := fmt.Sprintf("key:%d", i)
		if where := place(k); per[where] < 10 {
			per[where]++
			keys = append(keys, k)
		}
	}
	fill := func() {
		t.Helper()
		for _, k := range keys {
			if got := c.do("SET", k, "v"); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
		}
	}
	each := func(step string, args []string, want string) {
		t.Helper()
		for _, s := range servers {
			if got, err := testserver.RedisDo(s.Addr, args...); err != nil || got != want {
				t.Fatalf("%s: %s on %s: %q %v, want %q", step, strings.Join(args, " "), s.Addr, got, err, want)
			}
		}
	}
	tx := func(step, want string, cmds ...[]string) {
		t.Helper()
		if got := c.do("MULTI"); got != "+OK\r\n" {
			t.Fatalf("%s: MULTI: %q", step, got)
		}
		for _, cmd := range cmds {
			if got := c.do(cmd...); got != "+QUEUED\r\n" {
				t.Fatalf("%s: %v: %q", step, cmd, got)
			}
		}
		if got := c.do("EXEC"); got != want {
			t.Fatalf("%s: EXEC: %q, want %q", step, got, want)
		}
	}

	fill()
	tx("flushall after a write", "*3\r\n+OK\r\n+OK\r\n:0\r\n", []string{"SET", "foo", "bar"}, []string{"FLUSHALL"}, []string{"EXISTS", "foo"})
	each("flushall after a write", []string{"DBSIZE"}, "0")

	fill()
	tx("a write after flushdb", "*2\r\n+OK\r\n+OK\r\n", []string{"FLUSHDB"}, []string{"SET", "foo", "bar"})
	if got := c.do("DBSIZE"); got != ":1\r\n" {
		t.Fatalf("DBSIZE after FLUSHDB then SET in one transaction: %q, want :1", got)
	}

	// Keyless before the first key: held, then sent ahead of it.
	tx("config set", "*3\r\n+OK\r\n+OK\r\n$1\r\n1\r\n",
		[]string{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}, []string{"SET", "foo", "1"}, []string{"GET", "foo"})
	for _, s := range servers {
		if got := respDial(t, s.Addr).do("CONFIG", "GET", "maxmemory-policy"); !strings.Contains(got, "allkeys-lru") {
			t.Fatalf("CONFIG SET in a transaction: %s has %q", s.Addr, got)
		}
	}
	// Redis's "MULTI with config error": every server refuses it.
	c.send(multibulk("MULTI") + multibulk("SET", "foo", "bar") + multibulk("CONFIG", "SET", "maxmemory", "bla") + multibulk("EXEC"))
	for _, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n"} {
		if got := c.reply(); got != want {
			t.Fatalf("MULTI with a CONFIG SET every server refuses: %q, want %q", got, want)
		}
	}
	if got := c.reply(); !strings.HasPrefix(got, "*2\r\n+OK\r\n-ERR CONFIG SET failed") {
		t.Fatalf("EXEC with a CONFIG SET every server refuses: %q", got)
	}

	// A WATCH conflict: the transaction does not run, here or elsewhere.
	fill()
	if got := c.do("WATCH", "foo"); got != "+OK\r\n" {
		t.Fatalf("WATCH: %q", got)
	}
	if got := other.do("SET", "foo", "changed"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	tx("watch conflict", "*-1\r\n", []string{"FLUSHALL"})
	if got := c.do("DBSIZE"); got != ":31\r\n" { // the keys and foo
		t.Fatalf("DBSIZE after a transaction with FLUSHALL that did not run: %q", got)
	}

	// A library one server has already: that server's error in its place.
	lib := "#!lua name=mlib\nredis.register_function('mf', function() return 7 end)"
	if _, err := testserver.RedisDo(servers[2].Addr, "FUNCTION", "LOAD", lib); err != nil {
		t.Fatal(err)
	}
	tx("function load one refuses", "*2\r\n+OK\r\n-ERR Library 'mlib' already exists\r\n", []string{"SET", "foo", "1"}, []string{"FUNCTION", "LOAD", lib})
	each("function load one refuses", []string{"FCALL", "mf", "0"}, "7")

	// Bounded: past 1 MiB of them the transaction is refused.
	big := strings.Repeat("x", 600<<10)
	c.send(multibulk("MULTI") + multibulk("SET", "foo", "2") + multibulk("CONFIG", "SET", "maxmemory", big) +
		multibulk("CONFIG", "SET", "maxmemory", big) + multibulk("EXEC"))
	for _, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "-ERR too many commands for every server queued in the transaction\r\n",
		"-EXECABORT Transaction discarded because of previous errors.\r\n"} {
		if got := c.reply(); !strings.HasPrefix(got, want) {
			t.Fatalf("a transaction past the bound: %q, want %q", got, want)
		}
	}
	if got := c.do("GET", "foo"); got != "$1\r\n1\r\n" {
		t.Fatalf("GET after an aborted transaction: %q", got)
	}
}
