package combine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// redisGrow is a Redis pool grown from 2 servers (old) to 3 (new: the
// same 2 and 1 more) through a route pool, cache, in phase phase.
func redisGrow(port int, rs []*testserver.Server, phase string) string {
	ring := func(name string, k int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s:\n  listen: 127.0.0.1:0\n  redis: true\n  distribution: ketama\n  hash: md5\n  servers:\n", name)
		for _, s := range rs[:k] {
			fmt.Fprintf(&b, "    - %s:1\n", s.Addr)
		}
		return b.String()
	}
	return ring("old", 2) + ring("new", 3) + fmt.Sprintf(
		"cache:\n  listen: 127.0.0.1:%d\n  redis: true\n  route:\n    migrate:\n      from: old\n      to: new\n      phase: %s\n", port, phase)
}

// TestRedisMigrate grows a Redis pool from 2 servers to 3 through the
// phases, aborting from each, under a verified load of GET, SET (with
// and without PX) and DEL: no stale read, no value past its TTL.
func TestRedisMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	rs := []*testserver.Server{testserver.StartRedis(t), testserver.StartRedis(t), testserver.StartRedis(t)}
	port := testserver.FreePort(t)
	srv := startProxy(t, redisGrow(port, rs, "from_only"))
	v := &verified{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), workers: 6, keys: 300, dial: dialRedis}
	ctx, cancel := context.WithCancel(context.Background())
	wait := v.run(ctx)
	steps := []string{"from_only", "warm", "from_only", "dual_write", "from_only", "dual_write", "warm",
		"to_only", "from_only", "dual_write", "warm", "to_only"}
	for i, phase := range steps {
		if i > 0 {
			if err := srv.Reload(parse(t, redisGrow(port, rs, phase))); err != nil {
				t.Fatalf("reload to %s: %v", phase, err)
			}
		}
		before := v.counts()
		time.Sleep(500 * time.Millisecond)
		d := v.counts().minus(before)
		t.Logf("phase %-10s gets %6d  live keys missed %5.1f%%  stale %d  expired %d  errors %d",
			phase, d.gets, 100*d.lostRate(), d.stale, d.expired, d.errs)
	}
	cancel()
	wait()
	for _, n := range []string{"route_fallbacks", "route_fallback_hits", "route_fills", "route_fills_refused", "route_writes"} {
		t.Logf("%s %d", n, routerStat(srv, "cache", n))
	}
	if c := v.counts(); c.stale != 0 || c.expired != 0 || c.errs != 0 {
		t.Errorf("%d stale reads, %d past their TTL, %d errors in %d gets; first: %q", c.stale, c.expired, c.errs, c.gets, v.first)
	}
	if routerStat(srv, "cache", "route_fills") <= 0 {
		t.Error("the warm phases filled nothing")
	}
}

// TestRedisFailoverShadow: a Redis route pool with a shadow and a
// failover pool; one of the first pool's servers is killed, and its keys
// are answered by the failover pool while the shadow gets its copies.
func TestRedisFailoverShadow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	a := []*testserver.Server{testserver.StartRedis(t), testserver.StartRedis(t)}
	b, s := testserver.StartRedis(t), testserver.StartRedis(t)
	port := testserver.FreePort(t)
	srv := startProxy(t, fmt.Sprintf(`a:
  listen: 127.0.0.1:0
  redis: true
  timeout: 500
  distribution: ketama
  hash: md5
  servers:
    - %s:1
    - %s:1
b:
  listen: 127.0.0.1:0
  redis: true
  servers:
    - %s:1
s:
  listen: 127.0.0.1:0
  redis: true
  servers:
    - %s:1
cache:
  listen: 127.0.0.1:%d
  redis: true
  route:
    pool: a
    failover:
      pool: b
    shadow:
      pool: s
      requests: writes
`, a[0].Addr, a[1].Addr, b.Addr, s.Addr, port))
	st, err := dialRedis(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	c := st.(*redisStore)
	const n = 100
	for i := range n {
		if err := c.set(fmt.Sprintf("k%d", i), "a", 0); err != nil {
			t.Fatal(err)
		}
	}
	var dead []string
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if got, _ := testserver.RedisDo(a[0].Addr, "GET", k); strings.Contains(got, "a") {
			dead = append(dead, k)
		}
	}
	if len(dead) == 0 || len(dead) == n {
		t.Fatalf("%d of %d keys on a's first server", len(dead), n)
	}
	a[0].Stop()
	for _, k := range dead {
		if err := c.set(k, "b", 0); err != nil {
			t.Errorf("SET %s with its server dead: %v", k, err)
		}
		if got, hit, err := c.get(k); err != nil || !hit || got != "b" {
			t.Errorf("GET %s with its server dead: %q %v %v", k, got, hit, err)
		}
	}
	if got := routerStat(srv, "cache", "failovers"); got < int64(2*len(dead)) {
		t.Errorf("failovers %d, want at least %d", got, 2*len(dead))
	}
	if got := routerStat(srv, "cache", "shadow_sent"); got < n {
		t.Errorf("shadow_sent %d, want at least %d", got, n)
	}
	if got, _ := testserver.RedisDo(s.Addr, "GET", "k1"); !strings.Contains(got, "a") && !strings.Contains(got, "b") {
		t.Errorf("the shadow holds k1 = %q", got)
	}
	t.Logf("%d keys of the dead server answered by b; failovers %d, shadow_sent %d", len(dead),
		routerStat(srv, "cache", "failovers"), routerStat(srv, "cache", "shadow_sent"))
}
