package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// spoolRig is a memcache pool with delete_spool over n real memcached
// servers, each behind a fault proxy that can refuse connections while
// the server keeps its memory.
type spoolRig struct {
	servers []*testserver.Server
	faults  []*faultproxy.Proxy
	path    string // the spool's file
	cfg     *config.Config
}

func newSpoolRig(t *testing.T, n int, extra string) *spoolRig {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	rg := &spoolRig{path: filepath.Join(t.TempDir(), "deletes.spool")}
	var b strings.Builder
	fmt.Fprintf(&b, "mc:\n  listen: 127.0.0.1:0\n  server_retry_timeout: 100\n  server_failure_limit: 1\n  timeout: 1000\n  hash: md5\n%s", extra)
	fmt.Fprintf(&b, "  delete_spool:\n    path: %s\n", rg.path)
	b.WriteString("  servers:\n")
	for i := range n {
		s := testserver.StartMemcached(t)
		fp := faultproxy.New(t, s.Addr)
		rg.servers = append(rg.servers, s)
		rg.faults = append(rg.faults, fp)
		fmt.Fprintf(&b, "    - %s:1 mc%d\n", fp.Addr(), i)
	}
	cfg, err := config.Parse([]byte(b.String()), "test.yml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, b.String())
	}
	rg.cfg = cfg
	return rg
}

// start runs a proxy on the rig's configuration; stop shuts it down (and
// the test's end does, if stop was not called).
func (rg *spoolRig) start(t *testing.T) (addr string, stop func()) {
	t.Helper()
	srv, err := proxy.New(rg.cfg, proxy.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv.Addr("mc").String(), stop
}

// victims sets count keys through the proxy at addr and returns them.
func victims(t *testing.T, addr string, count int) []string {
	t.Helper()
	c := dial(t, addr)
	keys := make([]string, count)
	for i := range keys {
		keys[i] = fmt.Sprintf("victim:%d", i)
		if got := c.do(fmt.Sprintf("set %s 0 0 3\r\nold\r\n", keys[i])); got != "STORED\r\n" {
			t.Fatalf("set %s: %q", keys[i], got)
		}
	}
	return keys
}

// deleteAll deletes keys through the proxy at addr, in order, while
// server 0 is down, and returns the keys whose delete failed (server 0's)
// in order. It checks that server 0 still holds each of them: without
// the spool, it would serve the deleted value when back.
func (rg *spoolRig) deleteAll(t *testing.T, addr string, keys []string) []string {
	t.Helper()
	c := dial(t, addr)
	var failed []string
	for _, k := range keys {
		switch got := c.do("delete " + k + "\r\n"); {
		case got == "DELETED\r\n":
		case strings.HasPrefix(got, "SERVER_ERROR"):
			failed = append(failed, k)
		default:
			t.Fatalf("delete %s: %q", k, got)
		}
	}
	if len(failed) == 0 {
		t.Fatal("no key of the stopped server among the victims")
	}
	for _, k := range failed {
		if v, ok := direct(t, rg.servers[0].Addr, k); !ok || v != "old" {
			t.Fatalf("server 0 lost %s (%q, %v): the test could not tell a stale read", k, v, ok)
		}
	}
	return failed
}

// expectMisses gets every key through the proxy at addr and fails on a
// hit: a deleted value served.
func expectMisses(t *testing.T, addr string, keys []string) {
	t.Helper()
	c := dial(t, addr)
	for _, k := range keys {
		if got := c.do("get " + k + "\r\n"); got != "END\r\n" {
			t.Errorf("get %s after its delete: %q", k, got)
		}
	}
}

// waitStat waits until the pool's counter name at addr is want.
func waitStat(t *testing.T, addr, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := countersOf(t, addr)[name]
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %d, want %d", name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeleteSpoolNoEject: under auto_eject_hosts false, deletes and
// writes that cannot reach a stopped server, under a verified load, are
// replayed before the server serves again: no read of the proxy returns
// a value older than the last acknowledged write or delete of its key.
func TestDeleteSpoolNoEject(t *testing.T) {
	rg := newSpoolRig(t, 3, "  auto_eject_hosts: false\n  health_check_interval: 100\n")
	addr, _ := rg.start(t)
	keys := victims(t, addr, 60)
	load := startSpoolLoad(t, addr, 4, 40)
	load.run(300 * time.Millisecond)

	rg.faults[0].Stop()
	failed := rg.deleteAll(t, addr, keys)
	load.run(300 * time.Millisecond)
	if n := countersOf(t, addr)["delete_spool_pending"]; n < int64(len(failed)) {
		t.Fatalf("pending %d, want at least the %d failed deletes", n, len(failed))
	}

	if err := rg.faults[0].Start(); err != nil {
		t.Fatal(err)
	}
	load.run(500 * time.Millisecond)
	waitStat(t, addr, "delete_spool_pending", 0)
	expectMisses(t, addr, keys)
	load.stop(t)
	st := countersOf(t, addr)
	if st["delete_spool_replayed"] < int64(len(failed)) || st["delete_spool_pending"] != 0 {
		t.Errorf("replayed %d, pending %d; want at least %d replayed, none pending",
			st["delete_spool_replayed"], st["delete_spool_pending"], len(failed))
	}
	t.Logf("%d victims deleted while down, %d load requests (%d errors, %d spooled)",
		len(failed), load.ops.Load(), load.errs.Load(), st["delete_spool_spooled"])
}

// TestDeleteSpoolRestart: deletes spooled while a server was down are
// replayed by the next proxy on the same spool, once the server is back;
// with the file's last record cut short, every record before it is.
func TestDeleteSpoolRestart(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "cut"}[cut], func(t *testing.T) {
			rg := newSpoolRig(t, 3, "  auto_eject_hosts: false\n  server_connections: 2\n")
			addr, stop := rg.start(t)
			keys := victims(t, addr, 60)
			load := startSpoolLoad(t, addr, 4, 40)
			load.run(200 * time.Millisecond)
			rg.faults[0].Stop()
			load.run(200 * time.Millisecond)
			failed := rg.deleteAll(t, addr, keys) // the last records: the cut one is a victim's
			stop()

			replayed := failed
			if cut {
				fi, err := os.Stat(rg.path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(rg.path, fi.Size()-3); err != nil {
					t.Fatal(err)
				}
				replayed = failed[:len(failed)-1]
			}
			if err := rg.faults[0].Start(); err != nil {
				t.Fatal(err)
			}
			addr, _ = rg.start(t)
			pending := countersOf(t, addr)["delete_spool_pending"]
			expectMisses(t, addr, replayed)
			load.addr = addr
			load.run(300 * time.Millisecond)
			load.stop(t)
			st := countersOf(t, addr)
			if st["delete_spool_replayed"] != pending || pending < int64(len(replayed)) || st["delete_spool_pending"] != 0 {
				t.Errorf("replayed %d of %d pending at start (%d victims), pending %d now",
					st["delete_spool_replayed"], pending, len(replayed), st["delete_spool_pending"])
			}
			t.Logf("%d victims deleted while down, %d deletes replayed by the next proxy, %d load requests (%d errors)",
				len(failed), st["delete_spool_replayed"], load.ops.Load(), load.errs.Load())
			if want := map[bool]int64{false: 0, true: 1}[cut]; st["delete_spool_corrupt_tail_cut"] != want {
				t.Errorf("corrupt_tail_cut %d, want %d", st["delete_spool_corrupt_tail_cut"], want)
			}
		})
	}
}

// spoolLoad is a verified load: each client owns its keys and knows, for
// each, the values a read may return (a miss is ""): after an
// acknowledged set its value alone; after a set that failed, a miss or
// its value (a failed write is spooled as a delete); after a delete,
// acknowledged or not, a miss.
type spoolLoad struct {
	t                 *testing.T
	addr              string
	clients, keys     int
	ops, errs, stales atomic.Int64
	running           chan struct{}
	wg                sync.WaitGroup
	mu                sync.Mutex
	staleSeen         []string
}

func startSpoolLoad(t *testing.T, addr string, clients, keys int) *spoolLoad {
	return &spoolLoad{t: t, addr: addr, clients: clients, keys: keys}
}

// run drives the load for d.
func (l *spoolLoad) run(d time.Duration) {
	l.running = make(chan struct{})
	for ci := range l.clients {
		l.wg.Add(1)
		go l.client(ci)
	}
	time.Sleep(d)
	close(l.running)
	l.wg.Wait()
}

// stop checks that no read was stale.
func (l *spoolLoad) stop(t *testing.T) {
	t.Helper()
	if n := l.stales.Load(); n != 0 {
		t.Errorf("%d stale reads, first %v", n, l.staleSeen[:min(5, len(l.staleSeen))])
	}
	if l.ops.Load() == 0 {
		t.Error("the load made no request")
	}
}

// models are each client's allowed values per key, kept across runs.
var spoolModels sync.Map // *spoolLoad+client -> map[string]map[string]bool

func (l *spoolLoad) model(ci int) map[string]map[string]bool {
	m, _ := spoolModels.LoadOrStore(fmt.Sprintf("%p/%d", l, ci), map[string]map[string]bool{})
	return m.(map[string]map[string]bool)
}

func (l *spoolLoad) client(ci int) {
	defer l.wg.Done()
	nc, err := net.Dial("tcp", l.addr)
	if err != nil {
		l.t.Errorf("dial: %v", err)
		return
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	model := l.model(ci)
	rng := rand.New(rand.NewPCG(uint64(ci), uint64(time.Now().UnixNano())))
	for seq := 0; ; seq++ {
		select {
		case <-l.running:
			return
		default:
		}
		key := fmt.Sprintf("load:%d:%d", ci, rng.IntN(l.keys))
		var req string
		op := rng.IntN(10)
		val := fmt.Sprintf("v%d", seq)
		switch {
		case op < 4:
			req = fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(val), val)
		case op < 8:
			req = "get " + key + "\r\n"
		default:
			req = "delete " + key + "\r\n"
		}
		nc.SetDeadline(time.Now().Add(ioTimeout))
		if _, err := io.WriteString(nc, req); err != nil {
			l.t.Errorf("write: %v", err)
			return
		}
		got, err := readSwapReply(r)
		if err != nil {
			l.t.Errorf("read: %v", err)
			return
		}
		l.ops.Add(1)
		failed := strings.HasPrefix(got, "SERVER_ERROR")
		if failed {
			l.errs.Add(1)
		}
		switch {
		case op < 4 && got == "STORED\r\n":
			model[key] = map[string]bool{val: true}
		case op < 4 && failed:
			model[key] = map[string]bool{"": true, val: true}
		case op < 8 && !failed:
			l.check(model, key, got)
		case op >= 8:
			model[key] = map[string]bool{"": true}
		}
	}
}

// check compares a get's reply with what key may hold.
func (l *spoolLoad) check(model map[string]map[string]bool, key, got string) {
	allowed, known := model[key]
	if !known {
		return // never written by this load
	}
	v := ""
	if got != "END\r\n" {
		parts := strings.SplitN(got, "\r\n", 3)
		if len(parts) < 2 {
			return
		}
		v = parts[1]
	}
	if !allowed[v] {
		l.stales.Add(1)
		l.mu.Lock()
		l.staleSeen = append(l.staleSeen, fmt.Sprintf("%s=%q", key, v))
		l.mu.Unlock()
	}
}

// onServer returns the keys server 0 holds.
func (rg *spoolRig) onServer(t *testing.T, keys []string) []string {
	t.Helper()
	var on []string
	for _, k := range keys {
		if _, ok := direct(t, rg.servers[0].Addr, k); ok {
			on = append(on, k)
		}
	}
	if len(on) == 0 {
		t.Fatal("no key on server 0")
	}
	return on
}

// waitBack gets keys through the proxy at addr, failing on any hit, until
// nothing is pending in the spool: server 0 has a socket again, which
// replayed its deletes before it served.
func waitBack(t *testing.T, addr string, keys []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for countersOf(t, addr)["delete_spool_pending"] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the spool never emptied")
		}
		c := dial(t, addr)
		for _, k := range keys {
			if got := c.do("get " + k + "\r\n"); strings.HasPrefix(got, "VALUE") {
				t.Fatalf("get %s: %q", k, got)
			}
		}
		c.nc.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeleteSpoolEjected: under auto_eject_hosts, the deletes of an
// ejected server's keys go to the servers that take them meanwhile, and
// are spooled for it: back in the ring, it does not serve the values
// deleted while it was out (twemproxy's stale read after an ejection).
func TestDeleteSpoolEjected(t *testing.T) {
	rg := newSpoolRig(t, 3, "  auto_eject_hosts: true\n  health_check_interval: 100\n")
	addr, _ := rg.start(t)
	keys := victims(t, addr, 60)
	on := rg.onServer(t, keys)
	rg.faults[0].Stop()
	c := dial(t, addr)
	deadline := time.Now().Add(5 * time.Second)
	for { // the first failure ejects it; then its keys go elsewhere
		if got := c.do("get " + on[0] + "\r\n"); got == "END\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server 0 never ejected")
		}
	}
	for _, k := range keys {
		if got := c.do("delete " + k + "\r\n"); got != "DELETED\r\n" && got != "NOT_FOUND\r\n" {
			t.Fatalf("delete %s while server 0 is out: %q", k, got)
		}
	}
	if got := countersOf(t, addr)["delete_spool_pending"]; got != int64(len(on)) {
		t.Fatalf("pending %d, want server 0's %d keys", got, len(on))
	}
	if err := rg.faults[0].Start(); err != nil {
		t.Fatal(err)
	}
	waitBack(t, addr, on)
	expectMisses(t, addr, keys)
	if got := countersOf(t, addr)["delete_spool_replayed"]; got != int64(len(on)) {
		t.Errorf("replayed %d, want %d", got, len(on))
	}
}

// TestDeleteSpoolReload: a reload that keeps the spool's path hands the
// spool on, its pending deletes with it.
func TestDeleteSpoolReload(t *testing.T) {
	rg := newSpoolRig(t, 3, "  auto_eject_hosts: false\n  health_check_interval: 100\n")
	srv := runProxy(t, rg.cfg, proxy.Options{Logger: testLogger(t)})
	addr := srv.Addr("mc").String()
	keys := victims(t, addr, 60)
	rg.faults[0].Stop()
	failed := rg.deleteAll(t, addr, keys)

	next := *rg.cfg
	next.Pools = []*config.Pool{ptr(*rg.cfg.Pools[0])}
	next.Pools[0].Timeout = 2 * time.Second // new backends, the same spool
	if err := srv.Reload(&next); err != nil {
		t.Fatalf("reload: %v", err)
	}
	addr = srv.Addr("mc").String() // port 0: the reload bound a new one
	if got := countersOf(t, addr)["delete_spool_pending"]; got != int64(len(failed)) {
		t.Fatalf("pending %d after the reload, want %d", got, len(failed))
	}
	if err := rg.faults[0].Start(); err != nil {
		t.Fatal(err)
	}
	waitBack(t, addr, failed)
	expectMisses(t, addr, keys)
}

func ptr[T any](v T) *T { return &v }

// TestDeleteSpoolTimeout: a delete whose reply never comes (the path lost
// its bytes: a stopped server's socket looks the same) is spooled, and
// the server's next socket sends it before the get that follows.
func TestDeleteSpoolTimeout(t *testing.T) {
	rg := newSpoolRig(t, 3, "  auto_eject_hosts: false\n")
	addr, _ := rg.start(t)
	keys := victims(t, addr, 30)
	on := rg.onServer(t, keys)
	if n := rg.faults[0].LoseAll(); n == 0 {
		t.Fatal("no connection to server 0 to lose")
	}
	c := dial(t, addr)
	if got := c.do("delete " + on[0] + "\r\n"); got != "SERVER_ERROR backend failure: timeout\r\n" {
		t.Fatalf("delete over a lost path: %q", got)
	}
	if v, ok := direct(t, rg.servers[0].Addr, on[0]); !ok || v != "old" {
		t.Fatalf("server 0 lost %s: the test could not tell a stale read", on[0])
	}
	waitBack(t, addr, on[:1])
	expectMisses(t, addr, on[:1])
}
