package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is an upstream that echoes what it reads and keeps a copy. On
// reading "quit" it answers "bye" and closes.
type recorder struct {
	ln net.Listener
	mu sync.Mutex
	rx bytes.Buffer
	wg sync.WaitGroup
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	return r
}

func (r *recorder) serve() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer nc.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := nc.Read(buf)
				r.mu.Lock()
				r.rx.Write(buf[:n])
				r.mu.Unlock()
				if bytes.Contains(buf[:n], []byte("quit")) {
					nc.Write([]byte("bye"))
					return
				}
				if _, werr := nc.Write(buf[:n]); werr != nil || err != nil {
					return
				}
			}
		}()
	}
}

// received returns what the upstream has read so far.
func (r *recorder) received() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rx.String()
}

// waitReceived polls until the upstream has read want.
func (r *recorder) waitReceived(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.received() != want {
		if time.Now().After(deadline) {
			t.Fatalf("upstream received %q, want %q", r.received(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

func send(t *testing.T, nc net.Conn, s string) {
	t.Helper()
	nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(nc, s); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

func readN(t *testing.T, nc net.Conn, n int) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if m, err := io.ReadFull(nc, b); err != nil {
		t.Fatalf("read %d bytes: %v (got %q)", n, err, b[:m])
	}
	return string(b)
}

// readAll reads until EOF or an error and returns both.
func readAll(nc net.Conn) (string, error) {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(nc)
	return string(b), err
}

// expectSilence asserts nothing arrives for d.
func expectSilence(t *testing.T, nc net.Conn, d time.Duration) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 16)
	n, err := nc.Read(b)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("want silence, got %q, %v", b[:n], err)
	}
}

func roundTrip(t *testing.T, nc net.Conn, s string) time.Duration {
	t.Helper()
	start := time.Now()
	send(t, nc, s)
	if got := readN(t, nc, len(s)); got != s {
		t.Fatalf("echo: got %q, want %q", got, s)
	}
	return time.Since(start)
}

func TestPassthrough(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "hello")
	big := strings.Repeat("0123456789", 50_000)
	roundTrip(t, nc, big)
	if p.Conns() != 1 || p.Accepted() != 1 {
		t.Fatalf("conns %d, accepted %d", p.Conns(), p.Accepted())
	}
	if p.Upstream() != r.ln.Addr().String() {
		t.Fatalf("Upstream() = %q", p.Upstream())
	}
}

func TestLatency(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	if d := roundTrip(t, nc, "a"); d > 50*time.Millisecond {
		t.Fatalf("no toxic: %v", d)
	}
	p.Latency(Downstream, 100*time.Millisecond, 0) // on a live connection
	if d := roundTrip(t, nc, "b"); d < 100*time.Millisecond || d > 300*time.Millisecond {
		t.Fatalf("latency 100ms downstream: round trip %v", d)
	}
	p.Latency(Upstream, 100*time.Millisecond, 0)
	if d := roundTrip(t, nc, "c"); d < 200*time.Millisecond || d > 400*time.Millisecond {
		t.Fatalf("latency 100ms both ways: round trip %v", d)
	}
	p.Clear()
	p.Latency(Downstream, 50*time.Millisecond, 40*time.Millisecond)
	seen := map[time.Duration]bool{}
	for i := range 10 {
		d := roundTrip(t, nc, string(rune('d'+i)))
		if d < 10*time.Millisecond || d > 190*time.Millisecond {
			t.Fatalf("latency 50±40ms: round trip %v", d)
		}
		seen[d.Round(5*time.Millisecond)] = true
	}
	if len(seen) < 2 {
		t.Fatalf("jitter: every round trip took the same time %v", seen)
	}
}

func TestBandwidth(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	p.Bandwidth(Downstream, 200_000)
	msg := strings.Repeat("x", 100_000)
	d := roundTrip(t, nc, msg)
	if d < 400*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("100 KB at 200 KB/s took %v, want about 500ms", d)
	}
	p.Bandwidth(Downstream, 0)
	if d := roundTrip(t, nc, msg); d > 300*time.Millisecond {
		t.Fatalf("cap removed: 100 KB took %v", d)
	}
}

func TestBlackhole(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "1")

	p.Blackhole(Downstream, true) // mid-stream: the upstream hears, nobody answers
	send(t, nc, "2")
	r.waitReceived(t, "12")
	expectSilence(t, nc, 150*time.Millisecond)
	p.Blackhole(Downstream, false)
	roundTrip(t, nc, "3") // "2"'s echo was dropped, not delayed

	p.Blackhole(Upstream, true)
	send(t, nc, "4")
	expectSilence(t, nc, 150*time.Millisecond)
	if got := r.received(); got != "123" {
		t.Fatalf("upstream blackhole: upstream received %q", got)
	}
	p.Blackhole(Upstream, false)
	roundTrip(t, nc, "5")

	// A new connection under a downstream blackhole: accepted, never answered.
	p.Blackhole(Downstream, true)
	nc2 := dialProxy(t, p)
	send(t, nc2, "6")
	expectSilence(t, nc2, 150*time.Millisecond)
}

// LoseAll silences the live connections for good, both ways, and spares
// the ones accepted after it.
func TestLoseAll(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "1")
	if n := p.LoseAll(); n != 1 {
		t.Fatalf("LoseAll: %d connections, want 1", n)
	}
	send(t, nc, "2")
	expectSilence(t, nc, 150*time.Millisecond)
	nc2 := dialProxy(t, p)
	roundTrip(t, nc2, "3") // a new connection passes
	send(t, nc, "4")
	expectSilence(t, nc, 150*time.Millisecond)
	if got := r.received(); got != "13" {
		t.Fatalf("upstream received %q, want %q: a lost connection's bytes reached it", got, "13")
	}
}

func TestResetAfter(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "before") // counted before the toxic: not part of its 3 bytes
	p.ResetAfter(Downstream, 3)
	send(t, nc, "hello")
	got, err := readAll(nc)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("want connection reset, got %q, %v", got, err)
	}
	if !strings.HasPrefix("hel", got) {
		t.Fatalf("got %q before the reset, want a prefix of %q", got, "hel")
	}
	waitConns(t, p, 0)
}

func TestCloseAfter(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "before")
	p.CloseAfter(Downstream, 3)
	send(t, nc, "hello")
	if got, err := readAll(nc); got != "hel" || err != nil {
		t.Fatalf("close after 3 bytes: got %q, %v; want %q and EOF", got, err, "hel")
	}
	nc.Close()
	waitConns(t, p, 0)

	// A new connection counts from its start; the toxic stays until cleared.
	nc = dialProxy(t, p)
	send(t, nc, "world")
	if got, err := readAll(nc); got != "wor" || err != nil {
		t.Fatalf("new connection: got %q, %v", got, err)
	}
	p.Clear()
	roundTrip(t, dialProxy(t, p), "again")
}

func TestCutUpstream(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	p.CloseAfter(Upstream, 3) // the request is cut: the upstream gets 3 bytes and a FIN
	send(t, nc, "hello")
	r.waitReceived(t, "hel")
	got, err := readAll(nc)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("client end: %v", err)
	}
	if !strings.HasPrefix("hel", got) {
		t.Fatalf("client got %q", got)
	}
	waitConns(t, p, 0)
	if got := r.received(); got != "hel" {
		t.Fatalf("upstream received %q, want %q", got, "hel")
	}
}

func TestCutAtZero(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "x")
	p.ResetAfter(Downstream, 0)
	send(t, nc, "y")
	if got, err := readAll(nc); got != "" || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset at 0: got %q, %v", got, err)
	}
}

func TestSliceWrites(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	const delay = 25 * time.Millisecond
	p.SliceWrites(Downstream, 1, delay)
	start := time.Now()
	send(t, nc, "abcdef")
	var got []byte
	reads := 0
	buf := make([]byte, 64)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < 6 {
		n, err := nc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
		reads++
	}
	took := time.Since(start)
	if string(got) != "abcdef" {
		t.Fatalf("got %q", got)
	}
	// Each byte is its own write with a pause after it: 6 pauses in all, and
	// a reader that keeps up sees the bytes one at a time.
	if took < 5*delay {
		t.Fatalf("6 slices with %v pauses took %v", delay, took)
	}
	if reads < 4 {
		t.Fatalf("6 one-byte writes arrived in %d reads", reads)
	}
	t.Logf("6 bytes in %d reads over %v", reads, took)
}

func TestInject(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "0")
	p.InjectAt(Downstream, 2, []byte("XX"))
	send(t, nc, "hello")
	if got := readN(t, nc, 7); got != "heXXllo" {
		t.Fatalf("downstream inject: got %q", got)
	}
	r.waitReceived(t, "0hello") // the upstream saw no garbage
	roundTrip(t, nc, "again")   // once per connection

	p.Clear()
	p.InjectAt(Upstream, 7, []byte("YY")) // spans two writes
	send(t, nc, "hello")
	readN(t, nc, 5)
	send(t, nc, "world")
	if got := readN(t, nc, 7); got != "woYYrld" {
		t.Fatalf("upstream inject, echoed: got %q", got)
	}
	r.waitReceived(t, "0helloagainhellowoYYrld")

	p.Clear()
	p.InjectAt(Downstream, 0, []byte("!")) // at the very start
	send(t, nc, "z")
	if got := readN(t, nc, 2); got != "!z" {
		t.Fatalf("inject at 0: got %q", got)
	}
}

func TestSlowClose(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	const delay = 200 * time.Millisecond
	p.SlowClose(delay)
	start := time.Now()
	send(t, nc, "quit") // the upstream says bye and closes
	if got := readN(t, nc, 3); got != "bye" {
		t.Fatalf("got %q", got)
	}
	bye := time.Since(start)
	if got, err := readAll(nc); got != "" || err != nil {
		t.Fatalf("after bye: %q, %v", got, err)
	}
	closed := time.Since(start)
	if bye > delay/2 || closed < delay {
		t.Fatalf("bye after %v, close after %v; want the close %v late", bye, closed, delay)
	}
}

func TestDropAll(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	a, b := dialProxy(t, p), dialProxy(t, p)
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")
	p.DropAll()
	for _, nc := range []net.Conn{a, b} {
		if got, err := readAll(nc); got != "" || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("dropped connection: %q, %v", got, err)
		}
	}
	waitConns(t, p, 0)
	roundTrip(t, dialProxy(t, p), "c") // still accepting
	if p.Accepted() != 3 {
		t.Fatalf("accepted %d", p.Accepted())
	}
}

func TestStopStart(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	live := dialProxy(t, p)
	roundTrip(t, live, "a")
	p.Stop()
	if p.Running() {
		t.Fatal("Running after Stop")
	}
	if got, err := readAll(live); got != "" || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("live connection at Stop: %q, %v", got, err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while stopped: %v, want connection refused", err)
	}
	p.Stop() // idempotent
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil { // idempotent
		t.Fatal(err)
	}
	roundTrip(t, dialProxy(t, p), "b")
	p.Close()
	if err := p.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := New(t, dead)
	// The proxy accepts and resets at once; the reset may even beat the
	// end of the dial.
	nc, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err == nil {
		defer nc.Close()
		var got string
		if got, err = readAll(nc); got != "" {
			t.Fatalf("upstream down: read %q", got)
		}
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("upstream down: %v, want a reset or EOF", err)
	}
	if p.Accepted() != 0 {
		t.Fatalf("accepted %d with the upstream down", p.Accepted())
	}
}

// TestCloseLeaksNothing closes a Proxy whose connections are asleep in a
// long latency and mid-write under a bandwidth cap: Close returns at once
// and every goroutine is gone.
func TestCloseLeaksNothing(t *testing.T) {
	r := startRecorder(t)
	before := runtime.NumGoroutine()
	p := New(t, r.ln.Addr().String())
	var conns []net.Conn
	for range 5 {
		nc := dialProxy(t, p)
		roundTrip(t, nc, "x")
		conns = append(conns, nc)
	}
	p.Latency(Downstream, 10*time.Second, 0)
	p.Bandwidth(Upstream, 10)
	p.SlowClose(10 * time.Second)
	for _, nc := range conns {
		send(t, nc, "sleep")
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	p.Close()
	p.Close() // idempotent
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close took %v", took)
	}
	for _, nc := range conns {
		nc.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The recorder's own connection goroutines end when their peers
		// close; allow for them while they notice.
		n := runtime.NumGoroutine()
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines %d -> %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("still accepting after Close")
	}
}

func TestDirectionString(t *testing.T) {
	for d, want := range map[Direction]string{Downstream: "downstream", Upstream: "upstream", 7: "Direction(7)"} {
		if got := d.String(); got != want {
			t.Errorf("%d: %q, want %q", d, got, want)
		}
	}
}

func TestSetCopies(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	g := []byte("G")
	cut := &Cut{After: 100}
	p.Set(Downstream, Toxic{Inject: &Inject{At: 1, Bytes: g}, Cut: cut})
	g[0] = 'X'
	cut.After = 0
	tx := p.Toxic(Downstream)
	if string(tx.Inject.Bytes) != "G" || tx.Cut.After != 100 {
		t.Fatalf("Set kept the caller's storage: %+v %+v", tx.Inject, tx.Cut)
	}
	nc := dialProxy(t, p)
	send(t, nc, "ab")
	if got := readN(t, nc, 3); got != "aGb" {
		t.Fatalf("got %q", got)
	}
}

func waitConns(t *testing.T, p *Proxy, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Conns() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", p.Conns(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHold(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "1")

	p.Hold(Downstream, true) // the upstream hears, the answer waits
	send(t, nc, "2")
	r.waitReceived(t, "12")
	expectSilence(t, nc, 150*time.Millisecond)
	p.Hold(Downstream, false)
	if got := readN(t, nc, 1); got != "2" { // held, not dropped
		t.Fatalf("after the hold: got %q, want the held echo", got)
	}

	p.Hold(Upstream, true)
	send(t, nc, "3")
	send(t, nc, "4")
	expectSilence(t, nc, 150*time.Millisecond)
	if got := r.received(); got != "12" {
		t.Fatalf("upstream hold: upstream received %q", got)
	}
	// A new connection under a hold: accepted, its bytes kept.
	nc2 := dialProxy(t, p)
	send(t, nc2, "5")
	expectSilence(t, nc2, 100*time.Millisecond)
	p.Clear() // releases the hold too
	if got := readN(t, nc, 2); got != "34" {
		t.Fatalf("after the hold: got %q, want both held chunks in order", got)
	}
	if got := readN(t, nc2, 1); got != "5" {
		t.Fatalf("new connection after the hold: got %q", got)
	}
	if tx := p.Toxic(Upstream); tx.Hold {
		t.Fatal("Clear left the hold")
	}
}

func TestHoldThenClose(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	roundTrip(t, nc, "x")
	p.Hold(Downstream, true)
	p.Hold(Upstream, true)
	send(t, nc, "held")
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	p.Close() // wakes the held pumps
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close under a hold took %v", took)
	}
}

func TestResetAll(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	a, b := dialProxy(t, p), dialProxy(t, p)
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")
	if n := p.ResetAll(); n != 2 {
		t.Fatalf("ResetAll reset %d connections, want 2", n)
	}
	for _, nc := range []net.Conn{a, b} {
		if got, err := readAll(nc); got != "" || !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("reset connection: %q, %v; want a reset", got, err)
		}
	}
	waitConns(t, p, 0)
	roundTrip(t, dialProxy(t, p), "c") // still accepting
}

func TestInjectNow(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	a, b := dialProxy(t, p), dialProxy(t, p)
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")
	// Idle connections get the bytes at once, not before the next reply.
	if n := p.InjectNow(Downstream, []byte("GARBAGE")); n != 2 {
		t.Fatalf("InjectNow reached %d connections, want 2", n)
	}
	for _, nc := range []net.Conn{a, b} {
		if got := readN(t, nc, 7); got != "GARBAGE" {
			t.Fatalf("got %q, want the injected bytes", got)
		}
	}
	// Once: the stream goes on untouched, and a later connection never
	// sees it.
	roundTrip(t, a, "after")
	roundTrip(t, dialProxy(t, p), "new")
	if n := p.InjectNow(Upstream, []byte("!")); n != 3 {
		t.Fatalf("InjectNow upstream reached %d connections, want 3", n)
	}
	r.waitReceived(t, "abafternew!!!")
}

func TestListen(t *testing.T) {
	r := startRecorder(t)
	p, err := Listen(r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	roundTrip(t, dialProxy(t, p), "x")
}

// TestSpike: a share of the chunks is delayed by SpikeBy, the rest pass
// at once.
func TestSpike(t *testing.T) {
	r := startRecorder(t)
	p := New(t, r.ln.Addr().String())
	nc := dialProxy(t, p)
	p.Set(Downstream, Toxic{Spike: 0.5, SpikeBy: 60 * time.Millisecond})
	slow, fast := 0, 0
	for i := 0; i < 40 && (slow == 0 || fast == 0); i++ {
		if d := roundTrip(t, nc, "x"); d >= 60*time.Millisecond {
			slow++
		} else {
			fast++
		}
	}
	if slow == 0 || fast == 0 {
		t.Fatalf("spike on half the chunks: %d slow, %d fast", slow, fast)
	}
}
