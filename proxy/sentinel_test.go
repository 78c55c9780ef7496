package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
	"shardproxy/sharding"
)

// The Sentinel integration test runs a real fleet (testserver.StartSentinelFleet):
// two shards, each a master with one replica, three redis-sentinel
// processes with down-after-milliseconds 1000 and failover-timeout 3000,
// behind a sharded redis pool whose servers lines name the masters.

// sentinelYAML is a sharded redis pool "rs" over the fleet's masters,
// asking sentinels (with password spass).
func sentinelYAML(names, sentinels []string, extra string) string {
	var b strings.Builder
	b.WriteString("rs:\n  listen: 127.0.0.1:0\n  redis: true\n  sentinel_auth: spass\n")
	b.WriteString(extra)
	b.WriteString("  sentinels:\n")
	for _, s := range sentinels {
		fmt.Fprintf(&b, "    - %s\n", s)
	}
	b.WriteString("  servers:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    - %s:1\n", n)
	}
	return b.String()
}

// serverAddr returns the address the pool's server (shard) name uses now.
func serverAddr(srv *proxy.Server, pool, name string) string {
	for _, p := range srv.Stats().Pools {
		for _, s := range p.Servers {
			if p.Name == pool && s.Name == name {
				return s.Addr
			}
		}
	}
	return ""
}

// lyingSentinel is a fake Sentinel that names addr for every master, and
// sends one +switch-master to addr on every subscription.
func lyingSentinel(t *testing.T, addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return testserver.Fake(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			args, err := readCommand(r)
			if err != nil {
				return
			}
			var out string
			switch strings.ToUpper(args[0]) {
			case "AUTH":
				out = "+OK\r\n"
			case "PING":
				out = "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
			case "SENTINEL":
				out = fmt.Sprintf("*2\r\n%s%s", bulk(host), bulk(port))
			case "SUBSCRIBE":
				msg := fmt.Sprintf("shard0 127.0.0.1 1 %s %s", host, port)
				out = "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n" +
					"*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n" + bulk(msg)
			default:
				out = "-ERR unknown command\r\n"
			}
			if _, err := nc.Write([]byte(out)); err != nil {
				return
			}
		}
	})
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	var n int
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Sscanf(line, "*%d\r\n", &n); err != nil || n < 1 || n > 16 {
		return nil, fmt.Errorf("bad command %q", line)
	}
	args := make([]string, n)
	for i := range args {
		var size int
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		if _, err := fmt.Sscanf(line, "$%d\r\n", &size); err != nil || size < 0 || size > 1024 {
			return nil, fmt.Errorf("bad bulk %q", line)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// Failover under load: clients write and read through a pool whose
// servers are Sentinel master names while a master is killed (SIGKILL),
// after one of the three Sentinels was killed too. The proxy follows the
// promotion without a reload: clients see only -ERR replies, and only
// between the kill and the switch, and only for the dead master's shard
// (a prober checks the other); no reply is wrong; every key is on the
// shard its name's place in the ketama ring says, before and after. A
// fourth, fake Sentinel names each shard's replica (and announces it as
// promoted): the proxy checks ROLE and never sends there.
func TestSentinelFailover(t *testing.T) {
	f := testserver.StartSentinelFleet(t, testserver.FleetConfig{Shards: 2, Replicas: 1, Sentinels: 3,
		SentinelPassword: "spass"})
	liar := lyingSentinel(t, f.Servers[0][1].Addr)
	sentinels := append([]string{liar}, f.SentinelAddrs()...)
	srv, addr := startProxy(t, sentinelYAML(f.Names, sentinels, "  timeout: 2000\n"), "rs")
	for i, name := range f.Names {
		if got, want := serverAddr(srv, "rs", name), f.Servers[i][0].Addr; got != want {
			t.Fatalf("%s is at %s, want the master %s", name, got, want)
		}
	}
	waitFor(t, 5*time.Second, "4 subscriptions", func() bool { return routerStat(t, srv, "rs", "sentinel_subscribed") == 4 })
	waitFor(t, 5*time.Second, "the liar's event refused", func() bool { return routerStat(t, srv, "rs", "sentinel_rejected") >= 1 })

	// Where each key belongs: ketama over the shard names.
	ring, err := sharding.New(sharding.Config{Servers: []sharding.Server{{Name: "shard0", Weight: 1}, {Name: "shard1", Weight: 1}},
		Hash: "fnv1a_64", Distribution: "ketama"})
	if err != nil {
		t.Fatal(err)
	}
	shardOf := func(k string) int {
		i, err := ring.Pick([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	const victim = 1
	const workers = 8
	keysOf := func(w int) [][]string {
		var groups [][]string
		for i := range 48 {
			groups = append(groups, []string{fmt.Sprintf("s%d:%d", w, i)})
		}
		// Multi-key groups span both shards: MSET and MGET are split.
		for i := 0; i < 48; i += 4 {
			groups = append(groups, []string{fmt.Sprintf("s%d:%d", w, i), fmt.Sprintf("s%d:%d", w, i+1),
				fmt.Sprintf("s%d:%d", w, i+2), fmt.Sprintf("s%d:%d", w, i+3)})
		}
		return groups
	}
	allowed := func(r string) bool { return strings.HasPrefix(r, "-ERR ") }
	onVictim := func(k string) bool { return shardOf(k) == victim }
	ls, stop := runClusterLoad(t, addr, workers, keysOf, allowed, onVictim)
	time.Sleep(300 * time.Millisecond)

	// Two probers: one on a key of the victim's shard measures the
	// window, one on the other shard checks that it never fails.
	probeKey, otherKey := "", ""
	for i := 0; probeKey == "" || otherKey == ""; i++ {
		if k := fmt.Sprintf("probe:%d", i); onVictim(k) {
			probeKey = k
		} else {
			otherKey = k
		}
	}
	p := mustDial(t, addr)
	for _, k := range []string{probeKey, otherKey} {
		if r := mustDo(t, p, "SET", k, "before"); r != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, r)
		}
	}
	waitFor(t, 5*time.Second, "the probe key replicated", func() bool {
		c := mustDial(t, f.Servers[victim][1].Addr)
		defer c.close()
		return mustDo(t, c, "GET", probeKey) == bulk("before")
	})

	f.Sentinels[2].Stop() // a Sentinel dies: the others are enough
	time.Sleep(200 * time.Millisecond)
	old, heir := f.Servers[victim][0], f.Servers[victim][1]
	killed := time.Now()
	old.Stop()
	firstFail, back, probeErrs := failoverProbe{c: p, key: probeKey, killed: killed, allowed: allowed, stop: stop, what: "shard1",
		servedEarly: func(since time.Duration) bool {
			return since > time.Second && serverAddr(srv, "rs", "shard1") == heir.Addr
		},
		each: func(since time.Duration) {
			if r, err := p.do("GET", otherKey); err != nil || r != bulk("before") {
				stop()
				t.Fatalf("GET %s (shard0) %v after the kill: %q %v", otherKey, since, r, err)
			}
		}}.run(t)
	waitFor(t, 5*time.Second, "shard1 on the promoted replica", func() bool { return serverAddr(srv, "rs", "shard1") == heir.Addr })
	time.Sleep(500 * time.Millisecond) // the workers run on the new master
	stop()

	ls.mu.Lock()
	var window time.Duration
	if !ls.lastErr.IsZero() {
		window = ls.lastErr.Sub(killed)
	}
	firstLoadErr := time.Duration(0)
	if !ls.firstErr.IsZero() {
		firstLoadErr = ls.firstErr.Sub(killed)
	}
	t.Logf("failover window: master %s killed; the prober's first error after %v, shard1 served again by %s after %v; "+
		"load: %d requests, %d error replies (from %v to %v after the kill), %d writes lost by asynchronous replication; "+
		"samples %q; prober's errors %v; sentinel: %d switches, %d events, %d refused, %d queries (%d failed)",
		old.Addr, firstFail.Round(time.Millisecond), heir.Addr, back.Round(time.Millisecond),
		ls.ops.Load(), ls.errs.Load(), firstLoadErr.Round(time.Millisecond), window.Round(time.Millisecond), ls.lost.Load(),
		ls.errSamples, probeErrs, routerStat(t, srv, "rs", "sentinel_switches"), routerStat(t, srv, "rs", "sentinel_events"),
		routerStat(t, srv, "rs", "sentinel_rejected"), routerStat(t, srv, "rs", "sentinel_queries"), routerStat(t, srv, "rs", "sentinel_query_failures"))
	if ls.wrong.Load() != 0 || len(ls.badErr) != 0 {
		ls.mu.Unlock()
		t.Fatalf("clients saw %d wrong values and unexpected errors: %q", ls.wrong.Load(), ls.badErr)
	}
	if !ls.firstErr.IsZero() && (ls.firstErr.Before(killed) || window > back+time.Second) {
		ls.mu.Unlock()
		t.Fatalf("errors outside the failover window: from %v to %v after the kill, shard1 back after %v", firstLoadErr, window, back)
	}
	ls.mu.Unlock()
	if got := routerStat(t, srv, "rs", "sentinel_switches"); got != 1 {
		t.Errorf("sentinel_switches = %d, want 1", got)
	}
	if got := serverAddr(srv, "rs", "shard0"); got != f.Servers[0][0].Addr {
		t.Errorf("shard0 moved to %s (the liar's replica is %s)", got, f.Servers[0][1].Addr)
	}

	// Every key is on its own shard's master, and only there.
	masters := []string{f.Servers[0][0].Addr, heir.Addr}
	conns := []*clConn{mustDial(t, masters[0]), mustDial(t, masters[1])}
	for w := range workers {
		for _, g := range keysOf(w)[:48] {
			k := g[0]
			want := shardOf(k)
			for i, c := range conns {
				r := mustDo(t, c, "EXISTS", k)
				if (r == ":1\r\n") != (i == want) {
					t.Fatalf("key %s: EXISTS on shard%d (%s) = %q; it belongs to shard%d", k, i, masters[i], r, want)
				}
			}
		}
	}
	// And the proxy serves every key again, without a reload.
	c := mustDial(t, addr)
	for w := range workers {
		for _, g := range keysOf(w)[:48] {
			if r := mustDo(t, c, "GET", g[0]); strings.HasPrefix(r, "-") {
				t.Fatalf("GET %s after the failover: %q", g[0], r)
			}
		}
	}
}

// A reload builds the pool again from the running one's masters: the new
// generation serves at once, keeps the backends, and follows the next
// failover; the old generation's monitor stops. proxy.Check dials nothing.
func TestSentinelReload(t *testing.T) {
	f := testserver.StartSentinelFleet(t, testserver.FleetConfig{Shards: 1, SentinelPassword: "spass"})
	// A fixed port: a reload of "listen: 127.0.0.1:0" would bind a new one.
	listen := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	yaml := strings.Replace(sentinelYAML(f.Names, f.SentinelAddrs(), ""), "127.0.0.1:0", listen, 1)
	cfg, err := config.Parse([]byte(yaml), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := proxy.Check(cfg, proxy.Options{}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Check took %v: it waited for the Sentinels", d)
	}
	srv, addr := startProxy(t, yaml, "rs")
	c := mustDial(t, addr)
	if r := mustDo(t, c, "SET", "k", "v1"); r != "+OK\r\n" {
		t.Fatalf("SET: %q", r)
	}
	cfg2, err := config.Parse([]byte(strings.Replace(yaml, "  redis: true\n", "  redis: true\n  max_keys: 100\n", 1)), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(cfg2); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if r := mustDo(t, c, "GET", "k"); r != bulk("v1") {
		t.Fatalf("GET right after the reload: %q", r)
	}
	if got := serverAddr(srv, "rs", "shard0"); got != f.Servers[0][0].Addr {
		t.Fatalf("shard0 at %s after the reload", got)
	}
	waitFor(t, 5*time.Second, "the new generation subscribed", func() bool { return routerStat(t, srv, "rs", "sentinel_subscribed") == 3 })
	f.Servers[0][0].Stop()
	heir := f.Servers[0][1]
	waitFor(t, 30*time.Second, "the switch", func() bool { return serverAddr(srv, "rs", "shard0") == heir.Addr })
	if got := routerStat(t, srv, "rs", "sentinel_switches"); got != 1 {
		t.Errorf("sentinel_switches = %d", got)
	}
	waitFor(t, 5*time.Second, "GET served by the new master", func() bool { return mustDo(t, c, "GET", "k") == bulk("v1") })
}

// With no Sentinel to ask, the pool still starts; a request for a shard
// whose master is unknown gets an error naming the shard.
func TestSentinelNoneAnswers(t *testing.T) {
	down := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	srv, addr := startProxy(t, sentinelYAML([]string{"m1", "m2"}, []string{down}, "  connect_timeout: 200\n"), "rs")
	c := mustDial(t, addr)
	for _, cmd := range [][]string{{"GET", "k"}, {"MGET", "a", "b", "c"}, {"PING"}, {"INFO"}, {"BLPOP", "k", "1"}, {"WATCH", "k"}} {
		r := mustDo(t, c, cmd...)
		if cmd[0] == "PING" {
			if r != "+PONG\r\n" {
				t.Errorf("PING: %q", r)
			}
			continue
		}
		if !strings.HasPrefix(r, "-ERR no master known for shard m") {
			t.Errorf("%v: %q", cmd, r)
		}
	}
	if n := len(srv.Stats().Pools[0].Servers); n != 0 {
		t.Errorf("%d servers in stats, want none known", n)
	}
	if got := routerStat(t, srv, "rs", "sentinel_query_failures"); got < 1 {
		t.Errorf("sentinel_query_failures = %d", got)
	}
}
