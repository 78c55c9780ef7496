package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// The fault scenarios' timings: short, so that the whole set runs in about
// a minute on two cores, and far enough apart that the race detector and a
// busy machine cannot blur them.
const (
	faultTimeout = 800 * time.Millisecond // the pool's timeout (and connect timeout)
	faultRetry   = 200 * time.Millisecond // server_retry_timeout
	// healthyBound is the slowest reply a client of a healthy server should
	// see while another server misbehaves: well under faultTimeout, so a
	// client that waited for the sick server would exceed it.
	healthyBound = 300 * time.Millisecond
)

// faultRig is a pool of two servers (memcached, or redis-server for a
// Redis rig) on a fixed port (so that a reload keeps the listener): A
// behind a fault proxy, B direct. Tests break A and watch B.
type faultRig struct {
	t        *testing.T
	proto    *faultProto
	mcA, mcB *testserver.Server // A and B, whatever the protocol
	fp       *faultproxy.Proxy
	srv      *proxy.Server
	addr     string // the pool's listen address
	opts     string // the pool options the rig started with
	keysA    []string
	keysB    []string
}

// newFaultRig starts memcached A behind a fault proxy and a proxy for pool
// "fault" over A and mcB (started for the test if nil), with opts (YAML lines,
// two-space indented) over the rig's defaults.
func newFaultRig(t *testing.T, mcB *testserver.Server, opts string) *faultRig {
	t.Helper()
	return newRig(t, memcacheProto, testserver.StartMemcached, mcB, opts)
}

// newRedisFaultRig is newFaultRig with redis-server and a Redis pool.
func newRedisFaultRig(t *testing.T, rdB *testserver.Server, opts string) *faultRig {
	t.Helper()
	return newRig(t, respProto, func(t testing.TB, args ...string) *testserver.Server {
		return testserver.StartRedis(t, args...)
	}, rdB, opts)
}

func newRig(t *testing.T, p *faultProto, start func(testing.TB, ...string) *testserver.Server, b *testserver.Server, opts string) *faultRig {
	t.Helper()
	if b == nil {
		b = start(t)
	}
	r := &faultRig{t: t, proto: p, mcA: start(t), mcB: b, opts: opts}
	r.fp = faultproxy.New(t, r.mcA.Addr)
	r.addr = fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	r.srv = startFaultProxy(t, r.yaml(opts))
	keys := keysFor(t, []string{r.fp.Addr(), r.mcB.Addr}, 8)
	r.keysA, r.keysB = keys[r.fp.Addr()], keys[r.mcB.Addr]
	return r
}

// faultDefaults are the pool options of every rig, unless its options set
// the same keys.
func faultDefaults() string {
	return fmt.Sprintf("  timeout: %d\n  server_failure_limit: 1000\n  server_retry_timeout: %d\n",
		faultTimeout.Milliseconds(), faultRetry.Milliseconds())
}

// yaml returns the rig's config with opts.
func (r *faultRig) yaml(opts string) string {
	return fmt.Sprintf("fault:\n  listen: %s\n%s%s  servers:\n    - %s:1\n    - %s:1\n",
		r.addr, r.proto.poolOpts, mergeOpts(faultDefaults(), opts), r.fp.Addr(), r.mcB.Addr)
}

// mergeOpts returns base's option lines without the keys opts sets, then
// opts' lines.
func mergeOpts(base, opts string) string {
	keyOf := func(l string) string { k, _, _ := strings.Cut(strings.TrimSpace(l), ":"); return k }
	set := map[string]bool{}
	for _, l := range strings.Split(strings.TrimRight(opts, "\n"), "\n") {
		if l != "" {
			set[keyOf(l)] = true
		}
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(base, "\n"), "\n") {
		if l != "" && !set[keyOf(l)] {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(opts)
	return b.String()
}

// reload reloads the rig's proxy with its options changed by opts ("":
// the same config).
func (r *faultRig) reload(opts string) {
	r.t.Helper()
	if err := r.srv.Reload(parseFaultYAML(r.t, r.yaml(mergeOpts(r.opts, opts)))); err != nil {
		r.t.Fatalf("reload: %v", err)
	}
}

func parseFaultYAML(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "fault.yml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

// startFaultProxy runs a proxy for yaml until the test ends.
func startFaultProxy(t testing.TB, yaml string) *proxy.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := proxy.New(parseFaultYAML(t, yaml), proxy.Options{Logger: log, DrainTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return srv
}

// value is the value the rig stores under key.
func value(key string) string { return "v-" + key }

// hit is memcached's reply to "get key" when key holds value(key).
func hit(key string) string {
	v := value(key)
	return fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(v), v)
}

// backendFailure is the reply to a request that failed for cause.
func backendFailure(cause string) string {
	return "SERVER_ERROR backend failure: " + cause + "\r\n"
}

// fill stores value(k) under every key of both servers. It is set-up, not
// a check: a set that fails (a machine stalled past the timeout) is
// retried.
func (r *faultRig) fill() {
	r.t.Helper()
	c := r.dial()
	defer c.nc.Close()
	for _, k := range append(append([]string(nil), r.keysA...), r.keysB...) {
		req, want := r.proto.set(k, value(k))
		for try := 1; ; try++ {
			got := c.do(req)
			if got == want {
				break
			}
			if try == 3 {
				r.t.Fatalf("fill %s: %q", k, got)
			}
			time.Sleep(faultRetry)
		}
	}
}

// gets returns a pipeline of "get k" for keys.
func gets(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("get " + k + "\r\n")
	}
	return b.String()
}

// replies reads n replies.
func (c *client) replies(n int) []string {
	c.t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = c.reply()
	}
	return out
}

// expectReplies compares replies with want, one by one.
func expectReplies(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("%s: reply %d = %q, want %q\n(all: %q)", what, i, at(got, i), want[i], got)
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

// waitHit polls "get key" on c until it returns value(key) (a backend
// that was broken and marked bad needs its retry time and a new socket).
func waitHit(t *testing.T, c *client, key string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := c.do("get " + key + "\r\n")
		if got == hit(key) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("get %s did not recover within %v: %q", key, within, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHit is waitHit in the rig's protocol.
func (r *faultRig) waitHit(c *faultClient, key string, within time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := c.do(r.proto.get(key))
		if got == r.proto.hit(key) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("get %s did not recover within %v: %q", key, within, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bystander is a client of the healthy server B that runs beside a fault
// and checks every reply.
type bystander struct {
	mu    sync.Mutex
	ops   int
	bad   []string        // wrong replies: never allowed
	stall int             // replies slower than healthyBound, or timeouts
	lat   []time.Duration // every request's latency
	stop  chan struct{}
	wg    sync.WaitGroup
	proto *faultProto
}

// watch starts n bystanders on B's keys, each getting B's keys in turn.
func (r *faultRig) watch(n int) *bystander {
	b := &bystander{stop: make(chan struct{}), proto: r.proto}
	for w := range n {
		nc, err := net.Dial("tcp", r.addr)
		if err != nil {
			r.t.Fatal(err)
		}
		br := newBufReader(nc)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer nc.Close()
			for i := 0; ; i++ {
				select {
				case <-b.stop:
					return
				default:
				}
				k := r.keysB[(i+w)%len(r.keysB)]
				start := time.Now()
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				_, err := io.WriteString(nc, b.proto.get(k))
				var got string
				if err == nil {
					got, err = b.proto.read(br)
				}
				if !b.record(k, got, err, time.Since(start)) {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	return b
}

// record counts one request; it returns false when the connection broke.
func (b *bystander) record(k, got string, err error, took time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ops++
	b.lat = append(b.lat, took)
	switch {
	case err != nil || (got != b.proto.hit(k) && got != b.proto.failure("timeout")):
		b.bad = append(b.bad, fmt.Sprintf("get %s: %q, %v", k, got, err))
	case got != b.proto.hit(k) || took > healthyBound:
		b.stall++
	}
	return err == nil
}

// check stops the bystanders and fails the test if any saw a wrong reply,
// or if more than a few were slow. A loaded machine may stall the proxy
// for longer than healthyBound now and then (even past the timeout, which
// then answers a B request "timeout"); a fault that held B's requests up
// would slow most of them, and a fault that leaked into B would give
// wrong replies.
func (b *bystander) check(t *testing.T) {
	t.Helper()
	close(b.stop)
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	sorted := append([]time.Duration(nil), b.lat...)
	slices.Sort(sorted)
	var p50, slowest time.Duration
	if len(sorted) > 0 {
		p50, slowest = sorted[len(sorted)/2], sorted[len(sorted)-1]
	}
	t.Logf("healthy server: %d requests, median %v, slowest %v, %d slow (over %v or timed out)",
		b.ops, p50, slowest, b.stall, healthyBound)
	if len(b.bad) > 0 {
		t.Errorf("healthy server's clients got %d wrong replies; first: %s", len(b.bad), b.bad[0])
	}
	if b.ops == 0 {
		t.Error("the healthy server's clients did nothing")
	}
	if b.stall > 3+b.ops/20 {
		t.Errorf("%d of %d requests to the healthy server were slow: the fault slowed other servers", b.stall, b.ops)
	}
}

// tryReply is reply without failing the test: for background goroutines.
func (c *client) tryReply() (string, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c.tryReplyBuf()
}

// tryReplyBuf reads one reply from c.r (c.nc may be nil).
func (c *client) tryReplyBuf() (string, error) {
	var b strings.Builder
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			return b.String() + l, err
		}
		b.WriteString(l)
		var key string
		var flags, n int
		if strings.HasPrefix(l, "VALUE ") {
			if _, err := fmt.Sscanf(l, "VALUE %s %d %d", &key, &flags, &n); err != nil {
				return b.String(), err
			}
			data := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, data); err != nil {
				return b.String(), err
			}
			b.Write(data)
			continue
		}
		return b.String(), nil
	}
}

// settle waits until the goroutine count is back to at most base+slack
// and fails the test if it is not.
func settle(t *testing.T, what string, base, slack int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base+slack {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: goroutines %d -> %d\n%s", what, base, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
