package proxy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/proxy"
	"shardproxy/sharding"
)

// The replica read tests run two shards of real redis-servers, each a
// master and a replica (--replicaof), behind a sharded redis pool with
// read_from, and tell who served a read by the servers' own
// INFO commandstats.

// replicaShards is two masters and a replica of each, the replicas'
// links up.
type replicaShards struct {
	masters, replicas []*testserver.Server
}

func startReplicaShards(t *testing.T) *replicaShards {
	t.Helper()
	rs := &replicaShards{}
	for range 2 {
		m := testserver.StartRedis(t, "--repl-diskless-sync-delay", "0")
		rs.masters = append(rs.masters, m)
		rs.replicas = append(rs.replicas, testserver.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(m.Port)))
	}
	for _, r := range rs.replicas {
		waitLinkUp(t, r.Addr)
	}
	return rs
}

// waitLinkUp waits until the replica at addr has its link to the master up.
func waitLinkUp(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, 20*time.Second, addr+" link up", func() bool {
		info, err := testserver.RedisDo(addr, "INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
}

// yaml is a pool "rp" over the shards, named s0 and s1, with the
// replicas listed and extra keys.
func (rs *replicaShards) yaml(extra string) string {
	var b strings.Builder
	b.WriteString("rp:\n  listen: 127.0.0.1:0\n  redis: true\n" + extra + "  servers:\n")
	for i, m := range rs.masters {
		fmt.Fprintf(&b, "   - %s:1 s%d\n", m.Addr, i)
	}
	b.WriteString("  replicas:\n")
	for i, r := range rs.replicas {
		fmt.Fprintf(&b, "   - %s s%d\n", r.Addr, i)
	}
	return b.String()
}

// cmdCalls returns a server's cmdstat_<cmd> calls.
func cmdCalls(t testing.TB, addr, cmd string) int {
	t.Helper()
	info, err := testserver.RedisDo(addr, "INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats of %s: %v", addr, err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

// shardRing places keys as the pool does: ketama over s0 and s1.
func shardRing(t testing.TB, names ...string) func(string) int {
	t.Helper()
	var servers []sharding.Server
	for _, n := range names {
		servers = append(servers, sharding.Server{Name: n, Weight: 1})
	}
	ring, err := sharding.New(sharding.Config{Servers: servers, Hash: "fnv1a_64", Distribution: "ketama"})
	if err != nil {
		t.Fatal(err)
	}
	return func(k string) int {
		i, err := ring.Pick([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
}

// writeKeys sets keys k0..k(n-1) to v-<key> through the proxy, checks
// each is on its shard's master, and waits until the replicas have them.
func writeKeys(t *testing.T, c *clConn, masters, replicas []string, shardOf func(string) int, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		if r := mustDo(t, c, "SET", k, "v-"+k); r != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, r)
		}
	}
	for _, k := range keys {
		s := shardOf(k)
		if got, _ := testserver.RedisDo(masters[s], "GET", k); got != "v-"+k {
			t.Fatalf("key %s not on its shard's master %s: %q", k, masters[s], got)
		}
		if got, _ := testserver.RedisDo(masters[1-s], "EXISTS", k); got != "0" {
			t.Fatalf("key %s on the other shard's master too: %q", k, got)
		}
		waitFor(t, 5*time.Second, k+" replicated", func() bool {
			got, _ := testserver.RedisDo(replicas[s], "GET", k)
			return got == "v-"+k
		})
	}
	return keys
}

// serverRequests is the requests counter of the pool's server name.
func serverRequests(srv *proxy.Server, pool, name string) (int64, bool) {
	for _, p := range srv.Stats().Pools {
		for _, s := range p.Servers {
			if p.Name == pool && s.Name == name {
				return s.Requests, true
			}
		}
	}
	return 0, false
}

// Reads go to the replicas, writes and transactions to the masters, and
// every key stays on its shard.
func TestReplicaReads(t *testing.T) {
	rs := startReplicaShards(t)
	srv, addr := startProxy(t, rs.yaml("  read_from: prefer_replica\n"), "rp")
	masters := []string{rs.masters[0].Addr, rs.masters[1].Addr}
	replicas := []string{rs.replicas[0].Addr, rs.replicas[1].Addr}
	c := mustDial(t, addr)
	shardOf := shardRing(t, "s0", "s1")
	mSet := []int{cmdCalls(t, masters[0], "set"), cmdCalls(t, masters[1], "set")}
	keys := writeKeys(t, c, masters, replicas, shardOf, 40)
	perShard := []int{0, 0}
	for _, k := range keys {
		perShard[shardOf(k)]++
	}
	if perShard[0] == 0 || perShard[1] == 0 {
		t.Fatalf("keys on one shard only: %v", perShard)
	}
	for i := range 2 {
		if got := cmdCalls(t, masters[i], "set") - mSet[i]; got != perShard[i] {
			t.Errorf("master %d ran %d SETs, want %d", i, got, perShard[i])
		}
	}

	mGet := []int{cmdCalls(t, masters[0], "get"), cmdCalls(t, masters[1], "get")}
	rGet := []int{cmdCalls(t, replicas[0], "get"), cmdCalls(t, replicas[1], "get")}
	rMget := []int{cmdCalls(t, replicas[0], "mget"), cmdCalls(t, replicas[1], "mget")}
	for _, k := range keys {
		if r := mustDo(t, c, "GET", k); r != bulk("v-"+k) {
			t.Fatalf("GET %s: %q", k, r)
		}
	}
	// An MGET over both shards is split, each part read from a replica.
	want := fmt.Sprintf("*%d\r\n", len(keys))
	for _, k := range keys {
		want += bulk("v-" + k)
	}
	if r := mustDo(t, c, append([]string{"MGET"}, keys...)...); r != want {
		t.Fatalf("MGET: %q", r)
	}
	for i := range 2 {
		if got := cmdCalls(t, masters[i], "get") - mGet[i]; got != 0 {
			t.Errorf("master %d served %d GETs, want 0", i, got)
		}
		if got := cmdCalls(t, replicas[i], "get") - rGet[i]; got != perShard[i] {
			t.Errorf("replica %d served %d GETs, want %d", i, got, perShard[i])
		}
		if got := cmdCalls(t, replicas[i], "mget") - rMget[i]; got != 1 {
			t.Errorf("replica %d served %d MGETs, want 1", i, got)
		}
	}
	if n := routerStat(t, srv, "rp", "replica_reads"); n != int64(len(keys)+2) {
		t.Errorf("replica_reads = %d, want %d", n, len(keys)+2)
	}
	for i, a := range replicas {
		if n, ok := serverRequests(srv, "rp", a); !ok || n < int64(perShard[i]+1) {
			t.Errorf("server %s: requests %d (listed %v), want at least %d", a, n, ok, perShard[i]+1)
		}
	}

	// A transaction and a script run on the master, reads included.
	k := keys[0]
	s := shardOf(k)
	before := cmdCalls(t, masters[s], "get")
	for _, args := range [][]string{{"MULTI"}, {"GET", k}, {"EXEC"}} {
		mustDo(t, c, args...)
	}
	if r := mustDo(t, c, "EVAL_RO", "return redis.call('GET', KEYS[1])", "1", k); r != bulk("v-"+k) {
		t.Fatalf("EVAL_RO: %q", r)
	}
	if got := cmdCalls(t, masters[s], "get") - before; got != 2 {
		t.Errorf("master served %d GETs of a transaction and a script, want 2", got)
	}
	// A write is never sent to a replica (which would refuse it).
	if r := mustDo(t, c, "INCR", "counter"); r != ":1\r\n" {
		t.Errorf("INCR: %q", r)
	}
}

// A stopped replica's reads move to its master under prefer_replica, and
// come back once it is up again: at once when the backend's failure
// counting marks it bad (server_failure_limit 2, the default), within the
// check interval when only the check notices (a limit never reached).
func TestReplicaStopped(t *testing.T) {
	for _, limit := range []int{2, 1000000} {
		t.Run(fmt.Sprintf("server_failure_limit %d", limit), func(t *testing.T) { testReplicaStopped(t, limit) })
	}
}

func testReplicaStopped(t *testing.T, limit int) {
	rs := startReplicaShards(t)
	const interval = 500 * time.Millisecond
	srv, addr := startProxy(t, rs.yaml(fmt.Sprintf("  read_from: prefer_replica\n  health_check_interval: 500\n  server_failure_limit: %d\n", limit)), "rp")
	c := mustDial(t, addr)
	shardOf := shardRing(t, "s0", "s1")
	masters := []string{rs.masters[0].Addr, rs.masters[1].Addr}
	replicas := []string{rs.replicas[0].Addr, rs.replicas[1].Addr}
	keys := writeKeys(t, c, masters, replicas, shardOf, 20)
	key := ""
	for _, k := range keys {
		if shardOf(k) == 0 {
			key = k
			break
		}
	}
	waitFor(t, 5*time.Second, "2 replicas usable", func() bool { return routerStat(t, srv, "rp", "replicas_usable") == 2 })
	if r := mustDo(t, c, "GET", key); r != bulk("v-"+key) {
		t.Fatalf("GET: %q", r)
	}

	// Stop the replica and read the key every 5ms: the first good reply
	// comes from the master.
	rs.replicas[0].Stop()
	stopped := time.Now()
	errs := 0
	var firstErr string
	for {
		r, err := c.do("GET", key)
		if err != nil {
			t.Fatal(err)
		}
		if r == bulk("v-"+key) {
			break
		}
		if errs++; firstErr == "" {
			firstErr = r
		}
		if time.Since(stopped) > 10*time.Second {
			t.Fatalf("reads not back within 10s: %q", r)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(stopped)
	if limit == 2 && errs > limit {
		t.Errorf("%d error replies before the replica was marked bad, want at most %d", errs, limit)
	}
	t.Logf("replica stopped: reads on the master after %v, %d error replies before (first %q); interval %v",
		took.Round(time.Millisecond), errs, firstErr, interval)
	if took > interval+time.Second {
		t.Errorf("reads moved after %v, want within the interval %v and a probe's time", took, interval)
	}
	mGet := cmdCalls(t, masters[0], "get")
	for range 10 {
		if r := mustDo(t, c, "GET", key); r != bulk("v-"+key) {
			t.Fatalf("GET after the stop: %q", r)
		}
	}
	if got := cmdCalls(t, masters[0], "get") - mGet; got != 10 {
		t.Errorf("master served %d of 10 GETs", got)
	}
	if n := routerStat(t, srv, "rp", "replica_fallbacks"); n < 10 {
		t.Errorf("replica_fallbacks = %d", n)
	}

	// Back: once it has synced again and a check passed, it serves.
	rs.replicas[0].Restart()
	waitLinkUp(t, replicas[0])
	waitFor(t, 5*time.Second, "the replica used again", func() bool {
		before := cmdCalls(t, replicas[0], "get")
		mustDo(t, c, "GET", key)
		return cmdCalls(t, replicas[0], "get") > before
	})
}

// A replica whose link to its master is down is skipped: under
// prefer_replica its shard reads from the master, under replica the read
// is refused; the other shard's replica still serves.
func TestReplicaLinkDown(t *testing.T) {
	rs := startReplicaShards(t)
	dead := testserver.FreePort(t)
	if r, err := testserver.RedisDo(rs.replicas[0].Addr, "REPLICAOF", "127.0.0.1", strconv.Itoa(dead)); err != nil || r != "OK" {
		t.Fatalf("REPLICAOF: %q %v", r, err)
	}
	masters := []string{rs.masters[0].Addr, rs.masters[1].Addr}
	shardOf := shardRing(t, "s0", "s1")
	var k0, k1 string
	for i := 0; k0 == "" || k1 == ""; i++ {
		k := fmt.Sprintf("x%d", i)
		if shardOf(k) == 0 {
			k0 = k
		} else {
			k1 = k
		}
	}
	for _, k := range []string{k0, k1} {
		if _, err := testserver.RedisDo(masters[shardOf(k)], "SET", k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, k1+" replicated", func() bool {
		got, _ := testserver.RedisDo(rs.replicas[1].Addr, "GET", k1)
		return got == "v"
	})
	for _, tt := range []struct{ from, want0 string }{
		{"prefer_replica", bulk("v")},
		{"replica", "-ERR no healthy replica serves shard s0 (read_from: replica)\r\n"},
	} {
		t.Run(tt.from, func(t *testing.T) {
			srv, addr := startProxy(t, rs.yaml("  read_from: "+tt.from+"\n"), "rp")
			if n := routerStat(t, srv, "rp", "replicas_usable"); n != 1 {
				t.Errorf("replicas_usable = %d, want 1", n)
			}
			c := mustDial(t, addr)
			r0 := cmdCalls(t, rs.replicas[0].Addr, "get")
			r1 := cmdCalls(t, rs.replicas[1].Addr, "get")
			for range 5 {
				if r := mustDo(t, c, "GET", k0); r != tt.want0 {
					t.Fatalf("GET %s: %q, want %q", k0, r, tt.want0)
				}
				if r := mustDo(t, c, "GET", k1); r != bulk("v") {
					t.Fatalf("GET %s: %q", k1, r)
				}
			}
			if got := cmdCalls(t, rs.replicas[0].Addr, "get") - r0; got != 0 {
				t.Errorf("the unlinked replica served %d GETs", got)
			}
			if got := cmdCalls(t, rs.replicas[1].Addr, "get") - r1; got != 5 {
				t.Errorf("the other replica served %d of 5 GETs", got)
			}
			// A multi-key read with a shard refused is refused whole.
			if tt.from == "replica" {
				if r := mustDo(t, c, "MGET", k0, k1); !strings.HasPrefix(r, "-ERR no healthy replica serves shard s0") {
					t.Errorf("MGET: %q", r)
				}
				if n := routerStat(t, srv, "rp", "replica_refused"); n != 6 {
					t.Errorf("replica_refused = %d, want 6", n)
				}
			}
		})
	}
}

// A pool with sentinels learns each shard's replicas from the Sentinels
// and reads from them; writes go to the masters, and keys stay on their
// shards.
func TestReplicaSentinel(t *testing.T) {
	f := testserver.StartSentinelFleet(t, testserver.FleetConfig{Shards: 2, Replicas: 1, Sentinels: 3, SentinelPassword: "spass"})
	srv, addr := startProxy(t, sentinelYAML(f.Names, f.SentinelAddrs(), "  read_from: replica\n  health_check_interval: 200\n"), "rs")
	masters := []string{f.Servers[0][0].Addr, f.Servers[1][0].Addr}
	replicas := []string{f.Servers[0][1].Addr, f.Servers[1][1].Addr}
	waitFor(t, 20*time.Second, "2 replicas learnt and usable", func() bool { return routerStat(t, srv, "rs", "replicas_usable") == 2 })
	for i, a := range replicas {
		if _, ok := serverRequests(srv, "rs", a); !ok {
			t.Errorf("replica %d (%s) is not among the pool's servers", i, a)
		}
	}
	c := mustDial(t, addr)
	shardOf := shardRing(t, f.Names...)
	keys := writeKeys(t, c, masters, replicas, shardOf, 20)
	mGet := []int{cmdCalls(t, masters[0], "get"), cmdCalls(t, masters[1], "get")}
	rGet := []int{cmdCalls(t, replicas[0], "get"), cmdCalls(t, replicas[1], "get")}
	perShard := []int{0, 0}
	for _, k := range keys {
		perShard[shardOf(k)]++
		if r := mustDo(t, c, "GET", k); r != bulk("v-"+k) {
			t.Fatalf("GET %s: %q", k, r)
		}
	}
	for i := range 2 {
		if got := cmdCalls(t, masters[i], "get") - mGet[i]; got != 0 {
			t.Errorf("master %d served %d GETs", i, got)
		}
		if got := cmdCalls(t, replicas[i], "get") - rGet[i]; got != perShard[i] {
			t.Errorf("replica %d served %d GETs, want %d", i, got, perShard[i])
		}
	}
}
