package proxy_test

import (
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// healthKeys are the pool keys of the health tests: a server is marked
// bad at its first failure and probed every 100ms from 100ms on.
const healthKeys = "  timeout: 1000\n  server_failure_limit: 1\n  server_retry_timeout: 100\n" +
	"  health_check_interval: 100\n  health_check_timeout: 300\n"

// onlyServer returns the stats of pool's one server.
func onlyServer(t testing.TB, srv *proxy.Server, pool string) proxy.ServerStats {
	t.Helper()
	for _, p := range srv.Stats().Pools {
		if p.Name == pool && len(p.Servers) == 1 {
			return p.Servers[0]
		}
	}
	t.Fatalf("pool %s with one server not found", pool)
	return proxy.ServerStats{}
}

// In every pool kind whose servers the YAML lists (native memcache, native
// Redis with AUTH, a Lua route's backends) a server killed and started
// again comes back through a probe, not a client's request: while it is
// probed, requests for it fail at once; once it answers, it serves again
// about one interval later.
func TestHealthProbeEveryKind(t *testing.T) {
	cases := []struct {
		name string
		// setup starts the server and returns it, the proxy's YAML for
		// pool "hp", and do, which sends one request through addr and
		// tells whether it succeeded, with the reply.
		setup func(t *testing.T) (*testserver.Server, string, func(t *testing.T, addr string) (bool, string))
	}{
		{"memcache", func(t *testing.T) (*testserver.Server, string, func(*testing.T, string) (bool, string)) {
			s := testserver.StartMemcached(t)
			yaml := "hp:\n  listen: 127.0.0.1:0\n" + healthKeys + "  servers:\n    - " + s.Addr + ":1\n"
			return s, yaml, mcGet
		}},
		{"redis auth", func(t *testing.T) (*testserver.Server, string, func(*testing.T, string) (bool, string)) {
			s := testserver.StartRedis(t, "--requirepass", "pw")
			yaml := "hp:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_auth: pw\n" + healthKeys +
				"  servers:\n    - " + s.Addr + ":1\n"
			return s, yaml, func(t *testing.T, addr string) (bool, string) {
				c := respDial(t, addr)
				if r := c.do("AUTH", "pw"); r != "+OK\r\n" {
					t.Fatalf("AUTH: %q", r)
				}
				r := c.do("GET", "k")
				return r == "$-1\r\n", r
			}
		}},
		{"lua", func(t *testing.T) (*testserver.Server, string, func(*testing.T, string) (bool, string)) {
			s := testserver.StartMemcached(t)
			yaml := "hp:\n  listen: 127.0.0.1:0\n  lua: " + luaFile(t, s) + "\n" + healthKeys
			return s, yaml, mcGet
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, yaml, do := tc.setup(t)
			srv, addr := startProxy(t, yaml, "hp")
			if ok, r := do(t, addr); !ok {
				t.Fatalf("before the kill: %q", r)
			}
			s.Stop()
			waitFor(t, 5*time.Second, "probing", func() bool {
				do(t, addr)
				return onlyServer(t, srv, "hp").State.Probing
			})
			start := time.Now()
			if ok, r := do(t, addr); ok || !strings.Contains(r, "backend failure") {
				t.Fatalf("while probing: %q, want a backend failure", r)
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Fatalf("a request for a probed server took %v: it did not fail fast", d)
			}
			s.Restart()
			restarted := time.Now()
			waitFor(t, 5*time.Second, "restored", func() bool { return !onlyServer(t, srv, "hp").State.Bad })
			t.Logf("%s: restored %v after the restarted server answered (interval 100ms)", tc.name, time.Since(restarted))
			if ok, r := do(t, addr); !ok {
				t.Fatalf("after the restore: %q", r)
			}
			st := onlyServer(t, srv, "hp")
			if st.Restores != 1 || st.Probes < 1 || st.ProbeFailures < 1 || st.Probes < st.ProbeFailures+1 {
				t.Fatalf("probes %d, failed %d, restores %d: want a restore after failed probes",
					st.Probes, st.ProbeFailures, st.Restores)
			}
		})
	}
}

// mcGet sends "get k" through a new client and reports whether it missed
// as memcached does.
func mcGet(t *testing.T, addr string) (bool, string) {
	c := dial(t, addr)
	r := c.do("get k\r\n")
	return r == "END\r\n", r
}

// Redis Cluster nodes and Sentinel-resolved masters get the pool's
// health checks too: their idle sockets are checked.
func TestHealthIdleChecksClusterAndSentinel(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		rc := testserver.StartRedisCluster(t, 3, 0)
		srv, addr := startProxy(t, clusterYAML("hc", rc.Addrs(), "  health_check_interval: 50\n"), "hc")
		c := mustDial(t, addr)
		for _, k := range keysAcrossSlots(12, "hc") {
			mustDo(t, c, "SET", k, "v")
		}
		waitFor(t, 5*time.Second, "every node's idle socket checked", func() bool {
			p := srv.Stats().Pools[0]
			for _, s := range p.Servers {
				if s.IdleChecks == 0 {
					return false
				}
			}
			return len(p.Servers) == 3
		})
	})
	t.Run("sentinel", func(t *testing.T) {
		f := testserver.StartSentinelFleet(t, testserver.FleetConfig{Shards: 1, Sentinels: 1, SentinelPassword: "spass"})
		srv, addr := startProxy(t, sentinelYAML(f.Names, f.SentinelAddrs(), "  health_check_interval: 50\n"), "rs")
		waitFor(t, 5*time.Second, "the master named", func() bool { return serverAddr(srv, "rs", f.Names[0]) != "" })
		c := respDial(t, addr)
		if r := c.do("SET", "k", "v"); r != "+OK\r\n" {
			t.Fatalf("SET: %q", r)
		}
		waitFor(t, 5*time.Second, "the master's idle socket checked", func() bool {
			return onlyServer(t, srv, "rs").IdleChecks > 0
		})
	})
}
