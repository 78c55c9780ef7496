package proxy_test

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// CONFIG through a sharded pool of three redis-servers and through a Redis
// Cluster pool of three masters with a replica each, each as two pools
// over the same servers: "…c" has redis_config, "…" refuses CONFIG (the
// default).

// configRig is one pool kind under test.
type configRig struct {
	addr, offAddr string
	// servers in the pool's order: the order a fan-out's replies come in.
	servers []*testserver.Server
	// permissive, if set, is the index of a server started with
	// enable-protected-configs, which alone lets CONFIG SET dir through.
	permissive int
	cluster    bool
}

func TestRedisConfigSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs redis-server")
	}
	servers := make([]*testserver.Server, 3)
	for i := range servers {
		var args []string
		if i == 1 {
			args = []string{"--enable-protected-configs", "yes"}
		}
		servers[i] = testserver.StartRedis(t, args...)
	}
	var list strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&list, "    - %s:1\n", s.Addr)
	}
	yaml := fmt.Sprintf("rdc:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_config: true\n  servers:\n%s", list.String()) +
		fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  servers:\n%s", list.String())
	cfg, err := config.Parse([]byte(yaml), "config.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	// A sharded pool's servers are in twemproxy's order: by name, here
	// the address.
	ordered := slices.Clone(servers)
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Addr < ordered[j].Addr })
	testRedisConfig(t, configRig{addr: srv.Addr("rdc").String(), offAddr: srv.Addr("rd").String(),
		servers: ordered, permissive: slices.Index(ordered, servers[1])})
}

func TestRedisConfigCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	rc := testserver.StartRedisCluster(t, 3, 1)
	yaml := clusterYAML("rcc", rc.Addrs()[:1], "  redis_config: true\n") + clusterYAML("rc", rc.Addrs()[:1], "")
	cfg, err := config.Parse([]byte(yaml), "config.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	for _, pool := range []string{"rc", "rcc"} {
		waitFor(t, 10*time.Second, pool+"'s first slot map", func() bool { return routerStat(t, srv, pool, "cluster_ready") == 1 })
	}
	// A cluster pool's masters are in the order of the slots they serve.
	testRedisConfig(t, configRig{addr: srv.Addr("rcc").String(), offAddr: srv.Addr("rc").String(),
		servers: rc.Masters, permissive: -1, cluster: true})
}

// configGet asks one server directly for one parameter's value.
func configGet(t testing.TB, addr, name string) string {
	t.Helper()
	c := respDial(t, addr)
	got := c.do("CONFIG", "GET", name)
	prefix := "*2\r\n" + bulk(name)
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("CONFIG GET %s on %s: %q", name, addr, got)
	}
	return strings.TrimSuffix(strings.SplitN(got[len(prefix):], "\r\n", 2)[1], "\r\n")
}

// serverStat reads one field of a server's INFO stats directly.
func serverStat(t testing.TB, addr, name string) int64 {
	t.Helper()
	f := infoFields(infoText(t, respDial(t, addr).do("INFO", "stats")))
	v, err := strconv.ParseInt(f["Stats"][name], 10, 64)
	if err != nil {
		t.Fatalf("INFO stats %s on %s: %v", name, addr, f["Stats"])
	}
	return v
}

func testRedisConfig(t *testing.T, rig configRig) {
	c := respDial(t, rig.addr)

	t.Run("refused without redis_config", func(t *testing.T) {
		off := respDial(t, rig.offAddr)
		for _, args := range [][]string{
			{"CONFIG", "GET", "maxmemory-policy"}, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"},
			{"config", "resetstat"}, {"CONFIG", "REWRITE"},
		} {
			want := "-ERR CONFIG " + strings.ToUpper(args[1]) + " is not supported by shardproxy: it administers a single server\r\n"
			if got := off.do(args...); got != want {
				t.Errorf("%q: %q, want %q", args, got, want)
			}
		}
		for _, s := range rig.servers {
			if v := configGet(t, s.Addr, "maxmemory-policy"); v != "noeviction" {
				t.Errorf("%s: maxmemory-policy %q after a refused CONFIG SET", s.Addr, v)
			}
		}
	})

	t.Run("set reaches every server", func(t *testing.T) {
		for _, policy := range []string{"allkeys-lfu", "volatile-ttl"} {
			if got := c.do("CONFIG", "SET", "maxmemory-policy", policy); got != "+OK\r\n" {
				t.Fatalf("CONFIG SET maxmemory-policy %s: %q", policy, got)
			}
			for _, s := range rig.servers {
				if v := configGet(t, s.Addr, "maxmemory-policy"); v != policy {
					t.Errorf("%s: maxmemory-policy %q, want %q", s.Addr, v, policy)
				}
			}
		}
		// Several pairs at once, and back to the default.
		if got := c.do("CONFIG", "SET", "maxmemory-policy", "noeviction", "hz", "11"); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET of two: %q", got)
		}
		for _, s := range rig.servers {
			if p, hz := configGet(t, s.Addr, "maxmemory-policy"), configGet(t, s.Addr, "hz"); p != "noeviction" || hz != "11" {
				t.Errorf("%s: maxmemory-policy %q hz %q", s.Addr, p, hz)
			}
		}
		// Every server refuses a bad value: their error, as they word it.
		want := "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following:"
		if got := c.do("CONFIG", "SET", "maxmemory-policy", "bogus"); !strings.HasPrefix(got, want) {
			t.Errorf("a bad value: %q", got)
		}
	})

	t.Run("get merged", func(t *testing.T) {
		if got := c.do("CONFIG", "GET", "maxmemory-policy"); got != "*2\r\n"+bulk("maxmemory-policy")+bulk("noeviction") {
			t.Errorf("CONFIG GET maxmemory-policy: %q", got)
		}
		// Each server's own port differs: the first server's is answered,
		// in a sharded pool the first listed (by name); a cluster pool
		// lists its masters in the order its slot map gave them.
		var ports []string
		for _, s := range rig.servers {
			ports = append(ports, "*2\r\n"+bulk("port")+bulk(s.Addr[strings.LastIndexByte(s.Addr, ':')+1:]))
		}
		if !rig.cluster {
			ports = ports[:1]
		}
		if got := c.do("CONFIG", "GET", "port"); !slices.Contains(ports, got) {
			t.Errorf("CONFIG GET port: %q, want one of %q", got, ports)
		}
		got := c.do("CONFIG", "GET", "maxmemory*", "hz")
		if !strings.HasPrefix(got, "*12\r\n") || !strings.Contains(got, bulk("hz")+bulk("11")) ||
			!strings.Contains(got, bulk("maxmemory-policy")+bulk("noeviction")) {
			t.Errorf("CONFIG GET maxmemory* hz: %q", got)
		}
		if got := c.do("CONFIG", "GET", "no-such-parameter"); got != "*0\r\n" {
			t.Errorf("CONFIG GET of nothing: %q", got)
		}
	})

	t.Run("RESP3 map", func(t *testing.T) {
		c3 := respDial(t, rig.addr)
		hello3(t, c3)
		want := "%2\r\n" + bulk("maxmemory-policy") + bulk("noeviction") + bulk("hz") + bulk("11")
		alt := "%2\r\n" + bulk("hz") + bulk("11") + bulk("maxmemory-policy") + bulk("noeviction")
		if got := c3.do("CONFIG", "GET", "maxmemory-policy", "hz"); got != want && got != alt {
			t.Errorf("RESP3 CONFIG GET: %q", got)
		}
		if got := c3.do("CONFIG", "GET", "nothing-*"); got != "%0\r\n" {
			t.Errorf("RESP3 CONFIG GET of nothing: %q", got)
		}
		if got := c3.do("CONFIG", "SET", "hz", "10"); got != "+OK\r\n" {
			t.Errorf("RESP3 CONFIG SET: %q", got)
		}
	})

	t.Run("resetstat clears every server", func(t *testing.T) {
		const n = 1000
		var b strings.Builder
		for i := range n {
			k := strconv.Itoa(i) + ":cfg"
			b.WriteString(multibulk("SET", k, "v") + multibulk("GET", k) + multibulk("GET", k+":missing"))
		}
		c.send(b.String())
		for range 3 * n {
			if got := c.reply(); strings.HasPrefix(got, "-") {
				t.Fatalf("filling: %q", got)
			}
		}
		for _, s := range rig.servers {
			if h, m := serverStat(t, s.Addr, "keyspace_hits"), serverStat(t, s.Addr, "keyspace_misses"); h == 0 || m == 0 {
				t.Fatalf("%s: no hits or misses to reset: %d %d", s.Addr, h, m)
			}
		}
		if got := c.do("CONFIG", "RESETSTAT"); got != "+OK\r\n" {
			t.Fatalf("CONFIG RESETSTAT: %q", got)
		}
		for _, s := range rig.servers {
			if h, m := serverStat(t, s.Addr, "keyspace_hits"), serverStat(t, s.Addr, "keyspace_misses"); h != 0 || m != 0 {
				t.Errorf("%s after RESETSTAT: keyspace_hits %d, keyspace_misses %d", s.Addr, h, m)
			}
		}
	})

	t.Run("guarded settings refused", func(t *testing.T) {
		for _, tc := range []struct{ args []string }{
			{[]string{"CONFIG", "SET", "requirepass", "secret"}},
			{[]string{"CONFIG", "SET", "hz", "12", "Port", "1"}},
			{[]string{"CONFIG", "SET", "tls-port", "7000"}},
			{[]string{"CONFIG", "SET", "maxclients", "1"}},
			{[]string{"CONFIG", "SET", "timeout", "1"}},
			{[]string{"CONFIG", "SET", "cluster-announce-ip", "10.0.0.1"}},
		} {
			name := strings.ToLower(tc.args[len(tc.args)-2])
			want := "-ERR CONFIG SET " + name + " is not allowed through shardproxy: "
			if got := c.do(tc.args...); !strings.HasPrefix(got, want) {
				t.Errorf("%q: %q, want %q...", tc.args, got, want)
			}
		}
		for _, s := range rig.servers {
			if pw, hz, mc := configGet(t, s.Addr, "requirepass"), configGet(t, s.Addr, "hz"), configGet(t, s.Addr, "maxclients"); pw != "" || hz != "10" || mc != "10000" {
				t.Errorf("%s after refused sets: requirepass %q hz %q maxclients %q", s.Addr, pw, hz, mc)
			}
		}
		// The proxy still reaches every server.
		if got := c.do("CONFIG", "GET", "requirepass"); got != "*2\r\n"+bulk("requirepass")+bulk("") {
			t.Errorf("CONFIG GET requirepass: %q", got)
		}
	})

	if rig.permissive >= 0 {
		t.Run("servers disagree", func(t *testing.T) {
			// Only one server lets CONFIG SET change a protected setting:
			// it applies it, the others refuse, and the client gets the
			// first refusal.
			dir := t.TempDir()
			got := c.do("CONFIG", "SET", "dir", dir)
			if want := "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n"; got != want {
				t.Errorf("CONFIG SET dir: %q, want %q", got, want)
			}
			for i, s := range rig.servers {
				if applied := configGet(t, s.Addr, "dir") == dir; applied != (i == rig.permissive) {
					t.Errorf("%s: applied %v", s.Addr, applied)
				}
			}
		})
	}

	t.Run("counted per command", func(t *testing.T) {
		f := infoFields(infoText(t, c.do("INFO", "proxy")))["Proxy"]
		for name, least := range map[string]int{"cmd_config|set": 5, "cmd_config|get": 5, "cmd_config|resetstat": 1} {
			if n, err := strconv.Atoi(f[name]); err != nil || n < least {
				t.Errorf("INFO proxy %s: %q, want at least %d (%v)", name, f[name], least, f)
			}
		}
	})

	t.Run("a server down is named", func(t *testing.T) {
		down := rig.servers[1]
		down.Stop()
		t.Cleanup(down.Restart)
		for _, args := range [][]string{
			{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}, {"CONFIG", "GET", "hz"}, {"CONFIG", "RESETSTAT"},
		} {
			// A sharded pool names a server, a cluster pool a node.
			got := c.do(args...)
			if !strings.HasPrefix(got, "-ERR server "+down.Addr+": backend failure: ") &&
				!strings.HasPrefix(got, "-ERR node "+down.Addr+": backend failure: ") {
				t.Errorf("%q with %s down: %q", args, down.Addr, got)
			}
		}
		// The servers that answered applied it.
		for i, s := range rig.servers {
			if i != 1 {
				if v := configGet(t, s.Addr, "maxmemory-policy"); v != "allkeys-lru" {
					t.Errorf("%s: maxmemory-policy %q", s.Addr, v)
				}
			}
		}
	})
}
