package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/cluster"
	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// The Redis Cluster integration tests run a real cluster of three masters
// with a replica each (testserver.StartRedisCluster, cluster-node-timeout
// 2000ms) behind a redis_cluster pool and talk to it as cluster-unaware
// clients: raw RESP and go-redis's plain client.

// clusterYAML is a redis_cluster pool called name over seeds, with extra
// pool keys (the first of which may be listen; else it listens on port 0).
func clusterYAML(name string, seeds []string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", name)
	if !strings.HasPrefix(extra, "  listen:") {
		b.WriteString("  listen: 127.0.0.1:0\n")
	}
	b.WriteString("  redis: true\n  redis_cluster: true\n")
	b.WriteString(extra)
	b.WriteString("  servers:\n")
	for _, s := range seeds {
		fmt.Fprintf(&b, "    - %s:1\n", s)
	}
	return b.String()
}

// clConn is a raw RESP connection that reports errors instead of failing
// the test, so load goroutines can use it.
type clConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func clDial(addr string) (*clConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &clConn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}, nil
}

func (c *clConn) close() { c.nc.Close() }

// send writes commands without reading.
func (c *clConn) send(cmds ...[]string) error {
	var b strings.Builder
	for _, args := range cmds {
		b.WriteString(multibulk(args...))
	}
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := io.WriteString(c.nc, b.String())
	return err
}

// read reads one reply; a reply that takes over 5s is an error (a hang).
func (c *clConn) read() (string, error) {
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	return readRESP(c.r)
}

func (c *clConn) do(args ...string) (string, error) {
	if err := c.send(args); err != nil {
		return "", err
	}
	return c.read()
}

// mustDo runs one command on a fresh or given connection and fails the test
// on a transport error.
func mustDo(t testing.TB, c *clConn, args ...string) string {
	t.Helper()
	r, err := c.do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return r
}

func mustDial(t testing.TB, addr string) *clConn {
	t.Helper()
	c, err := clDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

// clusterShards reads the cluster's slot map from node addr, directly.
func clusterShards(t testing.TB, addr string) *cluster.SlotMap {
	t.Helper()
	c := mustDial(t, addr)
	defer c.close()
	m, err := cluster.ParseShards([]byte(mustDo(t, c, "CLUSTER", "SHARDS")), addr)
	if err != nil {
		t.Fatalf("CLUSTER SHARDS from %s: %v", addr, err)
	}
	return m
}

// slotTags returns, for each slot below n, a hash tag whose keys hash to it.
func slotTags(n int) []string {
	tags := make([]string, n)
	left := n
	for i := 0; left > 0; i++ {
		tag := "t" + strconv.Itoa(i)
		if s := cluster.Slot([]byte(tag)); s < n && tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return tags
}

// keysAcrossSlots returns n keys spread evenly over the slot space: key i
// hashes into the i-th of n equal slot ranges.
func keysAcrossSlots(n int, prefix string) []string {
	keys := make([]string, n)
	left := n
	for i := 0; left > 0; i++ {
		k := prefix + strconv.Itoa(i)
		r := cluster.Slot([]byte(k)) * n / cluster.Slots
		if keys[r] == "" {
			keys[r] = k
			left--
		}
	}
	return keys
}

// waitRole waits until the server at addr reports role (ROLE).
func waitRole(t testing.TB, addr, role string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if c, err := clDial(addr); err == nil {
			r, err := c.do("ROLE")
			c.close()
			if err == nil && strings.Contains(r, "\r\n"+role+"\r\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not %s after %v", addr, role, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli not found: install it (apt-get install redis-tools): %v", err)
	}
	start := time.Now()
	rc := testserver.StartRedisCluster(t, 3, 1)
	t.Logf("cluster of %d nodes up in %v", len(rc.Addrs()), time.Since(start))
	yaml := clusterYAML("rc", rc.Addrs()[:1], fmt.Sprintf("  listen: 127.0.0.1:%d\n  timeout: 1000\n  server_connections: 2\n", testserver.FreePort(t))) +
		clusterYAML("rr", rc.Addrs()[:1], fmt.Sprintf("  listen: 127.0.0.1:%d\n  timeout: 1000\n  read_from: prefer_replica\n  cluster_refresh: 300\n", testserver.FreePort(t)))
	cfg, err := config.Parse([]byte(yaml), "cluster.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	addr := srv.Addr("rc").String()

	t.Run("10000 keys", func(t *testing.T) { testClusterKeys(t, rc, addr) })
	t.Run("fan-out parity", func(t *testing.T) { testClusterFanout(t, addr) })
	t.Run("replica reads", func(t *testing.T) { testClusterReplicaReads(t, rc, srv.Addr("rr").String()) })
	t.Run("commands", func(t *testing.T) { testClusterCommands(t, addr) })
	t.Run("info", func(t *testing.T) { testClusterInfo(t, rc, addr) })
	t.Run("blocking and transactions", func(t *testing.T) { testClusterDedicated(t, rc, srv, addr) })
	t.Run("pub/sub", func(t *testing.T) { testClusterPubSub(t, rc, srv, addr) })
	t.Run("reload", func(t *testing.T) { testClusterReload(t, srv, yaml, addr) })
	if t.Failed() {
		return
	}
	t.Run("reshard under load", func(t *testing.T) { testClusterReshard(t, rc, srv, addr) })
	t.Run("failover under load", func(t *testing.T) { testClusterFailover(t, rc, srv, addr) })
	t.Logf("TestCluster took %v", time.Since(start))
}

// 10,000 keys written and read back through the proxy; each is on the
// master that owns its slot.
func testClusterKeys(t *testing.T, rc *testserver.Cluster, addr string) {
	const n = 10000
	c := mustDial(t, addr)
	key := func(i int) string { return "key:" + strconv.Itoa(i) }
	val := func(i int) string { return "value:" + strconv.Itoa(i) + strings.Repeat("x", i%50) }
	for lo := 0; lo < n; lo += 1000 {
		var cmds [][]string
		for i := lo; i < lo+1000; i++ {
			cmds = append(cmds, []string{"SET", key(i), val(i)})
		}
		if err := c.send(cmds...); err != nil {
			t.Fatal(err)
		}
		for i := lo; i < lo+1000; i++ {
			if r, err := c.read(); err != nil || r != "+OK\r\n" {
				t.Fatalf("SET %s: %q %v", key(i), r, err)
			}
		}
	}
	for lo := 0; lo < n; lo += 1000 {
		var cmds [][]string
		for i := lo; i < lo+1000; i++ {
			cmds = append(cmds, []string{"GET", key(i)})
		}
		if err := c.send(cmds...); err != nil {
			t.Fatal(err)
		}
		for i := lo; i < lo+1000; i++ {
			if r, err := c.read(); err != nil || r != bulk(val(i)) {
				t.Fatalf("GET %s: %q %v", key(i), r, err)
			}
		}
	}

	// Where the keys are: the slot's master, asked directly.
	m := clusterShards(t, rc.Masters[0].Addr)
	byMaster := map[string][]int{}
	for i := range n {
		s := cluster.Slot([]byte(key(i)))
		byMaster[m.Shards[m.Owner(s)].Master.Addr] = append(byMaster[m.Shards[m.Owner(s)].Master.Addr], i)
	}
	if len(byMaster) != 3 {
		t.Fatalf("keys on %d masters", len(byMaster))
	}
	for master, idx := range byMaster {
		d := mustDial(t, master)
		var cmds [][]string
		for _, i := range idx {
			cmds = append(cmds, []string{"GET", key(i)})
		}
		if err := d.send(cmds...); err != nil {
			t.Fatal(err)
		}
		for _, i := range idx {
			if r, err := d.read(); err != nil || r != bulk(val(i)) {
				t.Fatalf("GET %s on its master %s: %q %v", key(i), master, r, err)
			}
		}
		if r := mustDo(t, d, "DBSIZE"); r != ":"+strconv.Itoa(len(idx))+"\r\n" {
			t.Fatalf("DBSIZE on %s: %q, want %d", master, r, len(idx))
		}
		t.Logf("%d keys on master %s", len(idx), master)
	}
	// The proxy's slot function is the cluster's.
	d := mustDial(t, rc.Masters[0].Addr)
	for i := 0; i < n; i += 97 {
		want := ":" + strconv.Itoa(cluster.Slot([]byte(key(i)))) + "\r\n"
		if r := mustDo(t, d, "CLUSTER", "KEYSLOT", key(i)); r != want {
			t.Fatalf("CLUSTER KEYSLOT %s = %q, Slot says %q", key(i), r, want)
		}
	}

	// go-redis's plain client, one key per call.
	ctx := context.Background()
	rdb := newGoRedis(t, &redis.Options{Addr: addr})
	for i := range 100 {
		if v, err := rdb.Get(ctx, key(i)).Result(); err != nil || v != val(i) {
			t.Fatalf("go-redis GET %s: %q %v", key(i), v, err)
		}
	}
	if err := rdb.Set(ctx, "{user1000}.following", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.SInterStore(ctx, "{user1000}.x", "{user1000}.a", "{user1000}.b").Result(); err != nil || n != 0 {
		t.Fatalf("SINTERSTORE in one slot: %d %v", n, err)
	}
}

// MGET, MSET, DEL, UNLINK, EXISTS and TOUCH over keys in every part of the
// slot space answer byte for byte what one standalone server answers.
func testClusterFanout(t *testing.T, addr string) {
	single := testserver.StartRedis(t)
	p, d := mustDial(t, addr), mustDial(t, single.Addr)
	keys := keysAcrossSlots(256, "fan:")
	tags := slotTags(3)
	keys = append(keys, "{"+tags[0]+"}a", "{"+tags[0]+"}b", "{"+tags[2]+"}c")
	missing := keysAcrossSlots(8, "missing:")
	var mset []string
	for i, k := range keys {
		mset = append(mset, k, "v"+strconv.Itoa(i))
	}
	mset = append(mset, keys[3], "again") // a repeated key: the last value wins
	mix := func() []string {              // keys, misses and repeats, interleaved
		var out []string
		for i, k := range keys {
			out = append(out, k)
			if i%32 == 0 {
				out = append(out, missing[i/32%len(missing)], keys[i/2])
			}
		}
		return out
	}
	half := keys[:len(keys)/2]
	steps := [][]string{
		append([]string{"MSET"}, mset...),
		append([]string{"MGET"}, mix()...),
		append([]string{"EXISTS"}, mix()...),
		append([]string{"TOUCH"}, mix()...),
		append(append([]string{"DEL"}, half...), missing...),
		append([]string{"MGET"}, mix()...),
		append([]string{"EXISTS"}, mix()...),
		append([]string{"UNLINK"}, mix()...),
		append([]string{"MGET"}, mix()...),
		append([]string{"MSET"}, mset[:20]...),
		append([]string{"MGET"}, keys[:12]...),
		append([]string{"DEL"}, keys...),
	}
	for _, cmd := range steps {
		got, want := mustDo(t, p, cmd...), mustDo(t, d, cmd...)
		if got != want {
			t.Fatalf("%s over %d keys:\nproxy  %q\nsingle %q", cmd[0], len(cmd)-1, got, want)
		}
	}
}

// A prefer_replica pool reads from the replicas (READONLY) and writes to
// the masters.
func testClusterReplicaReads(t *testing.T, rc *testserver.Cluster, addr string) {
	calls := func() int {
		total := 0
		for _, r := range rc.Replicas {
			c := mustDial(t, r.Addr)
			info := mustDo(t, c, "INFO", "commandstats")
			if m := regexp.MustCompile(`cmdstat_get:calls=(\d+)`).FindStringSubmatch(info); m != nil {
				n, _ := strconv.Atoi(m[1])
				total += n
			}
			c.close()
		}
		return total
	}
	// CLUSTER SHARDS reports a replica that has replicated nothing yet
	// as "loading", and the pool reads from online replicas only: the
	// pool's map (refreshed every 300ms) has them once the writes above
	// reached them.
	before := calls()
	c := mustDial(t, addr)
	deadline := time.Now().Add(5 * time.Second)
	for calls()-before < 300 {
		for i := range 100 {
			k := "key:" + strconv.Itoa(i)
			want := bulk("value:" + strconv.Itoa(i) + strings.Repeat("x", i%50))
			if r := mustDo(t, c, "GET", k); r != want {
				t.Fatalf("GET %s: %q", k, r)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas served %d GETs, want at least 300", calls()-before)
		}
	}
	if r := mustDo(t, c, "SET", "rr:k", "v"); r != "+OK\r\n" {
		t.Fatalf("SET through the replica pool: %q", r)
	}
}

// CLUSTER commands get a clear error; cross-slot commands -CROSSSLOT.
func testClusterCommands(t *testing.T, addr string) {
	c := mustDial(t, addr)
	for cmd, want := range map[string]string{
		"CLUSTER INFO":  "-ERR CLUSTER INFO is not supported by shardproxy: shardproxy is not a Redis Cluster node\r\n",
		"CLUSTER SLOTS": "-ERR CLUSTER SLOTS is not supported by shardproxy: shardproxy is not a Redis Cluster node\r\n",
		"CLUSTER NODES": "-ERR CLUSTER NODES is not supported by shardproxy: shardproxy is not a Redis Cluster node\r\n",
		"READONLY":      "-ERR READONLY is not supported by shardproxy: shardproxy is not a Redis Cluster node\r\n",
		"SINTER a b":    "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
		"PING":          "+PONG\r\n",
	} {
		if got := mustDo(t, c, strings.Fields(cmd)...); got != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
	if got := mustDo(t, c, "EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "{e}k", "v"); got != "+OK\r\n" {
		t.Errorf("EVAL: %q", got)
	}
	if got := mustDo(t, c, "SCRIPT", "LOAD", "return 1"); !strings.HasPrefix(got, "$40\r\n") {
		t.Errorf("SCRIPT LOAD on every master: %q", got)
	}
}

// A reload (here of the timeout) keeps serving at once: the new pool starts
// from the running pool's slot map.
func testClusterReload(t *testing.T, srv *proxy.Server, yaml, addr string) {
	cfg, err := config.Parse([]byte(strings.Replace(yaml, "timeout: 1000", "timeout: 1500", 1)), "cluster2.yml")
	if err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, addr)
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	before, _ := srv.ClusterStats("rc")
	for i := range 100 {
		want := bulk("value:" + strconv.Itoa(i) + strings.Repeat("x", i%50))
		if r := mustDo(t, c, "GET", "key:"+strconv.Itoa(i)); r != want {
			t.Fatalf("GET after reload: %q", r)
		}
	}
	if !before.Ready {
		t.Fatalf("the reloaded pool had no map at once: %+v", before)
	}
}

// loadKey is one key of a load worker: its last acknowledged value and the
// values of writes whose outcome is unknown (they failed).
type loadKey struct {
	name     string
	acked    string
	unknown  []string
	old      []string // earlier acknowledged values
	deadSlot bool
}

// loadStats are what the load workers saw.
type loadStats struct {
	ops, errs, wrong, lost atomic.Int64
	mu                     sync.Mutex
	errSamples             []string
	firstErr, lastErr      time.Time
	badErr                 []string // errors of a kind that is not allowed
}

func (ls *loadStats) errorReply(r string, allowed func(string) bool) {
	ls.errs.Add(1)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	if ls.firstErr.IsZero() {
		ls.firstErr = now
	}
	ls.lastErr = now
	if len(ls.errSamples) < 5 {
		ls.errSamples = append(ls.errSamples, strings.TrimSpace(r))
	}
	if !allowed(r) && len(ls.badErr) < 10 {
		ls.badErr = append(ls.badErr, strings.TrimSpace(r))
	}
}

// failoverProbe watches a failover from one client: after killed, it GETs
// key (set to "before" beforehand) every 5ms until the value is served again.
type failoverProbe struct {
	c       *clConn
	key     string
	killed  time.Time
	allowed func(string) bool // the error replies expected meanwhile
	stop    func()            // ends the load before the test fails
	what    string            // what key stands for, in the 30s failure
	// servedEarly, if set, takes the value as served again although the
	// probe saw no error yet (the switch fell between two probes).
	servedEarly func(since time.Duration) bool
	each        func(since time.Duration) // if set, one more check every round
}

// run returns when the probe saw its first error and when the value was
// served again, both since killed, and the error replies it saw by their
// first 72 bytes.
func (fp failoverProbe) run(t *testing.T) (firstFail, back time.Duration, errs map[string]int) {
	t.Helper()
	errs = map[string]int{}
	for back == 0 {
		r, err := fp.c.do("GET", fp.key)
		since := time.Since(fp.killed)
		switch {
		case err != nil:
			fp.stop()
			t.Fatalf("GET %s %v after the kill: %v (a hang?)", fp.key, since, err)
		case r == bulk("before"):
			if firstFail != 0 || fp.servedEarly != nil && fp.servedEarly(since) {
				back = since
			}
		case fp.allowed(r):
			if firstFail == 0 {
				firstFail = since
			}
			errs[strings.TrimSpace(r[:min(len(r), 72)])]++
		default:
			fp.stop()
			t.Fatalf("GET %s %v after the kill: %q", fp.key, since, r)
		}
		if since > 30*time.Second {
			fp.stop()
			t.Fatalf("%s not served 30s after the kill (errors %v)", fp.what, errs)
		}
		if fp.each != nil {
			fp.each(since)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return firstFail, back, errs
}

// runClusterLoad starts workers that each SET then GET their own keys
// (and, every fifth round, MSET then MGET a group of keys sharing a slot),
// checking every value they read against what they wrote. allowed says
// which error replies are expected; lossOK, which keys may read an older
// acknowledged value (a write lost in a failover). stop ends the load and
// waits for the workers.
func runClusterLoad(t *testing.T, addr string, workers int, keysOf func(w int) [][]string,
	allowed, lossOK func(string) bool) (ls *loadStats, stop func()) {
	ls = &loadStats{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		groups := keysOf(w) // each group's keys share a slot
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := clDial(addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.close()
			state := map[string]*loadKey{}
			for _, g := range groups {
				for _, k := range g {
					state[k] = &loadKey{name: k, deadSlot: lossOK != nil && lossOK(k)}
				}
			}
			for round := 0; ; round++ {
				select {
				case <-done:
					return
				default:
				}
				g := groups[round%len(groups)]
				ok := true
				if round%5 == 4 && len(g) > 1 {
					ok = ls.multi(c, w, round, g, state, allowed)
				} else {
					ok = ls.single(c, w, round, state[g[0]], allowed)
				}
				if !ok {
					return
				}
			}
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return ls, stop
}

// single does SET k v then GET k; false on a transport error.
func (ls *loadStats) single(c *clConn, w, round int, k *loadKey, allowed func(string) bool) bool {
	v := fmt.Sprintf("w%d-r%d", w, round)
	r, err := c.do("SET", k.name, v)
	if err != nil {
		ls.transport(err)
		return false
	}
	ls.ops.Add(1)
	if r == "+OK\r\n" {
		k.old, k.acked, k.unknown = append(k.old, k.acked), v, nil
	} else {
		ls.errorReply(r, allowed)
		k.unknown = append(k.unknown, v)
	}
	r, err = c.do("GET", k.name)
	if err != nil {
		ls.transport(err)
		return false
	}
	ls.ops.Add(1)
	if strings.HasPrefix(r, "-") {
		ls.errorReply(r, allowed)
		return true
	}
	ls.check(k, r)
	return true
}

// multi does MSET of a slot's keys then MGET of them.
func (ls *loadStats) multi(c *clConn, w, round int, g []string, state map[string]*loadKey, allowed func(string) bool) bool {
	args := []string{"MSET"}
	for i, k := range g {
		args = append(args, k, fmt.Sprintf("w%d-r%d-%d", w, round, i))
	}
	r, err := c.do(args...)
	if err != nil {
		ls.transport(err)
		return false
	}
	ls.ops.Add(1)
	for i, k := range g {
		v := args[2+2*i]
		if r == "+OK\r\n" {
			s := state[k]
			s.old, s.acked, s.unknown = append(s.old, s.acked), v, nil
		} else {
			state[k].unknown = append(state[k].unknown, v)
		}
	}
	if r != "+OK\r\n" {
		ls.errorReply(r, allowed)
	}
	r, err = c.do(append([]string{"MGET"}, g...)...)
	if err != nil {
		ls.transport(err)
		return false
	}
	ls.ops.Add(1)
	if strings.HasPrefix(r, "-") {
		ls.errorReply(r, allowed)
		return true
	}
	lines := strings.Split(r, "\r\n")
	if lines[0] != "*"+strconv.Itoa(len(g)) {
		ls.wrongValue(fmt.Sprintf("MGET %v: %q", g, r))
		return true
	}
	j := 1
	for _, k := range g {
		if lines[j] == "$-1" {
			ls.check(state[k], "$-1\r\n")
			j++
			continue
		}
		ls.check(state[k], bulk(lines[j+1]))
		j += 2
	}
	return true
}

// check compares a GET reply with what was written: the last acknowledged
// value or one whose write failed. An older acknowledged value is a write
// lost in a failover (Redis replicates asynchronously), counted apart.
func (ls *loadStats) check(k *loadKey, r string) {
	ok := func(v string) bool {
		if v == "" {
			return r == "$-1\r\n"
		}
		return r == bulk(v)
	}
	if ok(k.acked) {
		return
	}
	for _, v := range k.unknown {
		if ok(v) {
			k.old, k.acked, k.unknown = append(k.old, k.acked), v, nil
			return
		}
	}
	for _, v := range k.old {
		if ok(v) && k.deadSlot {
			ls.lost.Add(1)
			return
		}
	}
	ls.wrongValue(fmt.Sprintf("GET %s: %q, last written %q", k.name, r, k.acked))
}

func (ls *loadStats) wrongValue(msg string) {
	ls.wrong.Add(1)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.badErr) < 10 {
		ls.badErr = append(ls.badErr, "wrong value: "+msg)
	}
}

func (ls *loadStats) transport(err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.badErr = append(ls.badErr, "transport error (a hang or a broken connection): "+err.Error())
}

// Resharding under load: redis-cli moves 1000 slots from one master to
// another while clients write and read; they see no error and every value
// read is the last one written, while the proxy follows ASK and MOVED.
func testClusterReshard(t *testing.T, rc *testserver.Cluster, srv *proxy.Server, addr string) {
	from, to := rc.Masters[0], rc.Masters[1]
	idOf := func(s *testserver.Server) string {
		c := mustDial(t, s.Addr)
		return strings.TrimSpace(strings.SplitN(mustDo(t, c, "CLUSTER", "MYID"), "\r\n", 3)[1])
	}
	fromID, toID := idOf(from), idOf(to)
	// redis-cli takes the source's first slots: 0-999. Every worker owns
	// keys in 1500 slots from 0 (groups of four keys sharing a slot) and
	// elsewhere, and visits a group in one of three heavy slots every third
	// round. The heavy slots hold 2000 more keys each, so their migration
	// takes long enough for requests to meet keys already moved (ASK) and
	// groups half moved (TRYAGAIN).
	const workers = 8
	tags := slotTags(1500)
	heavy := []int{100, 500, 900}
	fill := mustDial(t, addr)
	for _, slot := range heavy {
		for lo := 0; lo < 2000; lo += 200 {
			args := []string{"MSET"}
			for i := lo; i < lo+200; i++ {
				args = append(args, fmt.Sprintf("{%s}fill:%d", tags[slot], i), strings.Repeat("f", 100))
			}
			if r := mustDo(t, fill, args...); r != "+OK\r\n" {
				t.Fatalf("MSET: %q", r)
			}
		}
	}
	keysOf := func(w int) [][]string {
		group := func(slot int) []string {
			g := make([]string, 4)
			for i := range g {
				g[i] = fmt.Sprintf("{%s}w%d:%d", tags[slot], w, i)
			}
			return g
		}
		var groups [][]string
		n := 0
		add := func(g []string) {
			groups = append(groups, g)
			if n++; n%2 == 0 {
				groups = append(groups, group(heavy[n/2%len(heavy)]))
			}
		}
		for s := w; s < len(tags); s += workers {
			add(group(s))
		}
		for _, k := range keysAcrossSlots(64, fmt.Sprintf("rs%d:", w)) {
			add([]string{k})
		}
		return groups
	}
	noErrors := func(string) bool { return false }
	before, _ := srv.ClusterStats("rc")
	ls, stop := runClusterLoad(t, addr, workers, keysOf, noErrors, nil)
	time.Sleep(300 * time.Millisecond) // every key written once or more

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "reshard", from.Addr,
		"--cluster-from", fromID, "--cluster-to", toID, "--cluster-slots", "1000",
		"--cluster-yes").CombinedOutput()
	took := time.Since(start)
	if err != nil {
		stop()
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, lastLines(out, 20))
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	after, _ := srv.ClusterStats("rc")
	moved, ask, tryAgain := after.Moved-before.Moved, after.Ask-before.Ask, after.TryAgain-before.TryAgain
	t.Logf("reshard of 1000 slots took %v under load: %d requests, %d errors; proxy followed %d MOVED, %d ASK, retried %d TRYAGAIN; %d refreshes",
		took, ls.ops.Load(), ls.errs.Load(), moved, ask, tryAgain, after.Refreshes-before.Refreshes)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.errs.Load() != 0 || ls.wrong.Load() != 0 || len(ls.badErr) != 0 {
		t.Fatalf("clients saw %d errors and %d wrong values: %q %q", ls.errs.Load(), ls.wrong.Load(), ls.errSamples, ls.badErr)
	}
	if moved == 0 || ask == 0 {
		t.Fatalf("MOVED %d, ASK %d: both should have been exercised", moved, ask)
	}
	// The slots moved: the target serves slot 0 now, and its keys are there.
	m := clusterShards(t, to.Addr)
	if got := m.Shards[m.Owner(0)].Master.Addr; got != to.Addr {
		t.Fatalf("slot 0 is on %s, want %s", got, to.Addr)
	}
	d := mustDial(t, to.Addr)
	if r := mustDo(t, d, "EXISTS", fmt.Sprintf("{%s}w0:0", tags[0])); r != ":1\r\n" {
		t.Fatalf("a key of slot 0 is not on the new owner: %q", r)
	}
}

// Failover under load: a master is killed; once its replica is promoted,
// requests for its slots succeed again through the same proxy. Meanwhile
// clients get only -ERR or -CLUSTERDOWN replies, never a hang or a wrong
// value.
func testClusterFailover(t *testing.T, rc *testserver.Cluster, srv *proxy.Server, addr string) {
	victim := rc.Masters[2]
	m := clusterShards(t, rc.Masters[0].Addr)
	var heir string
	var deadRanges [][2]int
	for i, sh := range m.Shards {
		if sh.Master.Addr == victim.Addr {
			heir = sh.Replicas[0].Addr
			deadRanges = m.Ranges(i)
		}
	}
	if heir == "" {
		t.Fatalf("no replica of %s in %+v", victim.Addr, m.Shards)
	}
	inDead := func(k string) bool {
		s := cluster.Slot([]byte(k))
		for _, r := range deadRanges {
			if s >= r[0] && s <= r[1] {
				return true
			}
		}
		return false
	}
	const workers = 8
	keysOf := func(w int) [][]string {
		var groups [][]string
		for _, k := range keysAcrossSlots(96, fmt.Sprintf("fo%d:", w)) {
			groups = append(groups, []string{k})
		}
		return groups
	}
	allowed := func(r string) bool {
		return strings.HasPrefix(r, "-ERR ") || strings.HasPrefix(r, "-CLUSTERDOWN ")
	}
	ls, stop := runClusterLoad(t, addr, workers, keysOf, allowed, inDead)
	// Dedicated work beside it (fault_dedicated_test.go): transactions and
	// blocking pops on both sides, and clients blocked on and pinned to
	// the master about to die.
	var deadKeys, liveKeys []string
	for _, k := range keysAcrossSlots(64, "fd:") {
		if inDead(k) {
			deadKeys = append(deadKeys, k)
		} else {
			liveKeys = append(liveKeys, k)
		}
	}
	// The live masters answer -CLUSTERDOWN too from when the cluster
	// marks the master failed until its replica takes over
	// (cluster-require-full-coverage), not an error of the proxy's.
	clusterDown := func(r string) bool { return strings.HasPrefix(r, "-CLUSTERDOWN ") }
	ded, stopDed := runDedicatedLoad(t, addr, [][2]string{{liveKeys[0], liveKeys[1]}, {liveKeys[2], liveKeys[3]}}, clusterDown)
	dedDead, stopDedDead := runDedicatedLoad(t, addr, [][2]string{{deadKeys[0], deadKeys[1]}, {deadKeys[2], deadKeys[3]}}, allowed)
	stopAll := func() { stop(); stopDed(); stopDedDead() }
	ded.waitRounds(t, 10, 10*time.Second, "dedicated load on the live masters")
	dedDead.waitRounds(t, 10, 10*time.Second, "dedicated load on the master to be killed")
	held := holdDedicated(t, addr, deadKeys[4:8])
	waitFor(t, 5*time.Second, "clients blocked", func() bool { return infoInt(t, victim.Addr, "blocked_clients") >= 2 })
	time.Sleep(300 * time.Millisecond)

	// A prober measures when the dead master's slots are served again.
	probeKey := ""
	for _, k := range keysAcrossSlots(64, "probe:") {
		if inDead(k) {
			probeKey = k
			break
		}
	}
	p := mustDial(t, addr)
	if r := mustDo(t, p, "SET", probeKey, "before"); r != "+OK\r\n" {
		t.Fatalf("SET %s: %q", probeKey, r)
	}
	killed := time.Now()
	victim.Stop()
	slowest := checkHeld(t, held, killed)
	firstFail, back, probeErrs := failoverProbe{c: p, key: probeKey, killed: killed, allowed: allowed, stop: stopAll,
		what: "the dead master's slots"}.run(t)
	waitRole(t, heir, "master", 5*time.Second)
	dedDead.waitRounds(t, 10, 10*time.Second, "transactions and blocking pops on the promoted replica")
	checkHeldTail(t, held)
	time.Sleep(500 * time.Millisecond) // the workers run on the new map
	stopAll()
	waitFor(t, 2*time.Second, "dedicated gauges back to 0", func() bool { return dedicatedGauges(t, srv, "rc") == [3]int64{} })
	t.Logf("clients blocked on and pinned to the killed master: the slowest error came %v after the kill (or after its next command)",
		slowest.Round(time.Millisecond))
	ded.checkClean(t, "dedicated load on the live masters")
	dedDead.checkClean(t, "dedicated load on the killed master's slots")

	st, _ := srv.ClusterStats("rc")
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var window time.Duration
	if !ls.lastErr.IsZero() {
		window = ls.lastErr.Sub(killed)
	}
	t.Logf("failover window: master %s killed; the prober's first error after %v, its slots served again by %s after %v; "+
		"load: %d requests, %d error replies (the last %v after the kill), %d writes lost by asynchronous replication; samples %q; prober's errors %v; "+
		"proxy: %d refreshes, %d failed",
		victim.Addr, firstFail.Round(time.Millisecond), heir, back.Round(time.Millisecond),
		ls.ops.Load(), ls.errs.Load(), window.Round(time.Millisecond), ls.lost.Load(), ls.errSamples, probeErrs,
		st.Refreshes, st.RefreshFailures)
	if ls.wrong.Load() != 0 || len(ls.badErr) != 0 {
		t.Fatalf("clients saw %d wrong values and unexpected errors: %q", ls.wrong.Load(), ls.badErr)
	}
	// Every key answers again, without restarting the proxy.
	c := mustDial(t, addr)
	for w := range workers {
		for _, g := range keysOf(w) {
			if r := mustDo(t, c, "GET", g[0]); strings.HasPrefix(r, "-") {
				t.Fatalf("GET %s after the failover: %q", g[0], r)
			}
		}
	}
	if st.Masters != 3 {
		t.Fatalf("proxy's map has %d masters", st.Masters)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// A non-cluster server given as a seed: a clear error in the log and to
// clients, no crash, and the proxy keeps trying.
func TestClusterNotACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	plain := testserver.StartRedis(t)
	cfg, err := config.Parse([]byte(clusterYAML("rc", []string{plain.Addr}, "  timeout: 1000\n  cluster_refresh: 200\n")), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedBuffer{mu: &mu, b: &logs}, nil))
	srv := runProxy(t, cfg, proxy.Options{Logger: log})
	c := mustDial(t, srv.Addr("rc").String())
	want := "-CLUSTERDOWN shardproxy has no cluster slot map: " + plain.Addr +
		": cluster: node replied -ERR This instance has cluster support disabled\r\n"
	for _, cmd := range [][]string{{"GET", "k"}, {"SET", "k", "v"}, {"MGET", "a", "b"}} {
		if got := mustDo(t, c, cmd...); got != want {
			t.Fatalf("%s:\n got %q\nwant %q", cmd[0], got, want)
		}
	}
	if got := mustDo(t, c, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ok := srv.ClusterStats("rc")
		if !ok {
			t.Fatal("no cluster stats")
		}
		if st.RefreshFailures >= 3 && !st.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refresh failures: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !regexp.MustCompile(`level=ERROR msg="cluster has no slot map" pool=rc seeds=` + regexp.QuoteMeta(plain.Addr) +
		` err=".*cluster support disabled"`).MatchString(logs.String()) {
		t.Fatalf("log lacks the error:\n%s", logs.String())
	}
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestClusterBenchmark prints ops/s through the proxy next to
// redis-benchmark --cluster straight at the cluster. It runs only when
// -run names it: go test ./proxy -run TestClusterBenchmark -v
func TestClusterBenchmark(t *testing.T) {
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "ClusterBenchmark") {
		t.Skip("benchmark: run it with -run TestClusterBenchmark")
	}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Fatalf("redis-benchmark not found: install it (apt-get install redis-tools): %v", err)
	}
	rc := testserver.StartRedisCluster(t, 3, 1)
	_, addr := startProxy(t, clusterYAML("rc", rc.Addrs()[:1], "  timeout: 5000\n  server_connections: 2\n"), "rc")
	n := "200000"
	if raceEnabled() {
		n = "20000"
	}
	run := func(args ...string) map[string]float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append(args, "-t", "set,get,mset", "-n", n, "-c", "50",
			"-P", "16", "-r", "100000", "-q")...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark %v: %v\n%s", args, err, out)
		}
		res := map[string]float64{}
		re := regexp.MustCompile(`^ *([^:]+): ([0-9.]+) requests per second`)
		for _, line := range strings.FieldsFunc(string(out), func(r rune) bool { return r == '\r' || r == '\n' }) {
			if m := re.FindStringSubmatch(line); m != nil {
				res[m[1]], _ = strconv.ParseFloat(m[2], 64)
			}
			if strings.Contains(line, "ERR") || strings.Contains(line, "MOVED") {
				t.Errorf("redis-benchmark %v: %s", args, line)
			}
		}
		return res
	}
	host, port, _ := net.SplitHostPort(addr)
	proxied := run("-h", host, "-p", port)
	nh, np, _ := net.SplitHostPort(rc.Masters[0].Addr)
	direct := run("--cluster", "-h", nh, "-p", np)
	t.Logf("redis-benchmark -n %s -c 50 -P 16 (requests per second):", n)
	t.Logf("%-28s %14s %14s", "test", "via shardproxy", "--cluster")
	for _, name := range []string{"SET", "GET", "MSET (10 keys)"} {
		t.Logf("%-28s %14.0f %14.0f", name, proxied[name], direct[name])
	}
}
