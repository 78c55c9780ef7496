package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/resp"
	"shardproxy/sharding"
)

// The Redis integration tests run real redis-server processes behind the
// proxy and talk to it with go-redis v9 and with raw RESP.

// redisPool starts n redis-servers (with args) and returns them and the
// YAML of a Redis pool "rd" over them, with extra pool keys.
func redisPool(t testing.TB, n int, extra string, args ...string) ([]*testserver.Server, string) {
	t.Helper()
	servers := make([]*testserver.Server, n)
	var b strings.Builder
	b.WriteString("rd:\n  listen: 127.0.0.1:0\n  redis: true\n")
	b.WriteString(extra)
	b.WriteString("  servers:\n")
	for i := range servers {
		servers[i] = testserver.StartRedis(t, args...)
		fmt.Fprintf(&b, "    - %s:1\n", servers[i].Addr)
	}
	return servers, b.String()
}

func addrsOf(servers []*testserver.Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// redisPlacement computes where the pool puts keys: its servers are named
// by address, hashed with the defaults (fnv1a_64, ketama) and hashTag.
func redisPlacement(t testing.TB, addrs []string, hashTag string) func(key string) string {
	t.Helper()
	ss := make([]sharding.Server, len(addrs))
	for i, a := range addrs {
		ss[i] = sharding.Server{Name: a, Weight: 1}
	}
	p, err := sharding.New(sharding.Config{Servers: ss, HashTag: hashTag})
	if err != nil {
		t.Fatal(err)
	}
	return func(key string) string {
		idx, err := p.Pick([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return p.Servers()[idx].Name
	}
}

// respClient is a raw RESP client; replies are framed by the resp dialect.
type respClient struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

var respDialect, _ = codec.Lookup(resp.Name)

func respDial(t testing.TB, addr string) *respClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &respClient{t: t, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *respClient) send(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// reply reads one whole reply.
func (c *respClient) reply() string {
	c.t.Helper()
	s, err := c.tryReply()
	if err != nil {
		c.t.Fatalf("read reply: %v (have %q)", err, s)
	}
	return s
}

func (c *respClient) tryReply() (string, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return readRESP(c.r)
}

// do sends a command as a multibulk array and returns its reply.
func (c *respClient) do(args ...string) string {
	c.t.Helper()
	c.send(multibulk(args...))
	return c.reply()
}

// raw sends s and returns one reply.
func (c *respClient) raw(s string) string {
	c.t.Helper()
	c.send(s)
	return c.reply()
}

func (c *respClient) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c.r)
	if err != nil && !isReset(err) {
		c.t.Fatalf("expected close, got error %v after %q", err, b)
	}
	if len(b) != 0 {
		c.t.Fatalf("expected close, got %q", b)
	}
}

func multibulk(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// bulk is the RESP encoding of a bulk string.
func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// directRedis is a raw connection to one backend, authenticated and on db
// when those are set.
func directRedis(t testing.TB, addr, password string, db int) *respClient {
	t.Helper()
	c := respDial(t, addr)
	if password != "" {
		if got := c.do("AUTH", password); got != "+OK\r\n" {
			t.Fatalf("AUTH on %s: %q", addr, got)
		}
	}
	if db != 0 {
		if got := c.do("SELECT", strconv.Itoa(db)); got != "+OK\r\n" {
			t.Fatalf("SELECT on %s: %q", addr, got)
		}
	}
	return c
}

func newGoRedis(t testing.TB, o *redis.Options) *redis.Client {
	t.Helper()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestRedisCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")

	// go-redis v9 opens each connection with HELLO 3; the proxy answers
	// -NOPROTO and go-redis falls back to RESP2. Protocol: 2 sends HELLO 2,
	// which the proxy answers itself.
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("go-redis protocol %d", proto), func(t *testing.T) {
			ctx := context.Background()
			rdb := newGoRedis(t, &redis.Options{Addr: addr, Protocol: proto})
			p := fmt.Sprintf("p%d:", proto)
			check := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			check("set", rdb.Set(ctx, p+"s", "v", 0).Err())
			if v, err := rdb.Get(ctx, p+"s").Result(); err != nil || v != "v" {
				t.Fatalf("get: %q %v", v, err)
			}
			if _, err := rdb.Get(ctx, p+"missing").Result(); err != redis.Nil {
				t.Fatalf("get missing: %v", err)
			}
			if n, err := rdb.Incr(ctx, p+"n").Result(); err != nil || n != 1 {
				t.Fatalf("incr: %d %v", n, err)
			}
			check("expire", rdb.Expire(ctx, p+"n", time.Hour).Err())
			if d, err := rdb.TTL(ctx, p+"n").Result(); err != nil || d <= 0 {
				t.Fatalf("ttl: %v %v", d, err)
			}
			check("hset", rdb.HSet(ctx, p+"h", "a", "1", "b", "2").Err())
			if m, err := rdb.HGetAll(ctx, p+"h").Result(); err != nil || m["a"] != "1" || m["b"] != "2" {
				t.Fatalf("hgetall: %v %v", m, err)
			}
			check("rpush", rdb.RPush(ctx, p+"l", "x", "y", "z").Err())
			if l, err := rdb.LRange(ctx, p+"l", 0, -1).Result(); err != nil || !slices.Equal(l, []string{"x", "y", "z"}) {
				t.Fatalf("lrange: %v %v", l, err)
			}
			check("sadd", rdb.SAdd(ctx, p+"set", "m1", "m2").Err())
			if n, err := rdb.SCard(ctx, p+"set").Result(); err != nil || n != 2 {
				t.Fatalf("scard: %d %v", n, err)
			}
			check("zadd", rdb.ZAdd(ctx, p+"z", redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 1, Member: "a"}).Err())
			if z, err := rdb.ZPopMin(ctx, p+"z").Result(); err != nil || len(z) != 1 || z[0].Member != "a" {
				t.Fatalf("zpopmin: %v %v", z, err)
			}
			check("xadd", rdb.XAdd(ctx, &redis.XAddArgs{Stream: p + "x", Values: []string{"f", "v"}}).Err())
			if s, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{p + "x", "0"}, Count: 10, Block: -1}).Result(); err != nil || len(s) != 1 || len(s[0].Messages) != 1 {
				t.Fatalf("xread: %v %v", s, err)
			}

			// Multi-key commands over keys on all three servers.
			var keys, kv []string
			onServer := map[string]int{}
			for i := 0; len(onServer) < 3 || len(keys) < 30; i++ {
				k := fmt.Sprintf("%smk%d", p, i)
				keys = append(keys, k)
				kv = append(kv, k, "v"+k)
				onServer[where(k)]++
			}
			check("mset", rdb.MSet(ctx, kv).Err())
			vals, err := rdb.MGet(ctx, append(keys, p+"missing", keys[0])...).Result()
			check("mget", err)
			for i, k := range keys {
				if vals[i] != "v"+k {
					t.Fatalf("mget %s: %v", k, vals[i])
				}
			}
			if vals[len(keys)] != nil || vals[len(keys)+1] != "v"+keys[0] {
				t.Fatalf("mget missing and duplicate: %v %v", vals[len(keys)], vals[len(keys)+1])
			}
			if n, err := rdb.Exists(ctx, keys[0], keys[1], keys[0], p+"missing").Result(); err != nil || n != 3 {
				t.Fatalf("exists: %d %v", n, err)
			}
			if n, err := rdb.Touch(ctx, keys...).Result(); err != nil || n != int64(len(keys)) {
				t.Fatalf("touch: %d %v", n, err)
			}
			if n, err := rdb.Unlink(ctx, keys[:10]...).Result(); err != nil || n != 10 {
				t.Fatalf("unlink: %d %v", n, err)
			}
			if n, err := rdb.Del(ctx, keys...).Result(); err != nil || n != int64(len(keys)-10) {
				t.Fatalf("del: %d %v", n, err)
			}

			// A pipeline mixing single-key, fanned-out and local commands.
			cmds, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
				for i := range 50 {
					k := fmt.Sprintf("%spl%d", p, i)
					pl.Set(ctx, k, i, 0)
					pl.Incr(ctx, k)
					pl.MGet(ctx, k, keys[i%len(keys)], p+"s")
					pl.Ping(ctx)
				}
				return nil
			})
			check("pipeline", err)
			for i := range 50 {
				if n := cmds[4*i+1].(*redis.IntCmd).Val(); n != int64(i+1) {
					t.Fatalf("pipelined incr %d: %d", i, n)
				}
				if v := cmds[4*i+2].(*redis.SliceCmd).Val(); len(v) != 3 || v[0] != strconv.Itoa(i+1) || v[1] != nil || v[2] != "v" {
					t.Fatalf("pipelined mget %d: %v", i, v)
				}
			}

			// Scripts: keys on one server.
			if v, err := rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{p + "s"}).Result(); err != nil || v != "v" {
				t.Fatalf("eval: %v %v", v, err)
			}
			other := keys[slices.IndexFunc(keys, func(k string) bool { return where(k) != where(keys[0]) })]
			if v, err := rdb.Eval(ctx, "return 1", []string{keys[0], other}).Result(); err == nil ||
				!strings.HasPrefix(err.Error(), "CROSSSLOT") {
				t.Fatalf("eval across servers: %v %v", v, err)
			}

			// Answered by the proxy.
			check("ping", rdb.Ping(ctx).Err())
			if v, err := rdb.Echo(ctx, "hi").Result(); err != nil || v != "hi" {
				t.Fatalf("echo: %q %v", v, err)
			}
			conn := rdb.Conn()
			defer conn.Close()
			check("client setname", conn.ClientSetName(ctx, "app").Err())
			if v, err := conn.ClientGetName(ctx).Result(); err != nil || v != "app" {
				t.Fatalf("client getname: %q %v", v, err)
			}
			check("select 0", conn.Select(ctx, 0).Err())
			if v, err := rdb.Info(ctx).Result(); err != nil || !strings.HasPrefix(v, "# Server\r\n") || !strings.Contains(v, "\r\n# Proxy\r\n") || !strings.Contains(v, "\r\nrequests:") {
				t.Fatalf("info: %q %v", v, err)
			}
			if n, err := rdb.Do(ctx, "COMMAND", "COUNT").Int(); err != nil || n < 200 {
				t.Fatalf("command count: %d %v", n, err)
			}
			if _, err := rdb.Time(ctx).Result(); err != nil {
				t.Fatalf("time: %v", err)
			}

			// Refused, with the connection kept.
			for _, tc := range []struct {
				args []any
				want string
			}{
				{[]any{"CLIENT", "PAUSE", "10"}, "ERR CLIENT PAUSE is not supported by shardproxy: it administers a single server"},
				{[]any{"SWAPDB", "0", "1"}, "ERR SWAPDB is not supported by shardproxy: it administers a single server"},
				{[]any{"foo", "bar"}, "ERR unknown command 'foo', with args beginning with: 'bar' "},
				{[]any{"get"}, "ERR wrong number of arguments for 'get' command"},
			} {
				if err := rdb.Do(ctx, tc.args...).Err(); err == nil || err.Error() != tc.want {
					t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
				}
			}
		})
	}

	t.Run("raw inline", func(t *testing.T) {
		c := respDial(t, addr)
		steps := []struct{ in, want string }{
			{"PING\r\n", "+PONG\r\n"},
			{"SET inline 'a b'\r\n", "+OK\r\n"},
			{"get inline\n", bulk("a b")},
			{"\r\n\r\n*0\r\nECHO \"x\\ty\"\r\n", bulk("x\ty")},
			{"MGET inline nope inline\r\n", "*3\r\n" + bulk("a b") + "$-1\r\n" + bulk("a b")},
			{"DEL inline nope\r\n", ":1\r\n"},
		}
		for _, s := range steps {
			if got := c.raw(s.in); got != s.want {
				t.Errorf("%q: %q, want %q", s.in, got, s.want)
			}
		}
		if got := c.raw("QUIT\r\n"); got != "+OK\r\n" {
			t.Errorf("quit: %q", got)
		}
		c.expectClosed()
	})

	t.Run("flushdb", func(t *testing.T) {
		c := respDial(t, addr)
		if got := c.do("FLUSHDB"); got != "+OK\r\n" {
			t.Fatalf("flushdb: %q", got)
		}
		for _, s := range servers {
			if got := directRedis(t, s.Addr, "", 0).do("DBSIZE"); got != ":0\r\n" {
				t.Errorf("%s after FLUSHDB: dbsize %q", s.Addr, got)
			}
		}
	})
}

// TestRedisFanoutParity sends the same multi-key commands, with keys on
// all three servers of the pool, to the proxy and to a fourth redis-server
// that holds every key: the replies must be the same bytes.
func TestRedisFanoutParity(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "rd")
	single := respDial(t, testserver.StartRedis(t).Addr)
	proxied := respDial(t, addr)
	where := redisPlacement(t, addrsOf(servers), "")

	var keys []string
	count := map[string]int{}
	for i := 0; len(keys) < 12; i++ {
		k := fmt.Sprintf("fan:%d", i)
		if count[where(k)] < 4 {
			count[where(k)]++
			keys = append(keys, k)
		}
	}
	if len(count) != 3 {
		t.Fatalf("keys on %d servers", len(count))
	}
	k := func(i int) string { return keys[i] }
	set := []string{"MSET"}
	for i, key := range keys {
		set = append(set, key, fmt.Sprintf("value-%d", i))
	}
	script := [][]string{
		{"FLUSHDB"},
		set,
		{"MGET", k(0), k(5), "missing", k(11), k(0), k(3), k(7)},
		{"MGET", "missing1", "missing2"},
		{"EXISTS", k(0), k(0), k(4), "missing", k(9), k(9), k(9)},
		{"TOUCH", k(1), k(1), k(6), "missing", k(10)},
		{"HSET", "hash", "f", "v"},
		{"MGET", k(2), "hash", k(8)},
		{"EXISTS", "hash", k(2)},
		{"MSET", k(0), "a", k(1), "b", k(0), "c"},
		{"MGET", k(0), k(1)},
		{"MSET", k(0), "a", k(1)},
		{"DEL", k(0), k(0), k(1), "missing", k(5), k(6)},
		{"UNLINK", k(2), k(3), k(3), "missing", k(7)},
		{"MGET", k(0), k(1), k(2), k(3), k(4), k(5), k(6), k(7), k(8), k(9), k(10), k(11)},
		{"DEL"},
		{"EXISTS", "missing"},
		{"DEL", "hash", k(4), k(8), k(9), k(10), k(11)},
		{"MGET", k(4), k(8)},
	}
	for _, args := range script {
		want := single.do(args...)
		if got := proxied.do(args...); got != want {
			t.Errorf("%q:\nproxy        %q\nredis-server %q", args, got, want)
		}
	}
}

// TestRedisSameServer: commands whose keys must share a server are refused
// across servers and work when a hash tag puts the keys together.
func TestRedisSameServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 2000\n  hash_tag: \"{}\"\n")
	_, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "{}")
	// Tags that hash to different servers: keys built on them stay apart.
	a, b := "{a}", ""
	for i := 0; b == ""; i++ {
		if k := fmt.Sprintf("{b%d}", i); where(k) != where(a) {
			b = k
		}
	}
	c := respDial(t, addr)
	const cross = "-CROSSSLOT keys in request don't hash to the same server\r\n"
	tests := []struct {
		args   func(x, y string) []string
		tagged string // the reply with both keys on one server
	}{
		{func(x, y string) []string { return []string{"MSETNX", x, "1", y, "2"} }, ":1\r\n"},
		{func(x, y string) []string { return []string{"SINTER", x, y} }, "*0\r\n"},
		{func(x, y string) []string { return []string{"SUNIONSTORE", x + "d", x, y} }, ":0\r\n"},
		{func(x, y string) []string { return []string{"RENAME", x, y + "r"} }, "-ERR no such key\r\n"},
		{func(x, y string) []string { return []string{"SMOVE", x + "s", y + "s", "m"} }, ":0\r\n"},
		{func(x, y string) []string { return []string{"RPOPLPUSH", x + "l", y + "l"} }, "$-1\r\n"},
		{func(x, y string) []string { return []string{"LMOVE", x + "l", y + "l", "LEFT", "RIGHT"} }, "$-1\r\n"},
		{func(x, y string) []string { return []string{"PFMERGE", x + "p", y + "p"} }, "+OK\r\n"},
		{func(x, y string) []string { return []string{"EVAL", "return #KEYS", "2", x, y} }, ":2\r\n"},
	}
	for i, tc := range tests {
		args := tc.args(a, b)
		t.Run(args[0], func(t *testing.T) {
			if got := c.do(args...); got != cross {
				t.Errorf("%q across servers: %q", args, got)
			}
			tagged := tc.args(fmt.Sprintf("{t}a%d", i), fmt.Sprintf("{t}b%d", i))
			if got := c.do(tagged...); got != tc.tagged {
				t.Errorf("%q on one server: %q, want %q", tagged, got, tc.tagged)
			}
		})
	}
}

// TestRedisAuthAndDB: the proxy demands AUTH itself, forwards nothing
// before it, and talks to its backends with their password and database.
func TestRedisAuthAndDB(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	const pw = "s3cret"
	servers, yaml := redisPool(t, 3, "  timeout: 2000\n  redis_auth: "+pw+"\n  redis_db: 2\n", "--requirepass", pw)
	_, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")

	c := respDial(t, addr)
	steps := []struct{ args, want string }{
		{multibulk("SET", "k", "v"), "-NOAUTH Authentication required.\r\n"},
		{multibulk("GET", "k"), "-NOAUTH Authentication required.\r\n"},
		{"MGET a b c\r\n", "-NOAUTH Authentication required.\r\n"},
		{"PING\r\n", "-NOAUTH Authentication required.\r\n"},
		{"AUTH wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"GET k\r\n", "-NOAUTH Authentication required.\r\n"},
		{"HELLO 2\r\n", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
	}
	for _, s := range steps {
		if got := c.raw(s.args); got != s.want {
			t.Errorf("%q before AUTH: %q, want %q", s.args, got, s.want)
		}
	}
	// Nothing reached a backend: no GET, SET or MGET in their command stats.
	for _, s := range servers {
		stats := directRedis(t, s.Addr, pw, 0).do("INFO", "commandstats")
		for _, cmd := range []string{"cmdstat_get:", "cmdstat_set:", "cmdstat_mget:", "cmdstat_select:"} {
			if strings.Contains(stats, cmd) {
				t.Errorf("%s saw %s before the client authenticated:\n%s", s.Addr, cmd, stats)
			}
		}
	}
	for _, s := range []struct{ args, want string }{
		{"AUTH " + pw + "\r\n", "+OK\r\n"},
		{"SET k v\r\n", "+OK\r\n"},
		{"GET k\r\n", bulk("v")},
		{"SELECT 2\r\n", "+OK\r\n"},
		{"SELECT 0\r\n", "-ERR SELECT 0 is not supported by shardproxy: this pool serves db 2 only\r\n"},
	} {
		if got := c.raw(s.args); got != s.want {
			t.Errorf("%q after AUTH: %q, want %q", s.args, got, s.want)
		}
	}
	// The key sits in db 2 of its server, nowhere else.
	for _, s := range servers {
		want := "$-1\r\n"
		if where("k") == s.Addr {
			want = bulk("v")
		}
		if got := directRedis(t, s.Addr, pw, 2).do("GET", "k"); got != want {
			t.Errorf("%s db 2: GET k = %q, want %q", s.Addr, got, want)
		}
		if got := directRedis(t, s.Addr, pw, 0).do("DBSIZE"); got != ":0\r\n" {
			t.Errorf("%s db 0: DBSIZE %q", s.Addr, got)
		}
	}

	ctx := context.Background()
	for _, o := range []*redis.Options{
		{Addr: addr, Password: pw},                     // HELLO 3 AUTH refused, then AUTH
		{Addr: addr, Password: pw, Protocol: 2, DB: 2}, // HELLO 2 AUTH, SELECT 2
		{Addr: addr, Username: "default", Password: pw},
	} {
		rdb := newGoRedis(t, o)
		if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Errorf("go-redis %+v: get %q %v", o, v, err)
		}
	}
	bad := newGoRedis(t, &redis.Options{Addr: addr, Password: "nope"})
	if err := bad.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("go-redis with a wrong password: %v", err)
	}
}

// TestRedisBadInput sends malformed RESP: each gets redis-server's error
// (and a closed connection where Redis closes), other clients keep being
// served, and memory stays bounded.
func TestRedisBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	// A Redis pool takes bulk strings up to 512 MiB by default; this one is
	// limited to 1 MiB so the test can cross the limit cheaply.
	_, yaml := redisPool(t, 3, "  timeout: 2000\n  item_size_max: 1048576\n")
	_, addr := startProxy(t, yaml, "rd")
	other := respDial(t, addr)
	if got := other.do("SET", "other", "ok"); got != "+OK\r\n" {
		t.Fatalf("set: %q", got)
	}
	checkOther := func(t *testing.T) {
		t.Helper()
		if got := other.do("GET", "other"); got != bulk("ok") {
			t.Fatalf("other client affected: %q", got)
		}
	}
	tests := []struct {
		name   string
		in     string
		want   string
		closed bool
	}{
		{"count not a number", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count over 1M", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"negative count is skipped", "*-3\r\nPING\r\n", "+PONG\r\n", false},
		{"negative bulk length", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"bulk length 1 GB", "*2\r\n$3\r\nGET\r\n$1000000000\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"bulk over item_size_max", multibulk("SET", "k", strings.Repeat("v", 1<<20+1)), "-ERR Protocol error: invalid bulk length\r\n", true},
		{"expected dollar", "*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n", true},
		{"unbalanced quotes", "SET \"a b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", true},
		{"inline over 64 KiB", strings.Repeat("x", 70000) + "\r\n", "-ERR Protocol error: too big inline request\r\n", true},
		{"unknown command", "FOO bar\r\n", "-ERR unknown command 'FOO', with args beginning with: 'bar' \r\n", false},
		{"http", "POST / HTTP/1.1\r\n", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := respDial(t, addr)
			if tc.closed {
				// The proxy may answer and close before it has read all
				// of a large request: the rest of the write may then fail.
				done := make(chan struct{})
				go func() {
					defer close(done)
					c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
					io.WriteString(c.nc, tc.in)
				}()
				defer func() { <-done }()
			} else {
				c.send(tc.in)
			}
			if tc.want != "" {
				if got := c.reply(); got != tc.want {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
			if tc.closed {
				c.expectClosed()
			} else if got := c.do("GET", "other"); got != bulk("ok") {
				t.Fatalf("connection not usable after the error: %q", got)
			}
			checkOther(t)
		})
	}

	t.Run("unterminated array waits", func(t *testing.T) {
		c := respDial(t, addr)
		c.send(multibulk("GET", "other") + "*2\r\n$3\r\nGET\r\n")
		if got := c.reply(); got != bulk("ok") {
			t.Fatalf("first request: %q", got)
		}
		checkOther(t)
		c.send("$5\r\nother\r\n")
		if got := c.reply(); got != bulk("ok") {
			t.Fatalf("completed request: %q", got)
		}
		c.send("*3\r\n$3\r\nSET\r\n") // and leave
	})

	t.Run("value of item_size_max", func(t *testing.T) {
		c := respDial(t, addr)
		v := strings.Repeat("v", 1<<20)
		if got := c.do("SET", "big", v); got != "+OK\r\n" {
			t.Fatalf("set: %q", got)
		}
		if got := c.do("GET", "big"); got != bulk(v) {
			t.Fatalf("get: %d bytes", len(got))
		}
	})

	for _, tc := range []struct{ name, prefix, want string }{
		{"inline", "", "-ERR Protocol error: too big inline request\r\n"},
		{"count line", "*", "-ERR Protocol error: too big mbulk count string\r\n"},
		{"bulk length line", "*1\r\n$", "-ERR Protocol error: too big bulk count string\r\n"},
	} {
		t.Run("10 MiB "+tc.name+" without an end", func(t *testing.T) {
			line := []byte(tc.prefix + strings.Repeat("1", 10<<20))
			c := respDial(t, addr)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			done := make(chan error, 1)
			go func() {
				c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				_, err := c.nc.Write(line) // the proxy may close before all is sent
				done <- err
			}()
			if got := c.reply(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			c.expectClosed()
			sendErr := <-done
			runtime.ReadMemStats(&after)
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("proxy allocated %d KiB refusing it (send ended with %v)", grew>>10, sendErr)
			if grew > 2<<20 {
				t.Errorf("allocated %d bytes for a refused line; want it bounded by the line limit", grew)
			}
			checkOther(t)
		})
	}
}

// loadingServer answers the proxy's handshake (PING) and then every
// request with -LOADING, as a redis-server still loading its data does.
func loadingServer(t *testing.T) string {
	t.Helper()
	return testserver.Fake(t, func(nc net.Conn) {
		p := respDialect.NewRequestParser(codec.Options{})
		var buf []byte
		chunk := make([]byte, 4096)
		for {
			nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			n, err := nc.Read(chunk)
			if err != nil {
				return
			}
			buf = append(buf, chunk[:n]...)
			for {
				var req codec.Request
				m, err := p.ParseRequest(buf, &req)
				if err != nil {
					break
				}
				buf = buf[m:]
				reply := "-LOADING Redis is loading the dataset in memory\r\n"
				if req.Name == "ping" {
					reply = "+PONG\r\n"
				}
				nc.Write([]byte(reply))
			}
		}
	})
}

// TestRedisLoadingCounts: -LOADING reaches the client and counts as a
// backend failure: after server_failure_limit of them the server is
// marked bad.
func TestRedisLoadingCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  timeout: 2000\n  server_failure_limit: 2\n  server_retry_timeout: 60000\n  servers:\n    - %s:1\n", loadingServer(t))
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	for i := range 2 {
		if got := c.do("GET", "k"); got != "-LOADING Redis is loading the dataset in memory\r\n" {
			t.Fatalf("request %d: %q", i, got)
		}
	}
	if got := c.do("GET", "k"); got != "-ERR backend failure: markedbad\r\n" {
		t.Fatalf("after two -LOADING: %q", got)
	}
}

// TestRedisBenchmark drives the proxy with redis-benchmark and checks that
// no request failed and that every key it wrote sits on the server the
// pool's distribution names.
func TestRedisBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server and redis-benchmark")
	}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Fatalf("redis-benchmark not found: install it (apt-get install redis-tools): %v", err)
	}
	servers, yaml := redisPool(t, 3, "  timeout: 5000\n  server_connections: 2\n")
	_, addr := startProxy(t, yaml, "rd")
	host, port, _ := net.SplitHostPort(addr)
	const tests = "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange,mset"
	n := "100000"
	if raceEnabled() { // the race detector slows the proxy down about tenfold
		n = "10000"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-t", tests,
		"-n", n, "-P", "16", "-r", "100000", "-q").CombinedOutput()
	t.Logf("redis-benchmark -n %s took %v:\n%s", n, time.Since(start), out)
	if err != nil {
		t.Fatalf("redis-benchmark: %v", err)
	}
	// Each test prints "NAME: N requests per second, p50=... msec"; an error
	// reply makes it print the error and stop.
	// Progress lines end in "\r", results in "\n".
	result := regexp.MustCompile(`^ *([^:]+): ([0-9.]+) requests per second`)
	var names []string
	for _, line := range strings.FieldsFunc(string(out), func(r rune) bool { return r == '\r' || r == '\n' }) {
		if m := result.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
		if strings.Contains(line, "ERR") || strings.Contains(strings.ToLower(line), "error") {
			t.Errorf("redis-benchmark reported an error: %s", line)
		}
	}
	if len(names) < 14 {
		t.Fatalf("redis-benchmark finished %d tests (%v), want all of %s", len(names), names, tests)
	}

	// Every key on every server is where the distribution puts it.
	where := redisPlacement(t, addrsOf(servers), "")
	total := 0
	for _, s := range servers {
		c := directRedis(t, s.Addr, "", 0)
		cursor := "0"
		for {
			r := c.do("SCAN", cursor, "COUNT", "1000")
			next, keys := parseScan(t, r)
			for _, k := range keys {
				total++
				if w := where(k); w != s.Addr {
					t.Errorf("key %q is on %s, the pool places it on %s", k, s.Addr, w)
				}
			}
			if cursor = next; cursor == "0" {
				break
			}
		}
	}
	if total < 1000 {
		t.Fatalf("only %d keys on the servers", total)
	}
	t.Logf("%d keys checked on %d servers", total, len(servers))
}

// parseScan reads a SCAN reply: the next cursor and the keys.
func parseScan(t *testing.T, r string) (string, []string) {
	t.Helper()
	lines := strings.Split(r, "\r\n")
	if len(lines) < 4 || lines[0] != "*2" {
		t.Fatalf("bad SCAN reply %q", r)
	}
	cursor := lines[2]
	var keys []string
	for i := 5; i+1 < len(lines); i += 2 {
		keys = append(keys, lines[i])
	}
	return cursor, keys
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestRedisInfo: INFO through the proxy answers the proxy's own section
// after the servers', with memcached proxy's counter names among them.
func TestRedisInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	c.do("SET", "k", "v")
	got := c.do("INFO")
	for _, want := range []string{"# Proxy\r\n", "\r\nrequests:", "\r\nproxy_config_reloads:0\r\n", "\r\nproxy_backend_total:2\r\n", "\r\ncmd_set:1\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO lacks %q:\n%s", want, got)
		}
	}
}

// TestRequestCountsBeforeReplies: sessions add up their request counters
// per read, and publish them before a reply can reach the client. A stats
// request pipelined behind others counts them, and a client that has a
// reply finds its request counted.
func TestRequestCountsBeforeReplies(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "  timeout: 2000\n")
	srv, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	c.send(multibulk("SET", "a", "1") + strings.Repeat(multibulk("GET", "a"), 3) + multibulk("INFO"))
	for range 4 {
		c.reply()
	}
	info := c.reply()
	for _, want := range []string{"\r\ncmd_set:1\r\n", "\r\ncmd_get:3\r\n", "\r\ncmd_info:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO pipelined behind SET and 3 GETs lacks %q:\n%s", want, info)
		}
	}
	before := srv.Stats().Pools[0].Requests
	for i := range int64(100) {
		if got := c.do("GET", "a"); got != "$1\r\n1\r\n" {
			t.Fatalf("GET a: %q", got)
		}
		if n := srv.Stats().Pools[0].Requests - before; n != i+1 {
			t.Fatalf("after %d replies the pool counts %d requests", i+1, n)
		}
	}
}
