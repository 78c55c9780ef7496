package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/proxy"
	"shardproxy/resp"
)

// Client-side caching through a sharded pool of real redis-servers: a
// RESP3 client with CLIENT TRACKING on gets the invalidation of a key it
// read when the key is written through the same proxy, through a second
// proxy over the same servers, and directly on the server; a null
// invalidation when the proxy's connection to the server is lost; BCAST
// with a prefix, OPTIN with CLIENT CACHING YES, RESP2 with REDIRECT, and
// the errors of bad arguments as redis-server words them.

// invalidateBound is how long an invalidation may take to arrive; the
// test logs what it measured.
const invalidateBound = 2 * time.Second

// invalidate3 is the push frame of an invalidation of keys (none: a null).
func invalidate3(keys ...string) string {
	if keys == nil {
		return ">2\r\n" + bulk("invalidate") + "_\r\n"
	}
	return string(resp.AppendInvalidate(nil, keys, resp.Proto3))
}

// expectPush reads the next frame of c within invalidateBound and
// compares it with want; it returns how long it took from since.
func expectPush(t *testing.T, c *respClient, want string, since time.Time) time.Duration {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(invalidateBound))
	got, err := readRESP(c.r)
	took := time.Since(since)
	if err != nil {
		t.Fatalf("no invalidation within %v: %v", invalidateBound, err)
	}
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	return took
}

// trackingClient is a RESP3 client of addr with tracking on (opts added).
func trackingClient(t *testing.T, addr string, opts ...string) *respClient {
	t.Helper()
	c := respDial(t, addr)
	hello3(t, c)
	if got := c.do(append([]string{"CLIENT", "TRACKING", "on"}, opts...)...); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING on %v: %q", opts, got)
	}
	return c
}

func TestClientTracking(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 2, "")
	_, addr := startProxy(t, yaml, "rd")
	_, addr2 := startProxy(t, yaml, "rd") // a second proxy of the fleet, over the same servers
	where := redisPlacement(t, addrsOf(servers), "")
	keys := keyEach(where, servers, "k")
	serverOf := func(key string) string { return where(key) }

	t.Run("writes from anywhere invalidate", func(t *testing.T) {
		c := trackingClient(t, addr)
		other, other2 := respDial(t, addr), respDial(t, addr2)
		for _, key := range keys {
			writers := []struct {
				name string
				set  func(v string) string
			}{
				{"same proxy", func(v string) string { return other.do("SET", key, v) }},
				{"second proxy", func(v string) string { return other2.do("SET", key, v) }},
				{"server directly", func(v string) string { return directRedis(t, serverOf(key), "", 0).do("SET", key, v) }},
			}
			for _, w := range writers {
				if got := c.do("GET", key); strings.HasPrefix(got, "-") {
					t.Fatalf("GET: %q", got)
				}
				start := time.Now()
				if got := w.set("v"); got != "+OK\r\n" {
					t.Fatalf("SET: %q", got)
				}
				took := expectPush(t, c, invalidate3(key), start)
				t.Logf("%s on %s: invalidation after %v", w.name, serverOf(key), took)
			}
		}
		// A key not read since its invalidation is not tracked any more.
		other.do("SET", keys[0], "again")
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("untracked write: got %q before the PING's reply", got)
		}
	})

	t.Run("a lost server connection is a null", func(t *testing.T) {
		c := trackingClient(t, addr)
		c.do("GET", keys[0])
		start := time.Now()
		servers[0].Restart()
		took := expectPush(t, c, invalidate3(), start)
		t.Logf("server restarted: null invalidation after %v", took)
		// Tracking goes on over the new connection, which invalidates
		// what was read while it was not confirmed (a null), then
		// every write.
		invalidatedAfterNulls(t, c, keys[0], func() {
			directRedis(t, servers[0].Addr, "", 0).do("SET", keys[0], "after")
		})
	})

	t.Run("BCAST with a prefix", func(t *testing.T) {
		c := trackingClient(t, addr, "BCAST", "PREFIX", "user:")
		other := respDial(t, addr)
		other.do("SET", "order:1", "x") // no match: nothing
		start := time.Now()
		other.do("SET", "user:1", "x") // never read: BCAST tells all the same
		expectPush(t, c, invalidate3("user:1"), start)
		if got := c.do("CLIENT", "TRACKINGINFO"); got != "%3\r\n"+bulk("flags")+"~2\r\n"+bulk("on")+bulk("bcast")+
			bulk("redirect")+":0\r\n"+bulk("prefixes")+"*1\r\n"+bulk("user:") {
			t.Fatalf("TRACKINGINFO: %q", got)
		}
	})

	t.Run("OPTIN with CLIENT CACHING YES", func(t *testing.T) {
		c := trackingClient(t, addr, "OPTIN")
		other := respDial(t, addr)
		c.do("GET", keys[0]) // not cached: not tracked
		if got := c.do("CLIENT", "CACHING", "yes"); got != "+OK\r\n" {
			t.Fatalf("CLIENT CACHING yes: %q", got)
		}
		c.do("GET", keys[1])
		other.do("SET", keys[0], "x")
		start := time.Now()
		other.do("SET", keys[1], "x")
		expectPush(t, c, invalidate3(keys[1]), start)
	})

	t.Run("RESP2 with REDIRECT", func(t *testing.T) {
		rd := respDial(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(rd.do("CLIENT", "ID"), ":"), "\r\n")
		if got := rd.do("SUBSCRIBE", resp.InvalidateChannel); !strings.HasPrefix(got, "*3\r\n") {
			t.Fatalf("SUBSCRIBE: %q", got)
		}
		c := respDial(t, addr)
		if got := c.do("CLIENT", "TRACKING", "on", "REDIRECT", id); got != "+OK\r\n" {
			t.Fatalf("CLIENT TRACKING on REDIRECT: %q", got)
		}
		if got := c.do("CLIENT", "GETREDIR"); got != ":"+id+"\r\n" {
			t.Fatalf("GETREDIR: %q", got)
		}
		c.do("GET", keys[1])
		start := time.Now()
		respDial(t, addr).do("SET", keys[1], "y")
		expectPush(t, rd, "*3\r\n"+bulk("message")+bulk(resp.InvalidateChannel)+"*1\r\n"+bulk(keys[1]), start)
	})

	t.Run("errors as redis-server words them", func(t *testing.T) {
		c := respDial(t, addr)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"CLIENT", "TRACKING", "on", "PREFIX", "a"}, "-ERR PREFIX option requires BCAST mode to be enabled\r\n"},
			{[]string{"CLIENT", "TRACKING", "on", "BCAST", "OPTIN"}, "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"},
			{[]string{"CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"}, "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"},
			{[]string{"CLIENT", "TRACKING", "on", "REDIRECT", "999999"}, "-ERR The client ID you want redirect to does not exist\r\n"},
			{[]string{"CLIENT", "TRACKING", "on", "REDIRECT", "x"}, "-ERR value is not an integer or out of range\r\n"},
			{[]string{"CLIENT", "TRACKING", "maybe"}, "-ERR syntax error\r\n"},
			{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab"},
				"-ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.\r\n"},
			{[]string{"CLIENT", "CACHING", "yes"},
				"-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"},
			{[]string{"CLIENT", "GETREDIR"}, ":-1\r\n"},
		} {
			if got := c.do(tc.args...); got != tc.want {
				t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
			}
		}
	})
}

func TestClientTrackingNoLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 2, "")
	_, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	keys := keyEach(where, servers, "n")
	for _, mode := range [][]string{{"NOLOOP"}, {"BCAST", "NOLOOP"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			c := trackingClient(t, addr, mode...)
			other := respDial(t, addr)
			for _, key := range keys {
				c.do("GET", key)
				if got := c.do("SET", key, "mine"); got != "+OK\r\n" { // its own: skipped
					t.Fatalf("SET: %q", got)
				}
				c.do("GET", key)
				other.do("SET", key, "theirs")
				expectPush(t, c, invalidate3(key), time.Now())
				// A write of its own that changes nothing leaves nothing
				// behind to swallow the next write of another client.
				c.do("DEL", "never-"+key)
				c.do("GET", key)
				other.do("SET", key, "theirs again")
				expectPush(t, c, invalidate3(key), time.Now())
			}
		})
	}
}

// doSkipping sends a command and returns its reply and the push frames
// that came before it.
func doSkipping(t *testing.T, c *respClient, args ...string) (string, []string) {
	t.Helper()
	c.send(multibulk(args...))
	var pushes []string
	for {
		got := c.reply()
		if !strings.HasPrefix(got, ">") {
			return got, pushes
		}
		pushes = append(pushes, got)
	}
}

// A reload that keeps the pool keeps its tracking: the client's keys and
// the proxy's connections to the servers, so a write after the reload
// invalidates a key read before it. One that gives the servers new
// options (new backends) sends a null, as a lost connection does, and
// tracks on over the new ones.
func TestClientTrackingReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	a, b := testserver.StartRedis(t), testserver.StartRedis(t)
	port := testserver.FreePort(t)
	yaml := poolYAML("rd", port, "  redis: true\n", a, b)
	_, reload := reloadable(t, yaml)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := trackingClient(t, addr)
	other := respDial(t, addr)
	for i, extra := range []string{"  redis: true\n", "  redis: true\n  timeout: 2000\n"} {
		key := fmt.Sprintf("r%d", i)
		c.do("GET", key)
		if err := reload(poolYAML("rd", port, extra, a, b)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			start := time.Now()
			other.do("SET", key, "after reload")
			took := expectPush(t, c, invalidate3(key), start)
			t.Logf("reload %d: invalidation after %v", i, took)
			continue
		}
		// New options are new backends: the old connections end, a null,
		// and the new ones, opened at the reload, invalidate what was read
		// before they were confirmed (a null); then every write.
		expectPush(t, c, invalidate3(), time.Now())
		invalidatedAfterNulls(t, c, key, func() { other.do("SET", key, "after reload") })
	}
}

// A Redis Cluster pool refuses tracking with the error the docs quote.
func TestClientTrackingClusterRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	rc := testserver.StartRedisCluster(t, 3, 0)
	_, addr := startProxy(t, clusterYAML("rc", rc.Addrs()[:1], "  listen: 127.0.0.1:0\n"), "rc")
	c := respDial(t, addr)
	hello3(t, c)
	want := "-ERR CLIENT TRACKING is not supported by this pool: it needs a sharded Redis pool\r\n"
	if got := c.do("CLIENT", "TRACKING", "on"); got != want {
		t.Fatalf("CLIENT TRACKING on: %q, want %q", got, want)
	}
	if got := c.do("CLIENT", "TRACKINGINFO"); !strings.Contains(got, bulk("off")) {
		t.Fatalf("TRACKINGINFO after the refusal: %q", got)
	}
}

// invalidatedAfterNulls reads key and has write write it until the
// client gets its invalidation; null invalidations between are allowed
// (a tracking connection confirmed after a read), for 10 seconds.
func invalidatedAfterNulls(t *testing.T, c *respClient, key string, write func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if reply, _ := doSkipping(t, c, "GET", key); strings.HasPrefix(reply, "-") {
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %q", key, reply)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		write()
		c.nc.SetReadDeadline(time.Now().Add(invalidateBound))
		got, err := readRESP(c.r)
		if err != nil {
			t.Fatalf("no invalidation of %s: %v", key, err)
		}
		if got == invalidate3(key) {
			return
		}
		if got != invalidate3() || time.Now().After(deadline) {
			t.Fatalf("waiting for the invalidation of %s: %q", key, got)
		}
	}
}

// CONFIG SET tracking-table-max-keys through a pool with redis_config
// bounds the proxy's table as it bounds a server's: the keys past it are
// evicted at once, and their readers get their invalidations.
func TestClientTrackingMaxKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "  redis_config: true\n")
	_, addr := startProxy(t, yaml, "rd")
	c := trackingClient(t, addr)
	keys := []string{"m1", "m2", "m3"}
	for _, k := range keys {
		c.do("GET", k)
	}
	admin := respDial(t, addr)
	if got := admin.do("CONFIG", "SET", "tracking-table-max-keys", "1"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	seen := map[string]bool{}
	for range 2 {
		c.nc.SetReadDeadline(time.Now().Add(invalidateBound))
		got, err := readRESP(c.r)
		if err != nil {
			t.Fatalf("evictions: %v (have %v)", err, seen)
		}
		for _, k := range keys {
			if got == invalidate3(k) {
				seen[k] = true
			}
		}
	}
	if len(seen) != 2 {
		t.Fatalf("evicted %v, want two of %v", seen, keys)
	}
	if got := admin.do("CONFIG", "SET", "tracking-table-max-keys", "0"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET 0: %q", got)
	}
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("one key left: %q", got)
	}
}

// A read sent right behind CLIENT TRACKING ON, before the proxy's
// connections to the servers are confirmed, is tracked: a write then,
// which those connections may not have seen, invalidates it once they
// are confirmed, and a later write invalidates it as ever.
func TestClientTrackingPipelined(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 3, "")
	_, addr := startProxy(t, yaml, "rd")
	c, other := respDial(t, addr), respDial(t, addr)
	hello3(t, c)
	c.send(multibulk("CLIENT", "TRACKING", "on") + multibulk("GET", "p") + multibulk("PING"))
	other.do("SET", "p", "raced")
	var got []string
	for len(got) < 3 || got[len(got)-1] != "+PONG\r\n" {
		got = append(got, c.reply())
	}
	if got[0] != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING on: %q", got)
	}
	if len(got) == 3 { // the write came after the confirmations: the server tells
		start := time.Now()
		other.do("SET", "p", "later")
		expectPush(t, c, invalidate3("p"), start)
	} else if got[2] != invalidate3("p") {
		t.Fatalf("pipelined: %q", got)
	}
}

// A script's declared keys are tracked when it calls a read-only
// command, as Redis tracks them: one that only writes or pings leaves
// nothing to invalidate, and a later write of its keys sends the client
// nothing. Where the proxy cannot read which commands a script calls, it
// tracks. Each case reads a second key after the script and writes it
// last: invalidations of one server come in the order of its writes, so
// that key's invalidation arriving first shows that the script's key was
// not tracked.
func TestClientTrackingScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 1, "")
	_, addr := startProxy(t, yaml, "rd")
	c := trackingClient(t, addr)
	other := respDial(t, addr)
	for i, tc := range []struct {
		name, script string
		tracked      bool
	}{
		{"writes only", "redis.call('set', KEYS[1], 'x')", false},
		{"pings", `return redis.pcall("PING")`, false},
		{"reads", "return redis.call('get', KEYS[1])", true},
		{"reads a container's subcommand", "return redis.call('object', 'encoding', KEYS[1])", true},
		{"reads without keys", "return redis.call('dbsize')", true},
		{"name made at run time", "return redis.call('g'..'et', KEYS[1])", true},
		{"call kept in a variable", "local f = redis.call; return f('get', KEYS[1])", true},
	} {
		key, last := fmt.Sprintf("script%d", i), fmt.Sprintf("last%d", i)
		other.do("SET", key, "v")
		if got := c.do("EVAL", tc.script, "1", key); strings.HasPrefix(got, "-") {
			t.Fatalf("%s: EVAL: %q", tc.name, got)
		}
		c.do("GET", last)
		start := time.Now()
		other.do("SET", key, "w")
		other.do("SET", last, "w")
		if tc.tracked {
			expectPush(t, c, invalidate3(key), start)
		}
		if got := expectPush0(t, c); got != invalidate3(last) {
			t.Fatalf("%s: got %q, want %q (tracked %v)", tc.name, got, invalidate3(last), tc.tracked)
		}
	}
}

// expectPush0 reads the next frame of c within invalidateBound.
func expectPush0(t *testing.T, c *respClient) string {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(invalidateBound))
	got, err := readRESP(c.r)
	if err != nil {
		t.Fatalf("no invalidation within %v: %v", invalidateBound, err)
	}
	return got
}

// trackingConns returns the ids of the server's clients in BCAST
// tracking mode: the proxy's tracking connections.
func trackingConns(t *testing.T, addr string) []string {
	t.Helper()
	var ids []string
	for _, line := range strings.Split(directRedis(t, addr, "", 0).do("CLIENT", "LIST"), "\n") {
		if strings.Contains(line, " flags=tB ") {
			ids = append(ids, strings.Fields(line)[0])
		}
	}
	return ids
}

// The last client to turn tracking off leaves the pool's tracking
// connections open a while: a client that turns it on again meanwhile
// (OFF then ON, to switch modes) is answered over servers that track
// already, with no write of another client missed while new connections
// would be confirmed. Once the while has passed with no client, they
// close.
func TestClientTrackingLinger(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	t.Cleanup(proxy.SetLingerTracking(300 * time.Millisecond)) // restored after the proxy stops
	servers, yaml := redisPool(t, 1, "")
	_, addr := startProxy(t, yaml, "rd")
	a := trackingClient(t, addr)
	before := trackingConns(t, servers[0].Addr)
	if len(before) != 1 {
		t.Fatalf("tracking connections: %q, want one", before)
	}
	if got := a.do("CLIENT", "TRACKING", "off"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING off: %q", got)
	}
	b := trackingClient(t, addr)
	if after := trackingConns(t, servers[0].Addr); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("tracking connections %q after OFF then ON, want %q kept", after, before)
	}
	b.do("GET", "k")
	directRedis(t, servers[0].Addr, "", 0).do("SET", "k", "v")
	expectPush(t, b, invalidate3("k"), time.Now())

	b.do("CLIENT", "TRACKING", "off")
	deadline := time.Now().Add(invalidateBound)
	for len(trackingConns(t, servers[0].Addr)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("tracking connections %q still open with no client", trackingConns(t, servers[0].Addr))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A flush on the servers (FLUSHALL through the proxy) is one null
// invalidation to every tracking client, as redis-server sends one to
// each of its own, whether the client read a key or not: a read sent
// just before the flush may have cached a value the flush removed.
func TestClientTrackingFlushNull(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "  redis_flushall: true\n")
	_, addr := startProxy(t, yaml, "rd")
	idle := trackingClient(t, addr) // has read nothing
	reader := trackingClient(t, addr)
	reader.do("GET", "k")
	other := respDial(t, addr)
	start := time.Now()
	if got := other.do("FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL: %q", got)
	}
	for _, c := range []*respClient{idle, reader} {
		expectPush(t, c, invalidate3(), start)
		// The other server's null of the same flush is not a second one.
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("after the null: got %q, want the PING's reply", got)
		}
	}
}
