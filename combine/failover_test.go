package combine_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"shardproxy/admin"
	"shardproxy/internal/testserver"
)

// failoverConfig is pool a (two memcached, no ejection) and pool b (one),
// and cache, a route pool that answers from a and fails over to b on on.
func failoverConfig(port int, a []*testserver.Server, b *testserver.Server, on string) string {
	return fmt.Sprintf(`a:
  listen: 127.0.0.1:0
  timeout: 500
  distribution: ketama
  hash: md5
  server_retry_timeout: 200
  servers:
    - %s:1
    - %s:1
b:
  listen: 127.0.0.1:0
  servers:
    - %s:1
cache:
  listen: 127.0.0.1:%d
  route:
    pool: a
    failover:
      pool: b
      on: %s
`, a[0].Addr, a[1].Addr, b.Addr, port, on)
}

// TestFailover kills one of a's servers: the requests of its keys are
// answered by the failover pool, under both policies; a miss in a goes to
// b only under error_or_miss.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	for _, on := range []string{"error", "error_or_miss"} {
		t.Run(on, func(t *testing.T) { testFailover(t, on) })
	}
}

func testFailover(t *testing.T, on string) {
	a := []*testserver.Server{testserver.StartMemcached(t), testserver.StartMemcached(t)}
	b := testserver.StartMemcached(t)
	port := testserver.FreePort(t)
	srv := startProxy(t, failoverConfig(port, a, b, on))
	c := dialServer(t, fmt.Sprintf("127.0.0.1:%d", port))
	onB := dialServer(t, b.Addr)

	// Keys through the route land in a; "only-b" keys are in b alone.
	const n = 100
	for i := range n {
		if got := c.do(fmt.Sprintf("set k%d 0 0 2\r\na%d\r\n", i, i%10)); got != "STORED\r\n" {
			t.Fatalf("set k%d: %q", i, got)
		}
		onB.do(fmt.Sprintf("set only-b%d 0 0 1\r\nb\r\n", i))
	}
	missGoesToB := 0
	for i := range n {
		if strings.Contains(c.do(fmt.Sprintf("get only-b%d\r\n", i)), "VALUE") {
			missGoesToB++
		}
	}
	want := 0
	if on == "error_or_miss" {
		want = n
	}
	if missGoesToB != want {
		t.Errorf("on %s: %d of %d misses in a answered by b, want %d", on, missGoesToB, n, want)
	}

	// Kill a's first server: its keys fail in a and are answered by b.
	dead := keysOn(t, a[0].Addr, n)
	if live := keysOn(t, a[1].Addr, n); len(dead) == 0 || len(live) == 0 || len(dead)+len(live) != n {
		t.Fatalf("keys on a's servers: %d and %d of %d", len(dead), len(live), n)
	}
	a[0].Stop()
	before := routerStat(srv, "cache", "failovers")
	for _, k := range dead {
		if got := c.do(fmt.Sprintf("set %s 0 0 1\r\nb\r\n", k)); got != "STORED\r\n" {
			t.Errorf("set %s with its server dead: %q", k, got)
		}
		if got := c.do("get " + k + "\r\n"); got != fmt.Sprintf("VALUE %s 0 1\r\nb\r\nEND\r\n", k) {
			t.Errorf("get %s with its server dead: %q", k, got)
		}
	}
	if got := routerStat(srv, "cache", "failovers") - before; got < int64(2*len(dead)) {
		t.Errorf("failovers counted %d, want at least %d", got, 2*len(dead))
	}
	// The keys of a's live server are answered by a.
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if contains(dead, k) {
			continue
		}
		if got := c.do("get " + k + "\r\n"); got != fmt.Sprintf("VALUE %s 0 2\r\na%d\r\nEND\r\n", k, i%10) {
			t.Errorf("get %s on a's live server: %q", k, got)
		}
	}
	t.Logf("on %s: %d keys of the dead server answered by b; failovers %d, failover_failures %d", on, len(dead),
		routerStat(srv, "cache", "failovers"), routerStat(srv, "cache", "failover_failures"))

	// The counters reach /metrics and the stats command with no more work.
	rec := httptest.NewRecorder()
	admin.Handler(srv, admin.HTTPConfig{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	metric := fmt.Sprintf(`shardproxy_router_failovers_total{pool="cache"} %d`, routerStat(srv, "cache", "failovers"))
	if !strings.Contains(rec.Body.String(), metric) {
		t.Errorf("/metrics has no %q", metric)
	}
	if got := c.do("stats\r\n"); !strings.Contains(got, "STAT failovers ") {
		t.Errorf("stats has no failovers: %q", got)
	}
}

// keysOn returns the keys k0..k(n-1) the memcached at addr holds.
func keysOn(t *testing.T, addr string, n int) []string {
	c := dialServer(t, addr)
	var keys []string
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if strings.HasPrefix(c.do("get "+k+"\r\n"), "VALUE") {
			keys = append(keys, k)
		}
	}
	return keys
}
