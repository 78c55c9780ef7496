package combine_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// TestWarmUp: a cold pool in front of a warm one. A get the cold pool
// misses is answered from the warm pool and filled into the cold one with
// the item's flags and remaining TTL (one past memcached's 30 days of
// relative time too); a write goes to the cold pool and deletes the key
// in the warm one; and a verified load through the route reads nothing
// stale.
func TestWarmUp(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	warm, cold := testserver.StartMemcached(t), testserver.StartMemcached(t)
	port := testserver.FreePort(t)
	srv := startProxy(t, fmt.Sprintf(`warm:
  servers:
    - %s:1
cold:
  servers:
    - %s:1
cache:
  listen: 127.0.0.1:%d
  route:
    warm_up:
      cold: cold
      warm: warm
`, warm.Addr, cold.Addr, port))
	c := dialServer(t, fmt.Sprintf("127.0.0.1:%d", port))
	w, k := dialServer(t, warm.Addr), dialServer(t, cold.Addr)
	far := time.Now().Add(40 * 24 * time.Hour).Unix()
	w.do("set short 7 100 2\r\nv1\r\n")
	w.do(fmt.Sprintf("set far 9 %d 2\r\nv2\r\n", far))
	w.do("set forever 3 0 2\r\nv3\r\n")
	for _, it := range []struct {
		key, flags, val string
		ttl             int64 // seconds left, about; -1 none
	}{{"short", "7", "v1", 100}, {"far", "9", "v2", far - time.Now().Unix()}, {"forever", "3", "v3", -1}} {
		if got, want := c.do("get "+it.key+"\r\n"), fmt.Sprintf("VALUE %s %s 2\r\n%s\r\nEND\r\n", it.key, it.flags, it.val); got != want {
			t.Errorf("get %s through the route: %q, want %q", it.key, got, want)
		}
		var line string
		deadline := time.Now().Add(2 * time.Second)
		for {
			line = k.do("mg " + it.key + " f t v\r\n")
			if strings.HasPrefix(line, "VA") || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		f, ttl := metaFlag(line, 'f'), metaFlag(line, 't')
		n, _ := strconv.ParseInt(ttl, 10, 64)
		// memcached's clock moves in whole seconds, and may lag the
		// wall clock by one when it turns an absolute time into a TTL.
		if f != it.flags || (it.ttl < 0) != (n < 0) || n < it.ttl-3 || n > it.ttl+2 && it.ttl >= 0 {
			t.Errorf("%s filled into cold as %q: flags %s ttl %s, want %s and about %d", it.key, line, f, ttl, it.flags, it.ttl)
		}
	}
	if got := c.do("set short 0 0 2\r\nv4\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	if got := w.do("get short\r\n"); got != "END\r\n" {
		t.Errorf("a write through the route left the warm pool %q", got)
	}
	if got := k.do("get short\r\n"); got != "VALUE short 0 2\r\nv4\r\nEND\r\n" {
		t.Errorf("cold holds %q after the write", got)
	}

	v := &verified{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), workers: 6, keys: 300, dial: dialMemcache}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	v.run(ctx)()
	cnt := v.counts()
	t.Logf("warm_up: gets %d, live keys missed %.1f%%, fills %d, fills refused %d", cnt.gets, 100*cnt.lostRate(),
		routerStat(srv, "cache", "route_fills"), routerStat(srv, "cache", "route_fills_refused"))
	if cnt.stale != 0 || cnt.expired != 0 || cnt.errs != 0 {
		t.Errorf("%d stale, %d past their TTL, %d errors: %q", cnt.stale, cnt.expired, cnt.errs, v.first)
	}
}

// metaFlag returns the value of flag f in a meta reply's first line.
func metaFlag(reply string, f byte) string {
	line, _, _ := strings.Cut(reply, "\r\n")
	for _, tok := range strings.Fields(line)[1:] {
		if tok[0] == f {
			return tok[1:]
		}
	}
	return ""
}
