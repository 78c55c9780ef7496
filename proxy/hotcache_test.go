package proxy_test

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mcStat reads one counter of a memcached's "stats" directly.
func mcStat(t testing.TB, addr, name string) int64 {
	t.Helper()
	c := dial(t, addr)
	c.send("stats\r\n")
	for {
		l := c.line()
		if l == "END\r\n" {
			t.Fatalf("stats of %s: no %s", addr, name)
		}
		if v, ok := strings.CutPrefix(l, "STAT "+name+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
}

// TestNearCacheHot runs a Zipf load over a million keys plus one key that
// takes 30% of the gets, through a pool whose near cache keeps only its
// hot keys (near_cache_hot), and through the same pool without it: the
// hot key's gets that reach its server fall by at least 90%, the other
// keys do not fill the cache, and a set of the hot key through the proxy
// is seen by the next get.
func TestNearCacheHot(t *testing.T) {
	servers, _ := memcachedPool(t, 2, "")
	pool := func(extra string) string {
		return fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  hot_keys: 5\n%s  servers:\n    - %s:1\n    - %s:1\n",
			extra, servers[0].Addr, servers[1].Addr)
	}
	_, hotAddr := startProxy(t, pool("  near_cache: 16\n  near_cache_hot: true\n"), "mc")
	_, plainAddr := startProxy(t, pool(""), "mc")
	place := redisPlacement(t, []string{servers[0].Addr, servers[1].Addr}, "")
	const hot = "hot:key"
	home := place(hot)
	if got := dial(t, plainAddr).do("set " + hot + " 0 0 2\r\nv0\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}

	// run sends gets for d: 30% the hot key, the rest Zipf over a million
	// keys; it returns the hot key's gets and the others' gets that went to
	// the hot key's server.
	run := func(addr string, d time.Duration) (hotGets, otherHome int64) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dial(t, addr)
				rng := rand.New(rand.NewSource(int64(w)))
				zipf := rand.NewZipf(rng, 1.1, 1, 1_000_000)
				var h, o int64
				for end := time.Now().Add(d); time.Now().Before(end); {
					key := hot
					if rng.Float64() >= 0.3 {
						key = "z:" + strconv.FormatUint(zipf.Uint64(), 10)
						if place(key) == home {
							o++
						}
					} else {
						h++
					}
					if r := c.do("get " + key + "\r\n"); !strings.HasSuffix(r, "END\r\n") {
						t.Errorf("get %s: %q", key, r)
						return
					}
				}
				mu.Lock()
				hotGets, otherHome = hotGets+h, otherHome+o
				mu.Unlock()
			}()
		}
		wg.Wait()
		return hotGets, otherHome
	}
	// reached returns the share of the hot key's gets that reached its
	// server during run.
	reached := func(addr string) (float64, int64) {
		before := mcStat(t, home, "cmd_get")
		hotGets, otherHome := run(addr, 1500*time.Millisecond)
		atHome := mcStat(t, home, "cmd_get") - before
		return float64(atHome-otherHome) / float64(hotGets), hotGets
	}
	plainShare, n1 := reached(plainAddr)
	run(hotAddr, 500*time.Millisecond) // the key becomes hot
	hotShare, n2 := reached(hotAddr)
	t.Logf("share of the hot key's gets that reached its server: %.3f without the hot-key cache (%d gets), %.3f with it (%d gets)",
		plainShare, n1, hotShare, n2)
	if plainShare < 0.9 || plainShare > 1.1 {
		t.Errorf("without the cache %.3f of the hot key's gets reached its server, want about all: the measure is off", plainShare)
	}
	if hotShare > 0.1 {
		t.Errorf("with the hot-key cache %.3f of the hot key's gets reached its server, want at most 0.1", hotShare)
	}
	st := countersOf(t, hotAddr)
	if fills := st["near_cache_fills"]; fills < 1 || fills > 20 {
		t.Errorf("near_cache_fills %d: want the hot key's few, not the Zipf keys'", fills)
	}

	// A write through the proxy is seen by the next read.
	c := dial(t, hotAddr)
	for i := range 5 {
		v := "v" + strconv.Itoa(i+1)
		if got := c.do("set " + hot + " 0 0 2\r\n" + v + "\r\n"); got != "STORED\r\n" {
			t.Fatalf("set: %q", got)
		}
		if got, want := c.do("get "+hot+"\r\n"), "VALUE "+hot+" 0 2\r\n"+v+"\r\nEND\r\n"; got != want {
			t.Fatalf("get after set %d: %q, want %q", i, got, want)
		}
	}
}
