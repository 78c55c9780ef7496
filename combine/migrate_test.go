package combine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// growConfig is a ketama pool grown from 4 servers (old) to 6 (new: the
// same 4 and 2 more; neither listens: clients reach them only through
// the route) through a route pool, cache, in phase phase; with
// phase "" cache is a plain pool of the first n servers.
func growConfig(port int, mc []*testserver.Server, phase string, n int) string {
	ring := func(name string, k int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s:\n  distribution: ketama\n  hash: fnv1a_64\n  servers:\n", name)
		for _, s := range mc[:k] {
			fmt.Fprintf(&b, "    - %s:1\n", s.Addr)
		}
		return b.String()
	}
	if phase == "" {
		return strings.Replace(ring("cache", n), ":\n", fmt.Sprintf(":\n  listen: 127.0.0.1:%d\n", port), 1)
	}
	return ring("old", 4) + ring("new", 6) + fmt.Sprintf(
		"cache:\n  listen: 127.0.0.1:%d\n  route:\n    migrate:\n      from: old\n      to: new\n      phase: %s\n", port, phase)
}

// TestMigrateGrow grows a ketama pool from 4 memcached to 6 through the
// phases under a verified load, aborting back to the old ring from each
// phase on the way: no read is stale at any point. It prints the share of
// gets of live keys that missed in each phase, beside a plain reload from
// 4 servers to 6.
func TestMigrateGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := make([]*testserver.Server, 6)
	for i := range mc {
		mc[i] = testserver.StartMemcached(t)
	}
	port := testserver.FreePort(t)
	const window = 800 * time.Millisecond

	plain := plainGrow(t, mc, port, window)
	flush(t, mc)

	srv := startProxy(t, growConfig(port, mc, "from_only", 0))
	v := &verified{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), workers: 8, keys: 300, dial: dialMemcache}
	ctx, cancel := context.WithCancel(context.Background())
	wait := v.run(ctx)
	// The first warm phase starts with new's 2 new servers empty; each
	// phase is aborted once (back to from_only) before the migration
	// goes through.
	steps := []string{"from_only", "warm", "from_only", "dual_write", "from_only", "dual_write", "warm",
		"to_only", "from_only", "dual_write", "warm", "to_only"}
	var warm []loadCounts
	for i, phase := range steps {
		if i > 0 {
			if err := srv.Reload(parse(t, growConfig(port, mc, phase, 0))); err != nil {
				t.Fatalf("reload to %s: %v", phase, err)
			}
		}
		before := v.counts()
		time.Sleep(window)
		d := v.counts().minus(before)
		if phase == "warm" {
			warm = append(warm, d)
		}
		t.Logf("phase %-10s gets %6d  live keys missed %5.1f%%  stale %d  expired %d  errors %d",
			phase, d.gets, 100*d.lostRate(), d.stale, d.expired, d.errs)
	}
	cancel()
	wait()
	t.Logf("plain reload 4 -> 6: live keys missed %5.1f%% in the window after it (%5.1f%% before)",
		100*plain[1].lostRate(), 100*plain[0].lostRate())
	for _, n := range []string{"route_fallbacks", "route_fallback_hits", "route_fills", "route_fills_refused",
		"route_fills_not_stored", "route_writes", "route_other_failures", "route_write_failures"} {
		t.Logf("%s %d", n, routerStat(srv, "cache", n))
	}
	c := v.counts()
	if c.stale != 0 || c.expired != 0 || c.errs != 0 {
		t.Errorf("%d stale reads, %d values past their TTL, %d errors in %d gets; first: %q",
			c.stale, c.expired, c.errs, c.gets, v.first)
	}
	// The bound: a warm phase loses fewer live keys than a plain reload.
	for _, w := range warm {
		if w.lostRate() >= plain[1].lostRate() {
			t.Errorf("a warm phase missed %.1f%% of live keys, a plain reload %.1f%%", 100*w.lostRate(), 100*plain[1].lostRate())
		}
	}
	if routerStat(srv, "cache", "route_fills") <= 0 || routerStat(srv, "cache", "route_fallbacks") <= 0 {
		t.Errorf("the warm phases filled nothing")
	}
}

// plainGrow runs the verified load on a plain pool of 4 servers, reloads
// it to 6, and returns the counts of a window before and after.
func plainGrow(t *testing.T, mc []*testserver.Server, port int, window time.Duration) [2]loadCounts {
	srv := startProxy(t, growConfig(port, mc, "", 4))
	v := &verified{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), workers: 8, keys: 300, dial: dialMemcache}
	ctx, cancel := context.WithCancel(context.Background())
	wait := v.run(ctx)
	time.Sleep(window)
	before := v.counts()
	time.Sleep(window)
	mid := v.counts()
	if err := srv.Reload(parse(t, growConfig(port, mc, "", 6))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(window)
	after := v.counts()
	cancel()
	wait()
	shutdown(t, srv)
	if c := v.counts(); c.stale != 0 || c.errs != 0 {
		t.Errorf("plain pool: %d stale, %d errors: %q", c.stale, c.errs, v.first)
	}
	return [2]loadCounts{mid.minus(before), after.minus(mid)}
}

// flush empties every server.
func flush(t *testing.T, mc []*testserver.Server) {
	for _, s := range mc {
		c := dialServer(t, s.Addr)
		if got := c.do("flush_all\r\n"); got != "OK\r\n" {
			t.Fatalf("flush_all %s: %q", s.Addr, got)
		}
	}
	// flush_all drops the items of its own second too, those set after it
	time.Sleep(1100 * time.Millisecond)
}

// shutdown stops srv now, freeing its ports.
func shutdown(t *testing.T, srv *proxy.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// TestMigrateAt: a migration whose phases move by the clock (at:) moves
// under load, with no reload, and reads stay fresh.
func TestMigrateAt(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := make([]*testserver.Server, 6)
	for i := range mc {
		mc[i] = testserver.StartMemcached(t)
	}
	port := testserver.FreePort(t)
	now := time.Now()
	at := fmt.Sprintf("      at:\n        dual_write: %s\n        warm: %s\n",
		now.Add(-time.Hour).UTC().Format(time.RFC3339Nano), now.Add(700*time.Millisecond).UTC().Format(time.RFC3339Nano))
	srv := startProxy(t, growConfig(port, mc, "from_only", 0)+at)
	if got := routerStat(srv, "cache", "route_phase"); got != 1 {
		t.Fatalf("route_phase %d at the start, want 1 (dual_write)", got)
	}
	v := &verified{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), workers: 4, keys: 200, dial: dialMemcache}
	ctx, cancel := context.WithCancel(context.Background())
	wait := v.run(ctx)
	time.Sleep(400 * time.Millisecond)
	if got := routerStat(srv, "cache", "route_fallbacks"); got != 0 {
		t.Errorf("%d fallbacks in dual_write", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for routerStat(srv, "cache", "route_phase") != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond)
	cancel()
	wait()
	if got := routerStat(srv, "cache", "route_phase"); got != 2 {
		t.Errorf("route_phase %d after warm's time, want 2", got)
	}
	if got := routerStat(srv, "cache", "route_fallbacks"); got == 0 {
		t.Error("no fallback once warm began")
	}
	if c := v.counts(); c.stale != 0 || c.errs != 0 {
		t.Errorf("%d stale, %d errors: %q", c.stale, c.errs, v.first)
	}
}

// TestMigrateOtherFails: in dual_write, the other pool (to) down: a set
// is answered with an error (it could be neither written there nor
// deleted), reads go on from from, and once to is back writes are
// acknowledged again, to holding no value older than from's.
func TestMigrateOtherFails(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	from, to := testserver.StartMemcached(t), testserver.StartMemcached(t)
	fp := faultproxy.New(t, to.Addr)
	port := testserver.FreePort(t)
	srv := startProxy(t, fmt.Sprintf(`old:
  servers:
    - %s:1
new:
  timeout: 300
  server_retry_timeout: 200
  servers:
    - %s:1
cache:
  listen: 127.0.0.1:%d
  route:
    migrate:
      from: old
      to: new
      phase: dual_write
`, from.Addr, fp.Addr(), port))
	c := dialServer(t, fmt.Sprintf("127.0.0.1:%d", port))
	if got := c.do("set k 0 0 2\r\nv1\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	if got := dialServer(t, to.Addr).do("get k\r\n"); got != "VALUE k 0 2\r\nv1\r\nEND\r\n" {
		t.Fatalf("to holds %q after a dual write", got)
	}
	fp.Stop()
	for _, req := range []string{"set k 0 0 2\r\nv2\r\n", "delete k\r\n"} {
		if got := c.do(req); !strings.HasPrefix(got, "SERVER_ERROR route: the other pool of migrate failed") {
			t.Errorf("%q with to down: %q", req, got)
		}
	}
	if got := c.do("get k\r\n"); got != "END\r\n" && got != "VALUE k 0 2\r\nv2\r\nEND\r\n" {
		t.Errorf("get with to down: %q", got)
	}
	if n := routerStat(srv, "cache", "route_write_failures"); n != 2 {
		t.Errorf("route_write_failures %d, want 2", n)
	}
	if err := fp.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.do("set k 0 0 2\r\nv3\r\n") != "STORED\r\n" {
		if time.Now().After(deadline) {
			t.Fatal("writes still fail with to back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// to holds the value, or nothing if its set failed and the delete
	// after it did not: never an older value
	if got := dialServer(t, to.Addr).do("get k\r\n"); got != "VALUE k 0 2\r\nv3\r\nEND\r\n" && got != "END\r\n" {
		t.Errorf("to holds %q once back", got)
	}
}
