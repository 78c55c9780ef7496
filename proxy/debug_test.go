package proxy_test

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// DEBUG, the persistence commands and PFDEBUG through a sharded pool of
// two redis-servers that allow DEBUG: by subcommand to a key's server,
// to every server (merged) or to any one, and refused otherwise.

// debugRig is a pool "rd" over two redis-servers with DEBUG allowed.
type debugRig struct {
	servers []*testserver.Server
	addr    string
	// on returns the server (index into servers) of a key.
	on func(key string) int
}

func startDebugRig(t *testing.T) debugRig {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs redis-server")
	}
	servers, yaml := redisPool(t, 2, "  hash_tag: \"{}\"\n", "--enable-debug-command", "yes")
	_, addr := startProxy(t, yaml, "rd")
	place := redisPlacement(t, addrsOf(servers), "{}")
	return debugRig{servers: servers, addr: addr, on: func(key string) int {
		if place(key) == servers[0].Addr {
			return 0
		}
		return 1
	}}
}

// keyOn returns a key (with prefix) the pool places on server i.
func (r debugRig) keyOn(t *testing.T, prefix string, i int) string {
	t.Helper()
	for n := range 100000 {
		if k := prefix + strconv.Itoa(n*7919); r.on(k) == i {
			return k
		}
	}
	t.Fatalf("no key with prefix %q on server %d", prefix, i)
	return ""
}

// direct returns a raw connection to server i.
func (r debugRig) direct(t *testing.T, i int) *respClient {
	return directRedis(t, r.servers[i].Addr, "", 0)
}

// debugCalls is how many DEBUG commands server i has run.
func (r debugRig) debugCalls(t *testing.T, i int) int {
	t.Helper()
	info := r.direct(t, i).do("INFO", "commandstats")
	_, rest, ok := strings.Cut(info, "cmdstat_debug:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

func TestRedisDebugKeys(t *testing.T) {
	rig := startDebugRig(t)
	c := respDial(t, rig.addr)
	for i := range rig.servers {
		k := rig.keyOn(t, "obj", i)
		if got := c.do("RPUSH", k, "a", "b"); got != ":2\r\n" {
			t.Fatalf("RPUSH %s: %q", k, got)
		}
		got := c.do("DEBUG", "OBJECT", k)
		if !strings.HasPrefix(got, "+Value at:") || !strings.Contains(got, "encoding:quicklist") {
			t.Errorf("DEBUG OBJECT %s (server %d): %q", k, i, got)
		}
		if got := rig.direct(t, 1-i).do("DEBUG", "OBJECT", k); got != "-ERR no such key\r\n" {
			t.Fatalf("the key is on the other server too: %q", got)
		}
		if got := c.do("DEBUG", "QUICKLIST", k); !strings.HasPrefix(got, "+Quicklist structure printed") {
			t.Errorf("DEBUG QUICKLIST %s: %q", k, got)
		}
		h := rig.keyOn(t, "hll", i)
		c.do("PFADD", h, "a", "b", "c")
		if got := c.do("PFDEBUG", "ENCODING", h); got != "+sparse\r\n" {
			t.Errorf("PFDEBUG ENCODING %s (server %d): %q", h, i, got)
		}
	}
	// DIGEST-VALUE of keys on one server is that server's; on two, the
	// proxy's usual refusal.
	k0, k1 := rig.keyOn(t, "obj", 0), rig.keyOn(t, "obj", 1)
	want := rig.direct(t, 0).do("DEBUG", "DIGEST-VALUE", k0)
	if got := c.do("DEBUG", "DIGEST-VALUE", k0); got != want || !strings.HasPrefix(got, "*1\r\n+") || len(got) != 4+1+40+2 {
		t.Errorf("DIGEST-VALUE %s: %q, the server says %q", k0, got, want)
	}
	if got := c.do("DEBUG", "DIGEST-VALUE", k0, k1); !strings.HasPrefix(got, "-CROSSSLOT") {
		t.Errorf("DIGEST-VALUE over two servers: %q", got)
	}
	if got := c.do("PFSELFTEST"); got != "+OK\r\n" {
		t.Errorf("PFSELFTEST: %q", got)
	}
}

func TestRedisDebugRefused(t *testing.T) {
	rig := startDebugRig(t)
	c := respDial(t, rig.addr)
	for _, tc := range []struct{ args, want string }{
		{"DEBUG SEGFAULT", "-ERR DEBUG SEGFAULT is not supported by shardproxy: it stops, restarts or breaks a server\r\n"},
		{"DEBUG restart", "-ERR DEBUG RESTART is not supported by shardproxy: it stops, restarts or breaks a server\r\n"},
		{"DEBUG POPULATE 10", "-ERR DEBUG POPULATE is not supported by shardproxy: it makes keys on servers that do not own them\r\n"},
		{"DEBUG CHANGE-REPL-ID", "-ERR DEBUG CHANGE-REPL-ID is not supported by shardproxy: it administers a single server\r\n"},
		{"DEBUG NOSUCH", "-ERR unknown subcommand 'NOSUCH'. Try DEBUG HELP.\r\n"},
		{"DEBUG SLEEP", "-ERR wrong number of arguments for 'debug|sleep' command\r\n"},
		{"DEBUG", "-ERR wrong number of arguments for 'debug' command\r\n"},
	} {
		if got := c.do(strings.Fields(tc.args)...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.args, got, tc.want)
		}
	}
	for i := range rig.servers {
		if got := rig.direct(t, i).do("DBSIZE"); got != ":0\r\n" {
			t.Errorf("server %d has keys after the refusals: %q", i, got)
		}
	}
	// A server that does not allow DEBUG says so itself: the proxy
	// relays its refusal and adds no power.
	_, yaml := redisPool(t, 2, "")
	_, addr := startProxy(t, yaml, "rd")
	if got := respDial(t, addr).do("DEBUG", "SLEEP", "0"); !strings.HasPrefix(got, "-ERR DEBUG command not allowed") {
		t.Errorf("DEBUG SLEEP to servers without enable-debug-command: %q", got)
	}
}

func TestRedisDebugEveryServer(t *testing.T) {
	rig := startDebugRig(t)
	c := respDial(t, rig.addr)
	zeros := "+" + strings.Repeat("0", 40) + "\r\n"
	if got := c.do("DEBUG", "DIGEST"); got != zeros {
		t.Fatalf("DIGEST of an empty pool: %q", got)
	}
	for i := range 200 {
		c.do("SET", rig.keyOn(t, "k"+strconv.Itoa(i)+":", i%2), strconv.Itoa(i))
	}
	digest := c.do("DEBUG", "DIGEST")
	var xor [20]byte
	for i := range rig.servers {
		d := rig.direct(t, i).do("DEBUG", "DIGEST")
		b, err := hex.DecodeString(strings.TrimSuffix(strings.TrimPrefix(d, "+"), "\r\n"))
		if err != nil || len(b) != 20 {
			t.Fatalf("server %d's digest %q", i, d)
		}
		for j := range xor {
			xor[j] ^= b[j]
		}
	}
	if want := "+" + hex.EncodeToString(xor[:]) + "\r\n"; digest != want || digest == zeros {
		t.Fatalf("DIGEST %q, the servers' XORed %q", digest, want)
	}

	// RELOAD: every server saves and loads its data again.
	sizes := make([]string, len(rig.servers))
	for i := range rig.servers {
		sizes[i] = rig.direct(t, i).do("DBSIZE")
	}
	if got := c.do("DEBUG", "RELOAD"); got != "+OK\r\n" {
		t.Fatalf("DEBUG RELOAD: %q", got)
	}
	for i := range rig.servers {
		d := rig.direct(t, i)
		if got := d.do("DBSIZE"); got != sizes[i] || got == ":0\r\n" {
			t.Errorf("server %d after RELOAD: %s keys, before %s", i, got, sizes[i])
		}
		if got := d.do("INFO", "persistence"); !strings.Contains(got, "rdb_changes_since_last_save:0") {
			t.Errorf("server %d did not save", i)
		}
	}
	if got := c.do("DEBUG", "DIGEST"); got != digest {
		t.Errorf("DIGEST after RELOAD %q, before %q", got, digest)
	}
	if k := rig.keyOn(t, "k7:", 1); c.do("GET", k) != "$1\r\n7\r\n" {
		t.Errorf("GET %s after RELOAD: %q", k, c.do("GET", k))
	}

	// SET-ACTIVE-EXPIRE 0 reaches every server: a key set to expire
	// stays counted until it is read.
	if got := c.do("DEBUG", "SET-ACTIVE-EXPIRE", "0"); got != "+OK\r\n" {
		t.Fatalf("SET-ACTIVE-EXPIRE 0: %q", got)
	}
	c.do("FLUSHDB")
	for i := range rig.servers {
		c.do("SET", rig.keyOn(t, "exp", i), "v", "PX", "1")
	}
	time.Sleep(300 * time.Millisecond) // several of the servers' cron runs (hz 10)
	for i := range rig.servers {
		if got := rig.direct(t, i).do("DBSIZE"); got != ":1\r\n" {
			t.Errorf("server %d expired its key with active expiry off: DBSIZE %q", i, got)
		}
	}
	if got := c.do("DEBUG", "SET-ACTIVE-EXPIRE", "1"); got != "+OK\r\n" {
		t.Fatalf("SET-ACTIVE-EXPIRE 1: %q", got)
	}
	for i := range rig.servers {
		d := rig.direct(t, i)
		waitFor(t, 5*time.Second, "server "+strconv.Itoa(i)+"'s active expiry", func() bool { return d.do("DBSIZE") == ":0\r\n" })
	}
}

func TestRedisDebugInMulti(t *testing.T) {
	rig := startDebugRig(t)
	for _, tc := range []struct {
		name  string
		first []string // before the first command with a key
	}{
		{"after a key", nil},
		{"before any key", []string{"DEBUG", "SLEEP", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range rig.servers {
				k := rig.keyOn(t, "tx"+strings.ReplaceAll(tc.name, " ", "")+":", i)
				before := [2]int{rig.debugCalls(t, 0), rig.debugCalls(t, 1)}
				c := respDial(t, rig.addr)
				run := func(c *respClient) string {
					if got := c.do("MULTI"); got != "+OK\r\n" {
						t.Fatalf("MULTI: %q", got)
					}
					if tc.first != nil {
						if got := c.do(tc.first...); got != "+QUEUED\r\n" {
							t.Fatalf("%v: %q", tc.first, got)
						}
					}
					for _, args := range [][]string{{"SET", k, "v", "PX", "1"}, {"DEBUG", "SLEEP", "0.1"}, {"GET", k}} {
						if got := c.do(args...); got != "+QUEUED\r\n" {
							t.Fatalf("%v: %q", args, got)
						}
					}
					return c.do("EXEC")
				}
				got := run(c)
				calls := 1 + len(tc.first)/3
				for j := range rig.servers {
					want := before[j]
					if j == i {
						want += calls
					}
					if n := rig.debugCalls(t, j); n != want {
						t.Errorf("server %d ran %d DEBUG, want %d (the key's server: %d)", j, n, want, i)
					}
				}
				if want := run(rig.direct(t, i)); got != want {
					t.Errorf("EXEC: %q, redis-server answers %q", got, want)
				}
			}
		})
	}
	// Outside a transaction, DEBUG SLEEP goes to every server.
	before := [2]int{rig.debugCalls(t, 0), rig.debugCalls(t, 1)}
	if got := respDial(t, rig.addr).do("DEBUG", "SLEEP", "0"); got != "+OK\r\n" {
		t.Fatalf("DEBUG SLEEP 0: %q", got)
	}
	for j := range rig.servers {
		if n := rig.debugCalls(t, j); n != before[j]+1 {
			t.Errorf("server %d ran %d DEBUG, want %d", j, n, before[j]+1)
		}
	}
}

func TestRedisDebugProtocol(t *testing.T) {
	rig := startDebugRig(t)
	for _, proto := range []string{"2", "3"} {
		c, d := respDial(t, rig.addr), rig.direct(t, 0)
		if proto == "3" {
			c.do("HELLO", "3")
			d.do("HELLO", "3")
		}
		for _, typ := range []string{"string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "verbatim", "true", "false"} {
			// An attribute and the reply after it are one reply.
			if got, want := c.do("DEBUG", "PROTOCOL", typ), d.do("DEBUG", "PROTOCOL", typ); got != want {
				t.Errorf("RESP%s DEBUG PROTOCOL %s: %q, redis-server answers %q", proto, typ, got, want)
			}
		}
		// A push and the reply after it would be two: refused in RESP3,
		// the server's own error in RESP2.
		want := "-ERR DEBUG PROTOCOL PUSH is not supported by shardproxy: a push frame on a shared server connection would be taken for a reply\r\n"
		if proto == "2" {
			want = d.do("DEBUG", "PROTOCOL", "push")
		}
		if got := c.do("DEBUG", "PROTOCOL", "push"); got != want {
			t.Errorf("RESP%s DEBUG PROTOCOL push: %q, want %q", proto, got, want)
		}
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Errorf("RESP%s PING after DEBUG PROTOCOL: %q", proto, got)
		}
	}
}

func TestRedisPersistence(t *testing.T) {
	rig := startDebugRig(t)
	c := respDial(t, rig.addr)
	for i := range 20 {
		c.do("SET", "k"+strconv.Itoa(i), "v")
	}
	if got := c.do("SAVE"); got != "+OK\r\n" {
		t.Fatalf("SAVE: %q", got)
	}
	lastsave := func() int64 {
		t.Helper()
		oldest := int64(-1)
		for i := range rig.servers {
			n, err := strconv.ParseInt(strings.Trim(rig.direct(t, i).do("LASTSAVE"), ":\r\n"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if oldest < 0 || n < oldest {
				oldest = n
			}
		}
		return oldest
	}
	if got, want := c.do("LASTSAVE"), ":"+strconv.FormatInt(lastsave(), 10)+"\r\n"; got != want {
		t.Errorf("LASTSAVE %q, the servers' oldest %q", got, want)
	}
	idle := func(field string) func() bool {
		return func() bool {
			for i := range rig.servers {
				if !strings.Contains(rig.direct(t, i).do("INFO", "persistence"), field+":0") {
					return false
				}
			}
			return true
		}
	}
	if got := c.do("BGSAVE"); got != "+Background saving started\r\n" {
		t.Fatalf("BGSAVE: %q", got)
	}
	waitFor(t, 10*time.Second, "every server's BGSAVE", idle("rdb_bgsave_in_progress"))
	for i := range rig.servers {
		if got := rig.direct(t, i).do("INFO", "persistence"); !strings.Contains(got, "rdb_last_bgsave_status:ok") {
			t.Errorf("server %d's BGSAVE: %q", i, got)
		}
	}
	if got := c.do("BGREWRITEAOF"); got != "+Background append only file rewriting started\r\n" {
		t.Fatalf("BGREWRITEAOF: %q", got)
	}
	waitFor(t, 10*time.Second, "every server's BGREWRITEAOF", idle("aof_rewrite_in_progress"))
	if got := c.do("BGSAVE", "SCHEDULE"); got != "+Background saving started\r\n" {
		t.Errorf("BGSAVE SCHEDULE: %q", got)
	}
	waitFor(t, 10*time.Second, "every server's BGSAVE", idle("rdb_bgsave_in_progress"))
}
