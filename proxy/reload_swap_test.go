package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// The acceptance test for "a reload under load drops nothing", for a native
// YAML pool and a Lua-routed pool alike: 30 clients, each on its own
// connection, write and read back their own keys while the pool is reloaded
// 16 times between two layouts that swap a backend ({m1, m2} and {m2, m3}),
// so every reload keeps one backend, removes one and adds one, and keys
// move. Each reload waits until every client has completed swapStride more
// requests since the previous one, so it happens under load.
//
// A set and the get after it on one connection stay in order across a
// reload (the session drains before it switches pool), but they may reach
// different servers when the reload falls between them and the key moved:
// that miss is the layout's doing, not a dropped request, so it is excused
// when a reload overlapped the pair, and checked afterwards (the key must be
// on some server with the value stored).
//
// Every reload must also log backends_kept > 0: m2 is in both layouts, so a
// reload that keeps nothing reopens a backend it could have carried over.
// On the Lua pool this test fails until the router life cycle is rewritten:
// the old router closes its backends when nothing is being routed instead
// of after its in-flight requests drain ("SERVER_ERROR backend failure:
// closed"), and its backends are never carried over (backends_kept=0).

const (
	swapClients = 30
	swapReloads = 16
	swapStride  = 40 // requests every client completes between two reloads
	swapIO      = 10 * time.Second
)

// swapLayouts are the servers (indexes into the test's three memcached) of
// the two layouts the reloads alternate; both hold server 1.
var swapLayouts = [2][]int{{0, 1}, {1, 2}}

func TestReloadSwapUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	for _, kind := range []string{"yaml", "lua"} {
		t.Run(kind, func(t *testing.T) { testReloadSwap(t, kind) })
	}
}

func testReloadSwap(t *testing.T, kind string) {
	var m [3]*testserver.Server
	for i := range m {
		m[i] = testserver.StartMemcached(t)
	}
	port := testserver.FreePort(t)
	var layouts [2]*config.Config
	for i, idx := range swapLayouts {
		layouts[i] = swapConfig(t, kind, port, m[:], idx)
	}
	rec := &reloadRecorder{}
	srv := runProxy(t, layouts[0], proxy.Options{Logger: slog.New(rec), DrainTimeout: 3 * time.Second})

	l := &swapLoad{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci := range swapClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.client(fmt.Sprintf("127.0.0.1:%d", port), ci, stop)
		}()
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()

	start := time.Now()
	mark := make([]int64, swapClients)
	for i := range swapReloads {
		if !l.waitProgress(t, mark, swapStride) {
			break
		}
		mark = l.snapshot()
		l.started.Add(1)
		err := srv.Reload(layouts[(i+1)%2])
		l.done.Add(1)
		if err != nil {
			t.Errorf("reload %d: %v", i+1, err)
			break
		}
	}
	l.waitProgress(t, mark, swapStride) // the last reload was under load too
	halt()
	took := time.Since(start)

	l.report(t, took)
	l.checkMoved(t, m[:])
	checkKept(t, rec, int(l.done.Load()))
	// Both layouts were in force: every server stored some of the keys.
	for i, s := range m {
		if n := statValue(t, s.Addr, "cmd_set"); n == 0 {
			t.Errorf("m%d (%s) stored nothing: a layout was never in force", i+1, s.Addr)
		}
	}
}

// swapConfig returns the configuration of a pool "sw" on port with the
// servers m[idx...]: native servers for kind "yaml", a route file (one
// mcp.pool, routed by key) for kind "lua". A Lua backend's label is its
// server's name (m1, m2, m3), so the same server has the same label,
// address and options in both layouts.
func swapConfig(t *testing.T, kind string, port int, m []*testserver.Server, idx []int) *config.Config {
	t.Helper()
	var yaml string
	switch kind {
	case "yaml":
		var servers []*testserver.Server
		for _, i := range idx {
			servers = append(servers, m[i])
		}
		yaml = poolYAML("sw", port, "  timeout: 2000\n", servers...)
	case "lua":
		var b strings.Builder
		b.WriteString("function mcp_config_pools()\n  return mcp.pool({\n")
		for _, i := range idx {
			fmt.Fprintf(&b, "    mcp.backend(\"m%d\", \"127.0.0.1\", %d),\n", i+1, m[i].Port)
		}
		b.WriteString("  })\nend\nfunction mcp_config_routes(pool)\n" +
			"  mcp.attach(mcp.CMD_ANY_STORAGE, " + directRoute + ")\nend\n")
		yaml = fmt.Sprintf("sw:\n  listen: 127.0.0.1:%d\n  timeout: 2000\n  lua: %s\n", port, writeLua(t, b.String()))
	default:
		t.Fatalf("unknown pool kind %q", kind)
	}
	cfg, err := config.Parse([]byte(yaml), "swap.yml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

// swapLoad is what the clients saw. A client writes a fresh key per pair
// (swap:CLIENT:SEQ), so a get can only return the value the client just set
// or a miss; a miss is excused only when a reload overlapped the pair (the
// get may then reach the key's new server), and counted as moved.
type swapLoad struct {
	started, done atomic.Int64 // reloads begun and finished
	progress      [swapClients]atomic.Int64
	dead          [swapClients]atomic.Bool // dropped or desynchronised

	requests, errs, wrong, moved, dropped atomic.Int64
	// interval counts by the number of reloads done when the reply came.
	interval [swapReloads + 1]struct{ requests, errs, wrong, moved atomic.Int64 }

	mu    sync.Mutex
	first []string    // the first failures, for the report
	kv    [][2]string // the keys and values of the excused misses
}

var errMalformed = errors.New("malformed reply")

// client runs one verified client on its own connection until stop closes
// or the connection fails.
func (l *swapLoad) client(addr string, ci int, stop <-chan struct{}) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		l.fail(ci, "dial: "+err.Error(), err)
		return
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 4<<10)
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("swap:%d:%d", ci, seq)
		val := fmt.Sprintf("v%d.%d", ci, seq)
		before := l.done.Load()
		got, err := l.roundTrip(nc, r, ci, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(val), val))
		if err != nil {
			l.fail(ci, "set "+key, err)
			return
		}
		if got != "STORED\r\n" {
			l.bad(ci, "set "+key, got)
			continue
		}
		got, err = l.roundTrip(nc, r, ci, "get "+key+"\r\n")
		if err != nil {
			l.fail(ci, "get "+key, err)
			return
		}
		switch got {
		case fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(val), val):
		case "END\r\n":
			if l.started.Load() > before { // a reload overlapped the pair
				l.moved.Add(1)
				l.at().moved.Add(1)
				l.mu.Lock()
				l.kv = append(l.kv, [2]string{key, val})
				l.mu.Unlock()
				continue
			}
			l.bad(ci, "get "+key+" (miss after its own set, no reload between)", got)
		default:
			l.bad(ci, "get "+key, got)
		}
	}
}

// roundTrip sends req and reads one reply, counting it.
func (l *swapLoad) roundTrip(nc net.Conn, r *bufio.Reader, ci int, req string) (string, error) {
	nc.SetDeadline(time.Now().Add(swapIO))
	if _, err := io.WriteString(nc, req); err != nil {
		return "", err
	}
	got, err := readSwapReply(r)
	if err == nil {
		l.requests.Add(1)
		l.at().requests.Add(1)
		l.progress[ci].Add(1)
	}
	return got, err
}

// readSwapReply reads a one-line reply or a single-key get's VALUE block up
// to END; errMalformed says the stream cannot be read on.
func readSwapReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return line, fmt.Errorf("%w: %q", errMalformed, line)
	}
	if !strings.HasPrefix(line, "VALUE ") {
		return line, nil
	}
	var key string
	var flags, n int
	if _, err := fmt.Sscanf(line, "VALUE %s %d %d", &key, &flags, &n); err != nil || n < 0 || n > 1<<20 {
		return line, fmt.Errorf("%w: %q", errMalformed, line)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return line, err
	}
	end, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	if end != "END\r\n" {
		return line + string(body) + end, fmt.Errorf("%w: %q after a value", errMalformed, end)
	}
	return line + string(body) + end, nil
}

// at returns the counts of the current reload interval.
func (l *swapLoad) at() *struct{ requests, errs, wrong, moved atomic.Int64 } {
	return &l.interval[min(int(l.done.Load()), swapReloads)]
}

// bad counts a reply that is not the one expected: an error line, or a
// wrong one.
func (l *swapLoad) bad(ci int, what, got string) {
	if isErrorReply(got) {
		l.errs.Add(1)
		l.at().errs.Add(1)
	} else {
		l.wrong.Add(1)
		l.at().wrong.Add(1)
	}
	l.note(fmt.Sprintf("client %d, after %d reloads: %s: %q", ci, l.done.Load(), what, got))
}

// fail counts a client whose connection broke (dropped) or whose reply
// could not be read (wrong); either way the client stops.
func (l *swapLoad) fail(ci int, what string, err error) {
	l.dead[ci].Store(true)
	if errors.Is(err, errMalformed) {
		l.wrong.Add(1)
		l.at().wrong.Add(1)
	} else {
		l.dropped.Add(1)
	}
	l.note(fmt.Sprintf("client %d, after %d reloads: %s: %v", ci, l.done.Load(), what, err))
}

func (l *swapLoad) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.first) < 8 {
		l.first = append(l.first, s)
	}
}

func isErrorReply(got string) bool {
	return got == "ERROR\r\n" || strings.HasPrefix(got, "SERVER_ERROR") || strings.HasPrefix(got, "CLIENT_ERROR")
}

// snapshot returns every client's progress.
func (l *swapLoad) snapshot() []int64 {
	p := make([]int64, swapClients)
	for ci := range p {
		p[ci] = l.progress[ci].Load()
	}
	return p
}

// waitProgress waits until every live client has completed n requests
// since mark. It reports a client that does not, and returns false.
func (l *swapLoad) waitProgress(t *testing.T, mark []int64, n int64) bool {
	t.Helper()
	const limit = 30 * time.Second
	deadline := time.Now().Add(limit)
	for {
		behind := -1
		for ci := range mark {
			if !l.dead[ci].Load() && l.progress[ci].Load() < mark[ci]+n {
				behind = ci
				break
			}
		}
		if behind < 0 {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("client %d completed %d requests in %v after reload %d, want %d",
				behind, l.progress[behind].Load()-mark[behind], limit, l.done.Load(), n)
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// report logs the counts and fails the test for any error, wrong reply,
// dropped connection or client without progress.
func (l *swapLoad) report(t *testing.T, took time.Duration) {
	t.Helper()
	var b strings.Builder
	for i := range l.interval {
		c := &l.interval[i]
		fmt.Fprintf(&b, "\n  after %2d reloads: %6d requests, %4d errors, %4d wrong, %3d moved misses",
			i, c.requests.Load(), c.errs.Load(), c.wrong.Load(), c.moved.Load())
	}
	t.Logf("%d reloads in %v, %d clients: %d requests, %d errors, %d wrong replies, %d dropped connections, %d misses excused by a reload%s",
		l.done.Load(), took.Round(time.Millisecond), swapClients, l.requests.Load(),
		l.errs.Load(), l.wrong.Load(), l.dropped.Load(), l.moved.Load(), b.String())
	for _, s := range l.first {
		t.Logf("first failures: %s", s)
	}
	if l.done.Load() != swapReloads {
		t.Errorf("%d reloads done, want %d", l.done.Load(), swapReloads)
	}
	if n := l.errs.Load() + l.wrong.Load() + l.dropped.Load(); n != 0 {
		t.Errorf("reloads under load failed %d requests: %d errors, %d wrong replies, %d dropped connections",
			n, l.errs.Load(), l.wrong.Load(), l.dropped.Load())
	}
	for ci := range swapClients {
		if l.progress[ci].Load() == 0 {
			t.Errorf("client %d made no progress", ci)
		}
	}
}

// checkMoved asserts that the key of every excused miss is on a server
// with the value its set stored: the get missed it because it looked on the
// key's new server, not because the set was lost.
func (l *swapLoad) checkMoved(t *testing.T, m []*testserver.Server) {
	t.Helper()
	cs := make([]*client, len(m))
	for i, s := range m {
		cs[i] = dial(t, s.Addr)
	}
	lost := 0
	for _, kv := range l.kv {
		want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", kv[0], len(kv[1]), kv[1])
		found := false
		for _, c := range cs {
			found = found || c.do("get "+kv[0]+"\r\n") == want
		}
		if !found {
			lost++
			if lost <= 5 {
				t.Errorf("%s=%s, stored and then missed across a reload, is on no server", kv[0], kv[1])
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d keys missed across a reload are on no server", lost, len(l.kv))
	}
}

// checkKept asserts that every reload reported, in its "reloaded" log line,
// that it kept a backend: the layouts share one.
func checkKept(t *testing.T, rec *reloadRecorder, reloads int) {
	t.Helper()
	kept := rec.keptCounts()
	t.Logf("backends_kept per reload: %v", kept)
	if len(kept) != reloads {
		t.Errorf("%d reloaded log lines, want %d", len(kept), reloads)
	}
	var none []int
	for i, k := range kept {
		if k <= 0 {
			none = append(none, i+1)
		}
	}
	if len(none) > 0 {
		t.Errorf("reloads %v logged backends_kept <= 0, want > 0: both layouts hold m2", none)
	}
}

// statValue returns the counter name of a memcached's stats.
func statValue(t *testing.T, addr, name string) int64 {
	t.Helper()
	c := dial(t, addr)
	defer c.nc.Close()
	for _, l := range strings.Split(c.do("stats\r\n"), "\r\n") {
		if v, ok := strings.CutPrefix(l, "STAT "+name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("stat %s of %s: %q", name, addr, v)
			}
			return n
		}
	}
	t.Fatalf("no stat %s on %s", name, addr)
	return 0
}

// reloadRecorder is a slog handler that keeps the backends_kept of every
// "reloaded" record (info and above; other records are dropped).
type reloadRecorder struct {
	mu   sync.Mutex
	kept []int64
}

func (h *reloadRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *reloadRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "reloaded" {
		return nil
	}
	kept := int64(-1)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "backends_kept" && a.Value.Kind() == slog.KindInt64 {
			kept = a.Value.Int64()
			return false
		}
		return true
	})
	h.mu.Lock()
	h.kept = append(h.kept, kept)
	h.mu.Unlock()
	return nil
}

func (h *reloadRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *reloadRecorder) WithGroup(string) slog.Handler      { return h }

func (h *reloadRecorder) keptCounts() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.kept...)
}
