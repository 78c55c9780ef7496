package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// reloadable runs a proxy on a YAML with fixed ports and returns a function
// that reloads it with another YAML.
func reloadable(t *testing.T, yaml string) (*proxy.Server, func(string) error) {
	t.Helper()
	parse := func(y string) *config.Config {
		cfg, err := config.Parse([]byte(y), "reload.yml")
		if err != nil {
			t.Fatalf("config: %v\n%s", err, y)
		}
		return cfg
	}
	srv := runProxy(t, parse(yaml), proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DrainTimeout: 3 * time.Second})
	return srv, func(y string) error { return srv.Reload(parse(y)) }
}

func poolYAML(name string, port int, extra string, servers ...*testserver.Server) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  listen: 127.0.0.1:%d\n%s  servers:\n", name, port, extra)
	for _, s := range servers {
		fmt.Fprintf(&b, "    - %s:1\n", s.Addr)
	}
	return b.String()
}

// loadResult counts what pipelining clients saw.
type loadResult struct {
	ok, misses, bad atomic.Int64
	errs            chan string
}

// runLoad runs n clients against addr until stop closes; each pipelines
// batches of set+get on its own keys and checks every reply in order: a set
// must be STORED, a get must return the value just set or (when a reload
// moved the key to another server between the two) a miss.
func runLoad(t *testing.T, addr string, n int, stop chan struct{}) (*loadResult, *sync.WaitGroup) {
	res := &loadResult{errs: make(chan string, 100)}
	var wg sync.WaitGroup
	for ci := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				res.errs <- err.Error()
				return
			}
			defer nc.Close()
			c := &client{t: t, nc: nc, r: newBufReader(nc)}
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				var req strings.Builder
				for i := range 20 {
					k := fmt.Sprintf("c%d-%d", ci, i)
					v := fmt.Sprintf("v%d", round)
					fmt.Fprintf(&req, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", k, len(v), v, k)
				}
				if _, err := io.WriteString(nc, req.String()); err != nil {
					res.errs <- "write: " + err.Error()
					return
				}
				for i := range 20 {
					k := fmt.Sprintf("c%d-%d", ci, i)
					v := fmt.Sprintf("v%d", round)
					if got := c.reply(); got != "STORED\r\n" {
						res.bad.Add(1)
						select {
						case res.errs <- fmt.Sprintf("set %s: %q", k, got):
						default:
						}
						continue
					}
					switch got := c.reply(); got {
					case fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v):
						res.ok.Add(1)
					case "END\r\n":
						res.misses.Add(1)
					default:
						res.bad.Add(1)
						select {
						case res.errs <- fmt.Sprintf("get %s: %q", k, got):
						default:
						}
					}
				}
			}
		}()
	}
	return res, &wg
}

func (r *loadResult) check(t *testing.T) {
	t.Helper()
	close(r.errs)
	for e := range r.errs {
		t.Error(e)
	}
	t.Logf("load: %d good gets, %d misses across a server change, %d bad replies", r.ok.Load(), r.misses.Load(), r.bad.Load())
	if r.ok.Load() == 0 {
		t.Fatal("the load did nothing")
	}
	if r.bad.Load() != 0 {
		t.Fatalf("%d bad replies", r.bad.Load())
	}
}

// TestReloadTimeout changes the timeout under load: nothing is dropped and
// the new timeout is in force after the reload.
func TestReloadTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	hang := hangServer(t, true)
	mcPort, hangPort := testserver.FreePort(t), testserver.FreePort(t)
	yaml := func(timeout int) string {
		extra := fmt.Sprintf("  timeout: %d\n  server_failure_limit: 1000\n", timeout)
		return poolYAML("mc", mcPort, extra, mc) +
			fmt.Sprintf("hang:\n  listen: 127.0.0.1:%d\n%s  servers:\n    - %s:1\n", hangPort, extra, hang)
	}
	_, reload := reloadable(t, yaml(200))
	stop := make(chan struct{})
	res, wg := runLoad(t, fmt.Sprintf("127.0.0.1:%d", mcPort), 4, stop)
	timed := func() time.Duration {
		c := dial(t, fmt.Sprintf("127.0.0.1:%d", hangPort))
		start := time.Now()
		if got := c.do("get k\r\n"); got != "SERVER_ERROR backend failure: timeout\r\n" {
			t.Fatalf("hanging server: %q", got)
		}
		return time.Since(start)
	}
	before := timed()
	if err := reload(yaml(600)); err != nil {
		t.Fatal(err)
	}
	after := timed()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("timeout before reload %v, after %v", before, after)
	if before > 400*time.Millisecond || after < 500*time.Millisecond || after > 800*time.Millisecond {
		t.Fatalf("timeout not changed by reload: before %v, after %v", before, after)
	}
	res.check(t)
	if res.misses.Load() != 0 {
		t.Fatalf("%d misses: the servers did not change, so no key may miss", res.misses.Load())
	}
}

// TestReloadSwapServers moves a pool from servers A/B to C/D under load.
func TestReloadSwapServers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	var s [4]*testserver.Server
	for i := range s {
		s[i] = testserver.StartMemcached(t)
	}
	port := testserver.FreePort(t)
	extra := "  timeout: 2000\n"
	_, reload := reloadable(t, poolYAML("mc", port, extra, s[0], s[1]))
	stop := make(chan struct{})
	res, wg := runLoad(t, fmt.Sprintf("127.0.0.1:%d", port), 8, stop)
	time.Sleep(200 * time.Millisecond)
	if err := reload(poolYAML("mc", port, extra, s[2], s[3])); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	res.check(t)
	// The new servers took the keys written after the swap.
	c := dial(t, fmt.Sprintf("127.0.0.1:%d", port))
	c.do("set after-swap 0 0 1\r\nx\r\n")
	_, on2 := direct(t, s[2].Addr, "after-swap")
	_, on3 := direct(t, s[3].Addr, "after-swap")
	if !on2 && !on3 {
		t.Fatal("a key set after the reload is not on the new servers")
	}
}

// TestReloadAddRemovePools: a removed pool's clients get their in-flight
// replies and then a closed connection; a new pool serves.
func TestReloadAddRemovePools(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	slow := slowServer(t, 300*time.Millisecond)
	aPort, bPort, cPort := testserver.FreePort(t), testserver.FreePort(t), testserver.FreePort(t)
	a := poolYAML("a", aPort, "  timeout: 2000\n", mc)
	b := fmt.Sprintf("b:\n  listen: 127.0.0.1:%d\n  timeout: 2000\n  servers:\n    - %s:1\n", bPort, slow)
	cp := poolYAML("c", cPort, "  timeout: 2000\n", mc)
	_, reload := reloadable(t, a+b)

	bc := dial(t, fmt.Sprintf("127.0.0.1:%d", bPort))
	bc.send("get slow1\r\nget slow2\r\n") // in flight at the reload
	time.Sleep(50 * time.Millisecond)
	if err := reload(a + cp); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if got := bc.reply(); got != "END\r\n" {
			t.Fatalf("in-flight request %d of the removed pool: %q", i, got)
		}
	}
	bc.expectClosed()
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", bPort), time.Second); err == nil {
		t.Fatal("the removed pool still listens")
	}
	if got := dial(t, fmt.Sprintf("127.0.0.1:%d", cPort)).do("set n 0 0 1\r\nx\r\n"); got != "STORED\r\n" {
		t.Fatalf("new pool: %q", got)
	}
	if got := dial(t, fmt.Sprintf("127.0.0.1:%d", aPort)).do("get n\r\n"); got != "VALUE n 0 1\r\nx\r\nEND\r\n" {
		t.Fatalf("kept pool: %q", got)
	}
}

// TestReloadPortInUse: a reload whose new listener cannot bind is refused,
// the old config keeps serving and the ports it opened are released.
func TestReloadPortInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	aPort, freePort := testserver.FreePort(t), testserver.FreePort(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	a := poolYAML("a", aPort, "", mc)
	srv, reload := reloadable(t, a)
	err = reload(a + poolYAML("b", freePort, "", mc) + poolYAML("c", busyPort, "", mc))
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("reload onto a busy port: %v", err)
	}
	if got := dial(t, fmt.Sprintf("127.0.0.1:%d", aPort)).do("version\r\n"); !strings.HasPrefix(got, "VERSION") {
		t.Fatalf("old config not serving: %q", got)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", freePort))
	if err != nil {
		t.Fatalf("the refused reload kept port %d: %v", freePort, err)
	}
	ln.Close()
	if st := srv.Stats(); st.ReloadFailures != 1 || st.Reloads != 0 {
		t.Fatalf("reloads %d, failures %d", st.Reloads, st.ReloadFailures)
	}
}

// TestReloadMany reloads 100 times under load, alternating two configs:
// zero failed requests, and no goroutines or sockets leak.
func TestReloadMany(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	var s [3]*testserver.Server
	for i := range s {
		s[i] = testserver.StartMemcached(t)
	}
	port := testserver.FreePort(t)
	cfgs := []string{
		poolYAML("mc", port, "  timeout: 2000\n", s[0], s[1], s[2]),
		poolYAML("mc", port, "  timeout: 3000\n  server_connections: 2\n", s[0], s[1], s[2]),
	}
	_, reload := reloadable(t, cfgs[0])
	// Open a socket to every server first, so the baseline counts them.
	warm := dial(t, fmt.Sprintf("127.0.0.1:%d", port))
	for _, ks := range keysFor(t, []string{s[0].Addr, s[1].Addr, s[2].Addr}, 1) {
		warm.do("get " + ks[0] + "\r\n")
	}
	warm.nc.Close()
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)
	stop := make(chan struct{})
	res, wg := runLoad(t, fmt.Sprintf("127.0.0.1:%d", port), 8, stop)
	start := time.Now()
	for i := range 100 {
		if err := reload(cfgs[(i+1)%2]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	close(stop)
	wg.Wait()
	res.check(t)
	if res.misses.Load() != 0 {
		t.Fatalf("%d misses: the servers never changed", res.misses.Load())
	}
	// Replaced backends close after their drain; wait for them.
	deadline := time.Now().Add(10 * time.Second)
	var g1, fd1 int
	for {
		runtime.GC()
		g1, fd1 = runtime.NumGoroutine(), openFDs(t)
		if (g1 <= g0+2 && fd1 <= fd0+2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("100 reloads in %v; goroutines %d -> %d, open fds %d -> %d", took, g0, g1, fd0, fd1)
	if g1 > g0+2 || fd1 > fd0+2 {
		t.Fatalf("leak after 100 reloads: goroutines %d -> %d, fds %d -> %d", g0, g1, fd0, fd1)
	}
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// slowServer answers the version handshake at once and every other request
// line with END after delay.
func slowServer(t *testing.T, delay time.Duration) string {
	t.Helper()
	return testserver.Fake(t, func(nc net.Conn) {
		r := newBufReader(nc)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if l != "version\r\n" {
				time.Sleep(delay)
				nc.Write([]byte("END\r\n"))
				continue
			}
			nc.Write([]byte("VERSION 1.6.18\r\n"))
		}
	})
}

func newBufReader(nc net.Conn) *bufio.Reader { return bufio.NewReaderSize(nc, 64<<10) }

// TestReloadPortZero: a pool on port 0 gets a fresh port at each reload and
// the old listener closes (it used to stay open and hang Shutdown).
func TestReloadPortZero(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	yaml := poolYAML("mc", 0, "", mc)
	srv, reload := reloadable(t, yaml)
	before := srv.Addr("mc").String()
	if err := reload(yaml); err != nil {
		t.Fatal(err)
	}
	after := srv.Addr("mc").String()
	if before == after {
		t.Fatalf("port-0 pool kept %s", before)
	}
	if _, err := net.DialTimeout("tcp", before, time.Second); err == nil {
		t.Fatalf("old port-0 listener %s still accepts", before)
	}
	if got := dial(t, after).do("version\r\n"); !strings.HasPrefix(got, "VERSION") {
		t.Fatalf("new listener: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
