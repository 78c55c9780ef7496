package lua_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/sharding"
)

// The route files in testdata/lua run unchanged (but for their backend
// ports) and do what their comments say.

// holders returns the indexes of the servers that have key.
func holders(t *testing.T, servers []*testserver.Server, key string) []int {
	t.Helper()
	var in []int
	for i, s := range servers {
		if _, ok := get(t, s.Addr, key); ok {
			in = append(in, i)
		}
	}
	return in
}

func storeVia(t *testing.T, c *client, key, value string) {
	t.Helper()
	if got := c.do(setReq(key, value)); got != "STORED\r\n" {
		t.Fatalf("set %s: %q", key, got)
	}
}

func valueReply(key, value string) string {
	return fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value)
}

func TestExampleShard(t *testing.T) {
	mc := memcached(t, 3)
	addr, _ := testdataRoutes(t, "shard.lua", map[int]int{11411: mc[0].Port, 11412: mc[1].Port, 11413: mc[2].Port}, "")
	c := dial(t, addr)
	used := map[int]bool{}
	for i := range 30 {
		key := fmt.Sprintf("key%d", i)
		storeVia(t, c, key, "v")
		in := holders(t, mc, key)
		if len(in) != 1 {
			t.Fatalf("%s on servers %v, want exactly one", key, in)
		}
		used[in[0]] = true
		if got := c.do("get " + key + "\r\n"); got != valueReply(key, "v") {
			t.Errorf("get %s: %q", key, got)
		}
	}
	if len(used) != 3 {
		t.Errorf("keys on %d servers, want all 3", len(used))
	}
	if got := c.do("mg key1 v\r\n"); got != "VA 1\r\nv\r\n" {
		t.Errorf("meta get: %q", got)
	}
}

func TestExamplePrefix(t *testing.T) {
	mc := memcached(t, 4)
	addr, _ := testdataRoutes(t, "prefix.lua", map[int]int{
		11411: mc[0].Port, 11412: mc[1].Port, 11413: mc[2].Port, 11414: mc[3].Port}, "")
	c := dial(t, addr)
	users := map[int]bool{}
	for i := range 20 {
		key := fmt.Sprintf("/users/%d", i)
		storeVia(t, c, key, "u")
		in := holders(t, mc, key)
		if len(in) != 1 || in[0] > 1 {
			t.Fatalf("%s on %v, want one of the users servers (0, 1)", key, in)
		}
		users[in[0]] = true
	}
	if len(users) != 2 {
		t.Errorf("users keys on %d servers, want 2", len(users))
	}
	for key, want := range map[string]int{"/sessions/abc": 2, "/other/x": 3, "plain": 3} {
		storeVia(t, c, key, "s")
		if in := holders(t, mc, key); len(in) != 1 || in[0] != want {
			t.Errorf("%s on %v, want server %d", key, in, want)
		}
	}
}

func TestExampleReplicated(t *testing.T) {
	mc := memcached(t, 3)
	ports := map[int]int{11411: mc[0].Port, 11412: mc[1].Port, 11413: mc[2].Port}
	addr, _ := testdataRoutes(t, "replicated.lua", ports, "")
	c := dial(t, addr)
	storeVia(t, c, "rep", "v1")
	eventually(t, "the write on every replica", func() bool { return len(holders(t, mc, "rep")) == 3 })
	// Reads fail over to the next replica on a miss.
	set(t, mc[2].Addr, "only3", "x")
	if got := c.do("get only3\r\n"); got != valueReply("only3", "x") {
		t.Errorf("read failover: %q", got)
	}
	if got := c.do("delete rep\r\n"); got != "DELETED\r\n" {
		t.Errorf("delete: %q", got)
	}
	eventually(t, "the delete on every replica", func() bool { return len(holders(t, mc, "rep")) == 0 })

	// One replica down: writes still succeed (two of three).
	mc[1].Stop()
	storeVia(t, c, "rep2", "v2")
	if got := c.do("get rep2\r\n"); got != valueReply("rep2", "v2") {
		t.Errorf("read with a replica down: %q", got)
	}
	// Two down: no majority, an error.
	mc[0].Stop()
	if got := c.do("set rep3 0 0 1\r\nx\r\n"); !strings.HasPrefix(got, "SERVER_ERROR backend failure") {
		t.Errorf("write without a majority: %q", got)
	}
}

func TestExampleFailover(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := testdataRoutes(t, "failover.lua", map[int]int{11411: mc[0].Port, 11412: mc[1].Port}, "")
	c := dial(t, addr)
	set(t, mc[0].Addr, "k", "primary")
	set(t, mc[1].Addr, "k", "secondary")
	set(t, mc[1].Addr, "only2", "secondary")
	if got := c.do("get k\r\n"); got != valueReply("k", "primary") {
		t.Errorf("primary up: %q", got)
	}
	if got := c.do("get only2\r\n"); got != "END\r\n" {
		t.Errorf("a primary miss is an answer: %q", got)
	}
	mc[0].Stop()
	for range 3 { // connecting, then marked bad: both fail over
		if got := c.do("get k\r\n"); got != valueReply("k", "secondary") {
			t.Errorf("primary down: %q", got)
		}
	}
	storeVia(t, c, "written", "during outage")
	if v, ok := get(t, mc[1].Addr, "written"); !ok || v != "during outage" {
		t.Errorf("write during the outage went to %q %v", v, ok)
	}
}

func TestExampleWarmup(t *testing.T) {
	mc := memcached(t, 2)
	newPool, oldPool := mc[0], mc[1]
	addr, _ := testdataRoutes(t, "warmup.lua", map[int]int{11411: newPool.Port, 11412: oldPool.Port}, "")
	c := dial(t, addr)
	set(t, oldPool.Addr, "warm", "from old")
	if _, ok := get(t, newPool.Addr, "warm"); ok {
		t.Fatal("new pool has the key before the test")
	}
	if got := c.do("get warm\r\n"); got != valueReply("warm", "from old") {
		t.Fatalf("miss -> old pool: %q", got)
	}
	eventually(t, "the key copied into the new pool", func() bool {
		v, ok := get(t, newPool.Addr, "warm")
		return ok && v == "from old"
	})
	if got := c.do("get cold\r\n"); got != "END\r\n" {
		t.Errorf("miss in both: %q", got)
	}
	storeVia(t, c, "fresh", "new only")
	if _, ok := get(t, oldPool.Addr, "fresh"); ok {
		t.Error("a write reached the old pool")
	}
	if got := c.do("get fresh\r\n"); got != valueReply("fresh", "new only") {
		t.Errorf("hit in the new pool: %q", got)
	}
}

func TestExampleShadow(t *testing.T) {
	mc := memcached(t, 2)
	main, shadowServer := mc[0], mc[1]
	const delay = 400 * time.Millisecond
	addr, _ := testdataRoutes(t, "shadow.lua", map[int]int{
		11411: main.Port, 11412: delayRelay(t, shadowServer.Addr, delay)}, "")
	c := dial(t, addr)
	got, took := c.timed("set sh 0 0 4\r\nmain\r\n")
	if got != "STORED\r\n" || took >= delay/2 {
		t.Errorf("set answered %q after %v; the slow shadow (%v) must not delay it", got, took, delay)
	}
	if v, ok := get(t, main.Addr, "sh"); !ok || v != "main" {
		t.Errorf("main: %q %v", v, ok)
	}
	eventually(t, "the shadow copy", func() bool {
		v, ok := get(t, shadowServer.Addr, "sh")
		return ok && v == "main"
	})
	// The shadow's answers never reach the client.
	set(t, shadowServer.Addr, "diverged", "shadow")
	if got := c.do("get diverged\r\n"); got != "END\r\n" {
		t.Errorf("got the shadow's answer: %q", got)
	}
	// A dead shadow changes nothing.
	shadowServer.Stop()
	for i := range 3 {
		got, took := c.timed(fmt.Sprintf("set dead%d 0 0 1\r\nx\r\n", i))
		if got != "STORED\r\n" || took >= delay/2 {
			t.Errorf("with the shadow down: %q after %v", got, took)
		}
	}
}

// TestV1Zones runs a route file in the style of memcached's own example
// config (t/startfile.lua).
func TestV1Zones(t *testing.T) {
	mc := memcached(t, 3)
	addr, _ := testdataRoutes(t, "v1_zones.lua", map[int]int{11411: mc[0].Port, 11412: mc[1].Port, 11413: mc[2].Port}, "")
	c := dial(t, addr)
	// Writes to /foo/ reach every zone; the answer is the local zone's.
	storeVia(t, c, "/foo/a", "A")
	for i := range mc {
		eventually(t, fmt.Sprintf("/foo/a in zone %d", i+1), func() bool {
			v, ok := get(t, mc[i].Addr, "/foo/a")
			return ok && v == "A"
		})
	}
	// A local miss asks the far zones.
	set(t, mc[2].Addr, "/foo/far", "z3")
	if got := c.do("get /foo/far\r\n"); got != valueReply("/foo/far", "z3") {
		t.Errorf("far zone lookup: %q", got)
	}
	if got := c.do("get /foo/none\r\n"); got != "END\r\n" {
		t.Errorf("miss everywhere: %q", got)
	}
	// /bar/ stays local.
	storeVia(t, c, "/bar/b", "B")
	if in := holders(t, mc, "/bar/b"); len(in) != 1 || in[0] != 0 {
		t.Errorf("/bar/b in zones %v, want the local one only", in)
	}
	set(t, mc[1].Addr, "/bar/far", "z2")
	if got := c.do("get /bar/far\r\n"); got != "END\r\n" {
		t.Errorf("/bar/ asked a far zone: %q", got)
	}
	if got := c.do("touch /bar/b 10\r\n"); got != "TOUCHED\r\n" {
		t.Errorf("touch: %q", got)
	}
	if got := c.do("get other\r\n"); got != "SERVER_ERROR no route\r\n" {
		t.Errorf("no route: %q", got)
	}
}

// TestV1Simple runs a route file in the style of the memcached wiki's first
// proxy example.
func TestV1Simple(t *testing.T) {
	mc := memcached(t, 4)
	addr, logs := testdataRoutes(t, "v1_simple.lua", map[int]int{
		11411: mc[0].Port, 11412: mc[1].Port, 11413: mc[2].Port, 11414: mc[3].Port}, "")
	c := dial(t, addr)
	storeVia(t, c, "slow/x", "s")
	if in := holders(t, mc, "slow/x"); len(in) != 1 || in[0] != 3 {
		t.Errorf("slow/x on %v, want the slow pool", in)
	}
	// A user's keys share a server: "|#|..." is cut before hashing.
	sp, err := sharding.New(sharding.Config{Servers: []sharding.Server{{Name: "1", Weight: 1}, {Name: "2", Weight: 1},
		{Name: "3", Weight: 1}}, Hash: "xxh3", Distribution: "jump", KeepOrder: true, Seed: sharding.XXH3([]byte("main"), 0)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		key := fmt.Sprintf("user:%d|#|profile", i)
		storeVia(t, c, key, "p")
		want, _ := sp.Pick([]byte(fmt.Sprintf("user:%d", i)))
		if in := holders(t, mc, key); len(in) != 1 || in[0] != want {
			t.Errorf("%s on %v, want %d", key, in, want)
		}
		if got := c.do("get " + key + "\r\n"); got != valueReply(key, "p") {
			t.Errorf("get %s: %q", key, got)
		}
	}
	if got := c.do("delete user:1|#|profile\r\n"); got != "DELETED\r\n" {
		t.Errorf("delete: %q", got)
	}
	// Errors are logged by log_reqsample; misses are not errors.
	c.do("get nothing\r\n")
	mc[3].Stop()
	if got := c.do("get slow/x\r\n"); !strings.HasPrefix(got, "SERVER_ERROR backend failure") {
		t.Errorf("slow pool down: %q", got)
	}
	eventually(t, "the error logged", func() bool { return strings.Contains(logs.String(), `req="get slow/x"`) })
	if strings.Contains(logs.String(), `req="get nothing"`) {
		t.Error("a miss was logged as an error")
	}
}

// TestV1Ketama runs a route file that keeps twemproxy's ketama placement
// through memcached's ring distribution.
func TestV1Ketama(t *testing.T) {
	mc := memcached(t, 3)
	addr, logs := testdataRoutes(t, "v1_ketama.lua", map[int]int{11411: mc[0].Port, 11412: mc[1].Port, 11413: mc[2].Port}, "")
	c := dial(t, addr)
	servers := make([]sharding.Server, 3)
	for i, s := range mc {
		servers[i] = sharding.Server{Name: s.Addr, Weight: 1}
	}
	sp, err := sharding.New(sharding.Config{Servers: servers, Hash: "md5", Distribution: "ring", KeepOrder: true,
		Dist: sharding.DistOptions{RingMode: "twemproxy"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		key := fmt.Sprintf("tw%d", i)
		if got := c.do(fmt.Sprintf("set %s 0 999999 1\r\nx\r\n", key)); got != "STORED\r\n" {
			t.Fatalf("set: %q", got)
		}
		want, _ := sp.Pick([]byte(key))
		if in := holders(t, mc, key); len(in) != 1 || in[0] != want {
			t.Errorf("%s on %v, want %d", key, in, want)
		}
	}
	// The TTL was capped at a day.
	ttl := dial(t, mc[0].Addr)
	for i := range 20 {
		key := fmt.Sprintf("tw%d", i)
		want, _ := sp.Pick([]byte(key))
		if want != 0 {
			continue
		}
		got := ttl.do("mg " + key + " t\r\n")
		if !strings.HasPrefix(got, "HD t8640") && !strings.HasPrefix(got, "HD t8639") {
			t.Errorf("ttl of %s: %q, want about 86400", key, got)
		}
		break
	}
	if got := c.do("mg tw1 v N30\r\n"); got != "CLIENT_ERROR vivify not allowed through this proxy\r\n" {
		t.Errorf("mg N: %q", got)
	}
	if got := c.do("mg tw1 v k\r\n"); got != "VA 1 ktw1\r\nx\r\n" {
		t.Errorf("mg k: %q", got)
	}
	mc[0].Stop()
	mc[1].Stop()
	mc[2].Stop()
	c.do("mg tw1 v\r\n")
	eventually(t, "the failed mg logged", func() bool { return strings.Contains(logs.String(), "detail=\"mg failed\"") })
}

// TestV2MutateExample runs examples/lua/v2_mutate.lua.
func TestV2MutateExample(t *testing.T) {
	mc := memcached(t, 1)
	port, tp := tapRelay(t, mc[0].Addr)
	addr, _ := exampleRoutes(t, "v2_mutate.lua", map[int]int{11611: port})
	c := dial(t, addr)
	runSteps(t, c, tp, []step{
		{"mg zz/k v\r\n", "CLIENT_ERROR unknown tenant\r\n", ""},
		{"set zz/k 0 0 1\r\nx\r\n", "CLIENT_ERROR unknown tenant\r\n", ""},
		{"ms a/k 2 F7\r\nhi\r\n", "HD\r\n", "ms a/k 2 F7 T3600\r\nhi\r\n"},
		{"ms b/k 2 T60\r\nhi\r\n", "HD\r\n", "ms b/k 2 T60\r\nhi\r\n"},
		{"mg a/nope v\r\n", "EN\r\n", "mg a/nope v t\r\n"},
		{"get a/k\r\n", "VALUE a/k 7 2\r\nhi\r\nEND\r\n", "get a/k\r\n"},
	})
	got := c.do("mg a/k v f O9 k\r\n")
	if !regexp.MustCompile(`^VA 2 f7 O9 t(3600|3599)\r\nhi\r\n$`).MatchString(got) {
		t.Errorf("mg: %q", got)
	}
	if got := tp.take(); got != "mg a/k v f O9 t\r\n" {
		t.Errorf("mg reached the backend as %q", got)
	}
}

// v2_split_shadow.lua: the client sees the main pool's answers; writes are
// copied to the shadow, reads are not (as memcached 1.6.45's proxy runs
// the same file).
func TestExampleV2SplitShadow(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_split_shadow.lua", map[int]int{11211: mc[0].Port, 11212: mc[1].Port})
	c := dial(t, addr)
	set(t, mc[0].Addr, "onlymain", "m")
	for _, tc := range []struct{ req, want string }{
		{"set s1 0 0 2\r\nhi\r\n", "STORED\r\n"},
		{"get s1\r\n", "VALUE s1 0 2\r\nhi\r\nEND\r\n"},
		{"mg s1 v\r\n", "VA 2\r\nhi\r\n"},
		{"delete nokey\r\n", "NOT_FOUND\r\n"},
		{"ms s2 2\r\nyo\r\n", "HD\r\n"},
		{"incr s1 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
		{"get onlymain\r\n", "VALUE onlymain 0 1\r\nm\r\nEND\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	for _, key := range []string{"s1", "s2"} {
		if v, ok := get(t, mc[0].Addr, key); !ok {
			t.Errorf("main lacks %s (%q)", key, v)
		}
		eventually(t, "the shadow's copy of "+key, func() bool { _, ok := get(t, mc[1].Addr, key); return ok })
	}
	// the shadow never answers: with it down, the main pool still does
	mc[1].Stop()
	if got := c.do("set s3 0 0 1\r\nx\r\n"); got != "STORED\r\n" {
		t.Errorf("set with the shadow down: %q", got)
	}
	if got := c.do("get s3\r\n"); got != "VALUE s3 0 1\r\nx\r\nEND\r\n" {
		t.Errorf("get with the shadow down: %q", got)
	}
}

// v2_ratelim.lua: reads have a bucket per worker (a client stays on one),
// writes one for the whole proxy, shared by every client; memcached 1.6.45
// gives 3 reads and 5 writes with the same file, and a request over its
// limit does not reach the backend.
func TestExampleV2Ratelim(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := exampleRoutes(t, "v2_ratelim.lua", map[int]int{11211: mc[0].Port})
	c := dial(t, addr)
	c.send("mg r1 v\r\nmg r2 v\r\nmg r3 v\r\nmg r4 v\r\nmg r5 v\r\n")
	for i, want := range []string{"EN", "EN", "EN", "SERVER_ERROR slow down", "SERVER_ERROR slow down"} {
		if got := c.line(); got != want {
			t.Errorf("read %d: %q, want %q", i+1, got, want)
		}
	}
	// writes from several clients (on different workers) share one bucket
	stored, refused := 0, 0
	for i := range 8 {
		w := dial(t, addr)
		switch got := w.do(fmt.Sprintf("set w%d 0 0 1\r\na\r\n", i)); got {
		case "STORED\r\n":
			stored++
		case "SERVER_ERROR slow down\r\n":
			refused++
		default:
			t.Errorf("set w%d: %q", i, got)
		}
	}
	if stored != 5 || refused != 3 {
		t.Errorf("%d writes stored, %d refused; want 5 and 3", stored, refused)
	}
	if in := holders(t, mc, "w0"); len(in) != 1 {
		t.Errorf("the first write is not on the backend")
	}
	if in := holders(t, mc, "w7"); len(in) != 0 {
		t.Errorf("a refused write reached the backend")
	}
}

// v2_cron.lua: the cron runs every second, with mcp.server_stats, and the
// proxy serves meanwhile.
func TestExampleV2Cron(t *testing.T) {
	mc := memcached(t, 1)
	addr, logs := exampleRoutes(t, "v2_cron.lua", map[int]int{11211: mc[0].Port})
	c := dial(t, addr)
	storeVia(t, c, "k", "v")
	pid := fmt.Sprintf(", pid %d", os.Getpid())
	eventually(t, "two cron runs", func() bool { return logs.count("cron: run 2"+pid) == 1 })
	if logs.count("lua cron failed") != 0 {
		t.Errorf("the cron failed:\n%s", logs)
	}
	if got := c.do("get k\r\n"); got != valueReply("k", "v") {
		t.Errorf("get: %q", got)
	}
}
