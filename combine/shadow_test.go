package combine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// shadowConfig is pool p, pool s (one memcached each; s's through addr,
// a fault proxy) and cache, a route pool answered by p that copies
// requests to s with at most queue in flight. With s "" cache is p.
func shadowConfig(port int, p *testserver.Server, s string, queue int) string {
	text := fmt.Sprintf("p:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1\n", p.Addr)
	if s == "" {
		return text + fmt.Sprintf("cache:\n  listen: 127.0.0.1:%d\n  route:\n    pool: p\n", port)
	}
	return text + fmt.Sprintf(`s:
  listen: 127.0.0.1:0
  timeout: 300
  server_retry_timeout: 500
  server_failure_limit: 2
  auto_eject_hosts: true
  servers:
    - %s:1
cache:
  listen: 127.0.0.1:%d
  route:
    pool: p
    shadow:
      pool: s
      requests: all
      queue: %d
`, s, port, queue)
}

// TestShadow runs a verified load through a route pool with a shadow,
// and hangs the shadow, then kills it: the primary's clients see no error
// and no stale read; the shadow's copies are sent, failed and dropped as
// counted; while dead the shadow gets one copy in 64 (the rest are
// skipped), and once back it gets them all again.
func TestShadow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	p, s := testserver.StartMemcached(t), testserver.StartMemcached(t)
	fp := faultproxy.New(t, s.Addr)
	port := testserver.FreePort(t)
	srv := startProxy(t, shadowConfig(port, p, fp.Addr(), 64))
	v := &verified{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), workers: 8, keys: 200, dial: dialMemcache}
	ctx, cancel := context.WithCancel(context.Background())
	wait := v.run(ctx)
	stat := func(n string) int64 { return routerStat(srv, "cache", n) }
	sentIn, skippedIn := map[string]int64{}, map[string]int64{}
	for _, step := range []string{"live", "hung", "dead", "back"} {
		switch step {
		case "hung":
			fp.Blackhole(faultproxy.Downstream, true)
		case "dead":
			fp.Stop()
		case "back":
			fp.Blackhole(faultproxy.Downstream, false)
			if err := fp.Start(); err != nil {
				t.Fatal(err)
			}
		}
		before := v.counts()
		sent, dropped, failed, skipped := stat("shadow_sent"), stat("shadow_dropped"), stat("shadow_failed"), stat("shadow_skipped")
		time.Sleep(time.Second)
		d := v.counts().minus(before)
		sentIn[step], skippedIn[step] = stat("shadow_sent")-sent, stat("shadow_skipped")-skipped
		t.Logf("shadow %-4s: primary gets %6d errors %d stale %d; shadow sent %6d dropped %6d failed %6d skipped %6d",
			step, d.gets, d.errs, d.stale, sentIn[step], stat("shadow_dropped")-dropped, stat("shadow_failed")-failed, skippedIn[step])
	}
	if skippedIn["dead"] == 0 || sentIn["dead"] > skippedIn["dead"]/16 {
		t.Errorf("dead shadow: %d copies sent, %d skipped; want about one in 64 sent", sentIn["dead"], skippedIn["dead"])
	}
	if sentIn["back"] < sentIn["live"]/4 {
		t.Errorf("shadow back: %d copies sent in a second, against %d while live: it was not taken back", sentIn["back"], sentIn["live"])
	}
	cancel()
	wait()
	if c := v.counts(); c.errs != 0 || c.stale != 0 {
		t.Errorf("primary: %d errors, %d stale reads in %d gets: %q", c.errs, c.stale, c.gets, v.first)
	}
	if stat("shadow_sent") == 0 || stat("shadow_failed")+stat("shadow_dropped") == 0 {
		t.Errorf("shadow_sent %d, failed %d, dropped %d", stat("shadow_sent"), stat("shadow_failed"), stat("shadow_dropped"))
	}
	// The shadow got the primary's writes while it lived.
	c := dialServer(t, s.Addr)
	held := 0
	for w := range 8 {
		for k := range 200 {
			if strings.HasPrefix(c.do(fmt.Sprintf("get v:%d:%d\r\n", w, k)), "VALUE") {
				held++
			}
		}
	}
	if held == 0 {
		t.Error("the shadow holds none of the keys written")
	}
}
