package proxy_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// countersOf returns the numeric "STAT name value" lines of "stats" at
// addr (a proxy pool or a memcached).
func countersOf(t testing.TB, addr string) map[string]int64 {
	t.Helper()
	c := dial(t, addr)
	defer c.nc.Close()
	m := map[string]int64{}
	for name, v := range statsOf(t, c, "stats\r\n") {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			m[name] = n
		}
	}
	return m
}

// getHits sums memcached's get_hits over servers.
func getHits(t testing.TB, servers []*testserver.Server) int64 {
	t.Helper()
	var n int64
	for _, s := range servers {
		n += countersOf(t, s.Addr)["get_hits"]
	}
	return n
}

// nearPool starts memcached servers and a proxy whose pool has extra keys
// (near_cache among them) and returns them and the pool's address.
func nearPool(t *testing.T, n int, extra string) ([]*testserver.Server, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	servers, yaml := memcachedPool(t, n, extra)
	_, addr := startProxy(t, yaml, "mc")
	return servers, addr
}

// A get the near cache holds is answered without reaching a server, in
// memcached's own bytes, text or with server_protocol meta.
func TestNearCacheHits(t *testing.T) {
	for _, proto := range []string{"text", "meta"} {
		t.Run(proto, func(t *testing.T) {
			servers, addr := nearPool(t, 2, "  near_cache: 1\n  server_protocol: "+proto+"\n")
			c := dial(t, addr)
			value := "a value\r\nwith a line break"
			if got := c.do(fmt.Sprintf("set k 4294967295 0 %d\r\n%s\r\n", len(value), value)); got != "STORED\r\n" {
				t.Fatalf("set: %q", got)
			}
			want := fmt.Sprintf("VALUE k 4294967295 %d\r\n%s\r\nEND\r\n", len(value), value)
			if got := c.do("get k\r\n"); got != want { // a miss: the server answers, the cache fills
				t.Fatalf("first get: %q, want %q", got, want)
			}
			hits := getHits(t, servers)
			for range 50 {
				if got := c.do("get k\r\n"); got != want {
					t.Fatalf("cached get: %q, want %q", got, want)
				}
			}
			if got := getHits(t, servers); got != hits {
				t.Errorf("memcached get_hits went from %d to %d: the cache did not answer", hits, got)
			}
			// The bytes are memcached's own for the same get.
			for _, s := range servers {
				if got, ok := direct(t, s.Addr, "k"); ok && got != "" {
					d := dial(t, s.Addr)
					if mem := d.do("get k\r\n"); mem != want {
						t.Errorf("memcached answers %q, the cache %q", mem, want)
					}
				}
			}
			st := countersOf(t, addr)
			if st["near_cache_hits"] != 50 || st["near_cache_misses"] != 1 || st["near_cache_fills"] != 1 ||
				st["near_cache_items"] != 1 {
				t.Errorf("stats: hits %d misses %d fills %d items %d; want 50 1 1 1", st["near_cache_hits"],
					st["near_cache_misses"], st["near_cache_fills"], st["near_cache_items"])
			}
			// A miss stays a miss (nothing to fill), and a multi-key get
			// is forwarded.
			if got := c.do("get nokey\r\n"); got != "END\r\n" {
				t.Errorf("get nokey: %q", got)
			}
			hits = getHits(t, servers)
			if got := c.do("get k nokey\r\n"); got != want {
				t.Errorf("multi-key get: %q", got)
			}
			if got := getHits(t, servers); got != hits+1 {
				t.Errorf("a multi-key get did not reach the servers: get_hits %d -> %d", hits, got)
			}
		})
	}
}

// Every kind of write through the proxy is seen by the next get at once.
func TestNearCacheWrites(t *testing.T) {
	for _, proto := range []string{"text", "meta"} {
		t.Run(proto, func(t *testing.T) {
			_, addr := nearPool(t, 2, "  near_cache: 1\n  server_protocol: "+proto+"\n")
			c := dial(t, addr)
			fill := func(v string) {
				t.Helper()
				want := fmt.Sprintf("VALUE k 0 %d\r\n%s\r\nEND\r\n", len(v), v)
				for range 2 { // the second comes from the cache
					if got := c.do("get k\r\n"); got != want {
						t.Fatalf("get: %q, want %q", got, want)
					}
				}
			}
			steps := []struct{ req, reply, after string }{
				{"set k 0 0 1\r\n1\r\n", "STORED\r\n", "1"},
				{"incr k 5\r\n", "6\r\n", "6"},
				{"decr k 2\r\n", "4\r\n", "4"},
				{"append k 0 0 1\r\na\r\n", "STORED\r\n", "4a"},
				{"prepend k 0 0 1\r\np\r\n", "STORED\r\n", "p4a"},
				{"replace k 0 0 1\r\nr\r\n", "STORED\r\n", "r"},
				{"set k 0 0 1 noreply\r\n", "", "n"},
				{"ms k 2 T0\r\nms\r\n", "HD\r\n", "ms"},
				{"ma k\r\n", "", "ms"}, // not a number: CLIENT_ERROR, the key stays
				{"touch k 100\r\n", "TOUCHED\r\n", "ms"},
				{"mg k T100 v\r\n", "VA 2\r\nms\r\n", "ms"},
				{"delete k\r\n", "DELETED\r\n", ""},
				{"add k 0 0 1\r\nA\r\n", "STORED\r\n", "A"},
				{"md k q\r\n", "", ""},
				{"set k 0 0 2\r\nok\r\n", "STORED\r\n", "ok"},
				{"gat 100 k\r\n", "VALUE k 0 2\r\nok\r\nEND\r\n", "ok"},
				{"delete k noreply\r\n", "", ""},
			}
			for _, s := range steps {
				req := s.req
				if strings.HasPrefix(req, "set k 0 0 1 noreply") {
					req += "n\r\n"
				}
				// The write and the get go in one write: the get must see
				// the write, as it would on memcached itself.
				c.send(req + "get k\r\n")
				if s.reply != "" {
					if got := c.reply(); got != s.reply {
						t.Fatalf("%q: %q, want %q", req, got, s.reply)
					}
				} else if strings.HasPrefix(req, "ma") {
					if got := c.reply(); !strings.HasPrefix(got, "CLIENT_ERROR") {
						t.Fatalf("%q: %q", req, got)
					}
				}
				want := "END\r\n"
				if s.after != "" {
					want = fmt.Sprintf("VALUE k 0 %d\r\n%s\r\nEND\r\n", len(s.after), s.after)
				}
				if got := c.reply(); got != want {
					t.Fatalf("get after %q: %q, want %q", req, got, want)
				}
				if s.after != "" {
					fill(s.after)
				}
			}
			if st := countersOf(t, addr); st["near_cache_invalidations"] == 0 || st["near_cache_hits"] == 0 {
				t.Errorf("stats: %v", st)
			}
		})
	}
}

// A value cas'd through the proxy replaces the cached one; gets always
// asks the server, whose CAS it returns, and fills only when told to.
func TestNearCacheGets(t *testing.T) {
	for _, fill := range []string{"get", "get gets"} {
		t.Run(fill, func(t *testing.T) {
			servers, addr := nearPool(t, 1, "  near_cache: 1\n  near_cache_fill: "+fill+"\n")
			c := dial(t, addr)
			c.do("set k 7 0 1\r\nv\r\n")
			mem := dial(t, servers[0].Addr).do("gets k\r\n")
			hits := getHits(t, servers)
			for range 3 {
				if got := c.do("gets k\r\n"); got != mem {
					t.Fatalf("gets: %q, memcached %q", got, mem)
				}
			}
			if got := getHits(t, servers); got != hits+3 {
				t.Errorf("gets answered by the cache: get_hits %d -> %d", hits, got)
			}
			c.do("get k\r\n")
			fromCache := getHits(t, servers) == hits+3
			if fromCache != (fill == "get gets") {
				t.Errorf("fill %q: the get after gets came from the cache: %t", fill, fromCache)
			}
			var cas string
			fmt.Sscanf(strings.Fields(mem)[4], "%s", &cas)
			c.do("get k\r\n") // cached now, whatever the fill
			if got := c.do("cas k 7 0 1 " + cas + "\r\nw\r\nget k\r\n"); got != "STORED\r\n" {
				t.Fatalf("cas: %q", got)
			}
			if got := c.reply(); got != "VALUE k 7 1\r\nw\r\nEND\r\n" {
				t.Fatalf("get after cas: %q", got)
			}
		})
	}
}

// flush_all empties the cache of every server's keys.
func TestNearCacheFlushAll(t *testing.T) {
	_, addr := nearPool(t, 3, "  near_cache: 1\n")
	c := dial(t, addr)
	for i := range 20 {
		c.do(fmt.Sprintf("set k%d 0 0 1\r\nv\r\n", i))
		c.do(fmt.Sprintf("get k%d\r\n", i))
	}
	if st := countersOf(t, addr); st["near_cache_items"] != 20 {
		t.Fatalf("items %d, want 20", st["near_cache_items"])
	}
	c.send("flush_all\r\nget k3\r\n")
	if got := c.reply(); got != "OK\r\n" {
		t.Fatalf("flush_all: %q", got)
	}
	if got := c.reply(); got != "END\r\n" {
		t.Fatalf("get after flush_all: %q", got)
	}
	for i := range 20 {
		if got := c.do(fmt.Sprintf("get k%d\r\n", i)); got != "END\r\n" {
			t.Fatalf("get k%d after flush_all: %q", i, got)
		}
	}
	if st := countersOf(t, addr); st["near_cache_items"] != 0 {
		t.Errorf("items %d after flush_all", st["near_cache_items"])
	}
}

// A write that bypasses the proxy is not seen until near_cache_ttl runs
// out: the cached value is served meanwhile, the new one after.
func TestNearCacheTTL(t *testing.T) {
	servers, addr := nearPool(t, 1, "  near_cache: 1\n  near_cache_ttl: 1\n")
	c := dial(t, addr)
	c.do("set k 0 0 3\r\nold\r\n")
	c.do("get k\r\n")
	start := time.Now()
	if got := dial(t, servers[0].Addr).do("set k 0 0 3\r\nnew\r\n"); got != "STORED\r\n" {
		t.Fatalf("direct set: %q", got)
	}
	if got := c.do("get k\r\n"); got != "VALUE k 0 3\r\nold\r\nEND\r\n" {
		t.Fatalf("get right after a write behind the proxy's back: %q (the cache did not serve it)", got)
	}
	for {
		got := c.do("get k\r\n")
		if got == "VALUE k 0 3\r\nnew\r\nEND\r\n" {
			break
		}
		// near_cache_ttl 1 counts whole seconds, as memcached does: the
		// value lives more than 0 and at most 1 second past its fill.
		if time.Since(start) > 2*time.Second {
			t.Fatalf("still %q %v after the direct write", got, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the write behind the proxy's back was visible after %v", time.Since(start).Round(time.Millisecond))
}

// Many clients write and read the same keys through the proxy at once. A
// writer's get right after its own write (in the same batch, or after
// the reply) sees that write; a reader never sees a key's value go back.
func TestNearCacheCoherence(t *testing.T) {
	for _, proto := range []string{"text", "meta"} {
		t.Run(proto, func(t *testing.T) {
			_, addr := nearPool(t, 2, "  near_cache: 4\n  server_connections: 2\n  server_protocol: "+proto+"\n")
			const writers, readers, keysPer, rounds = 4, 6, 4, 300
			var wg sync.WaitGroup
			errs := make(chan string, 16)
			fail := func(format string, args ...any) {
				select {
				case errs <- fmt.Sprintf(format, args...):
				default:
				}
			}
			stop := make(chan struct{})
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dial(t, addr)
					for n := 1; n <= rounds; n++ {
						k := fmt.Sprintf("w%d-%d", w, n%keysPer)
						v := strconv.Itoa(n)
						want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v)
						set := fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v)
						var got string
						switch n % 3 {
						case 0: // write, reply, then get
							if got = c.do(set); got == "STORED\r\n" {
								got = c.do("get " + k + "\r\n")
							}
						case 1: // write and get in one batch
							c.send(set + "get " + k + "\r\n")
							if got = c.reply(); got == "STORED\r\n" {
								got = c.reply()
							}
						case 2: // noreply, then get in the same batch
							got = c.do(fmt.Sprintf("set %s 0 0 %d noreply\r\n%s\r\nget %s\r\n", k, len(v), v, k))
						}
						if got != want {
							fail("writer: get %s after writing %s: %q", k, v, got)
							return
						}
					}
				}()
			}
			var rwg sync.WaitGroup
			for range readers {
				rwg.Add(1)
				go func() {
					defer rwg.Done()
					c := dial(t, addr)
					last := map[string]int{}
					for {
						select {
						case <-stop:
							return
						default:
						}
						k := fmt.Sprintf("w%d-%d", rand.IntN(writers), rand.IntN(keysPer))
						got := c.do("get " + k + "\r\n")
						if got == "END\r\n" {
							continue
						}
						lines := strings.Split(got, "\r\n")
						n, err := strconv.Atoi(lines[1])
						if len(lines) != 4 || !strings.HasPrefix(lines[0], "VALUE "+k+" 0 ") || err != nil {
							fail("reader: get %s: %q", k, got)
							return
						}
						if n < last[k] {
							fail("reader: %s went back from %d to %d", k, last[k], n)
							return
						}
						last[k] = n
					}
				}()
			}
			wg.Wait()
			close(stop)
			rwg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			st := countersOf(t, addr)
			t.Logf("near cache: %d hits, %d misses, %d fills, %d invalidations", st["near_cache_hits"],
				st["near_cache_misses"], st["near_cache_fills"], st["near_cache_invalidations"])
			if st["near_cache_hits"] == 0 || st["near_cache_fills"] == 0 {
				t.Error("the cache was never used: the test shows nothing")
			}
		})
	}
}

// A reload that keeps near_cache and near_cache_ttl keeps the cached
// values; one that changes the size starts an empty cache.
func TestNearCacheReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	port := testserver.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	near := "  near_cache: 1\n  near_cache_ttl: 60\n"
	_, reload := reloadable(t, poolYAML("mc", port, near, mc))
	c := dial(t, addr)
	c.do("set k 0 0 3\r\nold\r\n")
	c.do("get k\r\n")
	dial(t, mc.Addr).do("set k 0 0 3\r\nnew\r\n") // behind the proxy's back: only a new cache sees it
	const old, fresh = "VALUE k 0 3\r\nold\r\nEND\r\n", "VALUE k 0 3\r\nnew\r\nEND\r\n"
	for _, step := range []struct {
		extra, want string
	}{
		{near + "  timeout: 2000\n  near_cache_fill: get gets\n", old}, // another key changed: the cache stays
		{near + "  timeout: 3000\n", old},
		{"  near_cache: 2\n  near_cache_ttl: 60\n", fresh}, // a new size: a new, empty cache
		{"", fresh},
	} {
		if err := reload(poolYAML("mc", port, step.extra, mc)); err != nil {
			t.Fatal(err)
		}
		c = dial(t, addr) // a new client is on the new pool at once
		if got := c.do("get k\r\n"); got != step.want {
			t.Fatalf("after a reload to\n%s: get %q, want %q", step.extra, got, step.want)
		}
		if step.want == fresh {
			dial(t, mc.Addr).do("set k 0 0 3\r\nnew\r\n")
		}
	}
}
