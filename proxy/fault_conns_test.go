package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shardproxy/proxy"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// statsA returns the proxy's counters for server A.
func (r *faultRig) statsA() proxy.ServerStats {
	for _, ss := range r.srv.Stats().Pools[0].Servers {
		if ss.Addr == r.fp.Addr() {
			return ss
		}
	}
	r.t.Fatalf("server %s not in the stats", r.fp.Addr())
	return proxy.ServerStats{}
}

// TestFaultClientNeverReads: a client pipelines gets of a 100 KB value and
// never reads a reply. The proxy must stop reading from it (backpressure)
// instead of buffering replies without end, so its heap stays bounded;
// other clients, of the same server too, are unaffected, also across a
// reload; once the client leaves, the memory is given back.
//
// The bound: a session stops reading once maxPending (128) requests are
// queued and unwritten (or read and not yet queued). Each holds its reply,
// so the worst case is 128 replies of 100 KB plus the session's write batch
// (64 KiB and one reply), the backend reader's buffer (a few replies) and
// the kernel's socket buffers (outside the heap): 128 × (100 KB + 1 KiB) +
// 16 MiB ≈ 29 MiB.
func TestFaultClientNeverReads(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	const size = 100 << 10
	const maxPending = 128 // proxy.maxPending
	// A timeout long enough for 100 MB to cross two proxies under the race
	// detector: every reply must arrive, or the test measures errors.
	r := newFaultRig(t, nil, "  timeout: 20000\n")
	r.fill()
	big := r.keysA[5]
	c := dial(t, r.addr)
	if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", big, size, strings.Repeat("b", size))); got != "STORED\r\n" {
		t.Fatalf("set the big value: %q", got)
	}
	c.nc.Close()
	base := runtime.NumGoroutine()
	heap0 := heapInUse()
	by := r.watch(2)
	reqs0, resp0 := r.statsA().Requests, r.statsA().Responses

	// The slow client writes until its writes block for half a second, or
	// it has sent 20× what the proxy may hold (the kernel's socket buffers
	// take a few hundred KB of 16-byte requests before writes block).
	slow, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	slow.(*net.TCPConn).SetReadBuffer(64 << 10)
	sent := 0
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		batch := []byte(strings.Repeat("get "+big+"\r\n", 64))
		for sent < 20*maxPending {
			slow.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := slow.Write(batch); err != nil {
				return // blocked: the proxy stopped reading
			}
			sent += 64
		}
	}()

	// Wait until the proxy has stopped taking requests from it and has every
	// reply to those it took.
	var read, peak int64
	var heapPeak uint64
	stable := time.Time{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(100 * time.Millisecond)
		sa := r.statsA()
		n := sa.Requests - reqs0
		if h := heapInUse(); h > heapPeak {
			heapPeak = h
		}
		if n != read || sa.OutQueue > 0 {
			read, stable = n, time.Now()
		} else if time.Since(stable) > 500*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy kept reading from a client that never reads: %d requests", n)
		}
		peak = n
	}
	<-writerDone
	if answered := r.statsA().Responses - resp0; answered < peak {
		t.Errorf("%d of the %d gets failed: the test needs them answered", peak-answered, peak)
	}
	grew := int64(heapPeak) - int64(heap0)
	bound := int64(maxPending*(size+1<<10) + 16<<20)
	t.Logf("never-reading client: sent %d gets of %d KB, the proxy read %d and stopped; heap grew %.1f MiB (bound %.1f MiB)",
		sent, size>>10, peak, float64(grew)/(1<<20), float64(bound)/(1<<20))
	// Besides the maxPending queued ones, the proxy has read only those
	// whose replies it already handed to the kernel (the client's 64 KiB
	// receive buffer and the proxy's send buffer hold a few dozen).
	if peak > maxPending+200 || peak >= int64(sent) {
		t.Errorf("the proxy read %d of %d requests from a client that reads nothing: no backpressure", peak, sent)
	}
	if grew > bound {
		t.Errorf("heap grew %d bytes for one client that never reads; bound %d", grew, bound)
	}

	// A reload while the client is stuck replaces every backend; others are
	// unaffected, on A (the big value's server) too.
	r.reload("  timeout: 15000\n")
	other := dial(t, r.addr)
	for _, k := range r.keysA[:4] {
		if got := other.do("get " + k + "\r\n"); got != hit(k) {
			t.Errorf("another client of A beside the stuck one: %q", got)
		}
	}
	by.check(t)

	// The client leaves: its memory and goroutines go.
	slow.(*net.TCPConn).SetLinger(0)
	slow.Close()
	other.nc.Close()
	settle(t, "never-reading client gone", base, 2)
	deadline = time.Now().Add(5 * time.Second)
	for {
		h := heapInUse()
		if int64(h)-int64(heap0) < 8<<20 {
			t.Logf("heap after it left: %+.1f MiB from the start", float64(int64(h)-int64(heap0))/(1<<20))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heap still %d bytes above the start after the client left", int64(h)-int64(heap0))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialerEnv, when set in the environment ("ADDR N KEY1,KEY2,..."), makes
// TestFaultManyConnectionsDialer the client side of TestFaultManyConnections.
const dialerEnv = "SHARDPROXY_FAULT_DIALER"

// TestFaultManyConnections opens 10,000 client connections to the proxy at
// once, sends a get on each and checks every reply; a client that comes
// meanwhile is served at once; after they all close, the proxy's client
// connections, goroutines and descriptors return to where they were.
//
// The clients run in a child process (this test binary again, running
// TestFaultManyConnectionsDialer): with both ends in one process, 10,000
// connections need 20,000 descriptors, and a sandbox may not let a test
// raise RLIMIT_NOFILE that far.
func TestFaultManyConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	const n = 10000
	if limit := raiseFDLimit(t, n+2000); limit < n+500 {
		t.Fatalf("RLIMIT_NOFILE is %d and cannot be raised to hold %d connections", limit, n)
	}
	// A burst of 10,000 gets shares one socket per server: give it time.
	r := newFaultRig(t, nil, "  timeout: 10000\n")
	r.fill()
	keys := append(append([]string(nil), r.keysA...), r.keysB...)
	warm := dial(t, r.addr)
	warm.do("get " + r.keysA[0] + " " + r.keysB[0] + "\r\n")
	runtime.GC()
	base, fds := runtime.NumGoroutine(), openFDs(t)
	heap0 := heapInUse()

	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultManyConnectionsDialer$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s", dialerEnv, r.addr, n, strings.Join(keys, ",")))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	var report string
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "dialer: ") {
			report = strings.TrimPrefix(l, "dialer: ")
			break
		}
	}
	opened := time.Since(start)
	var ok, bad int
	fmt.Sscanf(report, "%d ok %d bad", &ok, &bad)
	if ok != n || bad != 0 {
		t.Fatalf("the dialer process reports %q, want %d ok 0 bad", report, n)
	}
	st := r.srv.Stats()
	t.Logf("%d connections opened and answered in %v; the proxy counts %d; heap %.1f KiB per connection",
		n, opened, st.CurrConnections, float64(int64(heapInUse())-int64(heap0))/n/1024)
	if st.CurrConnections != n+1 {
		t.Errorf("the proxy counts %d client connections, want %d", st.CurrConnections, n+1)
	}
	t0 := time.Now()
	if got := dial(t, r.addr).do("get " + r.keysA[1] + "\r\n"); got != hit(r.keysA[1]) {
		t.Errorf("a client beside %d others: %q", n, got)
	}
	if took := time.Since(t0); took > time.Second {
		t.Errorf("a client beside %d others waited %v", n, took)
	}

	stdin.Close() // the dialer closes every connection and exits
	go io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Errorf("dialer: %v", err)
	}
	waitCurrConns(t, r, 2)
	settle(t, "10,000 connections closed", base, 4)
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > fds+4 {
		if time.Now().After(deadline) {
			t.Fatalf("open descriptors %d -> %d after every connection closed", fds, openFDs(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFaultManyConnectionsDialer is TestFaultManyConnections' client side;
// it runs only in the child process that test starts. It opens N
// connections, sends "get KEY" on connection i (KEY = keys[i % len]),
// checks each reply, prints "dialer: OK ok BAD bad", and holds the
// connections until its stdin closes.
func TestFaultManyConnectionsDialer(t *testing.T) {
	spec := os.Getenv(dialerEnv)
	if spec == "" {
		t.Skip("the client side of TestFaultManyConnections")
	}
	var addr, keyList string
	var n int
	if _, err := fmt.Sscanf(spec, "%s %d %s", &addr, &n, &keyList); err != nil {
		t.Fatalf("%s=%q: %v", dialerEnv, spec, err)
	}
	keys := strings.Split(keyList, ",")
	conns := make([]net.Conn, n)
	var ok, bad atomic.Int64
	var first atomic.Value
	const workers = 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					bad.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("dial %d: %v", i, err))
					continue
				}
				conns[i] = nc
				io.WriteString(nc, "get "+keys[i%len(keys)]+"\r\n")
			}
			for i := w; i < n; i += workers {
				if conns[i] == nil {
					continue
				}
				c := &client{t: t, nc: conns[i], r: bufio.NewReaderSize(conns[i], 512)}
				if got, err := c.tryReply(); err != nil || got != hit(keys[i%len(keys)]) {
					bad.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("connection %d: %q, %v", i, got, err))
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := first.Load(); f != nil {
		fmt.Println("dialer: first failure:", f)
	}
	fmt.Printf("dialer: %d ok %d bad\n", ok.Load(), bad.Load())
	io.Copy(io.Discard, os.Stdin)
	for _, nc := range conns {
		if nc != nil {
			nc.Close()
		}
	}
}

// raiseFDLimit raises RLIMIT_NOFILE to at least want if it can (restored
// when the test ends) and returns the limit in force.
func raiseFDLimit(t *testing.T, want uint64) uint64 {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur >= want {
		return old.Cur
	}
	lim := syscall.Rlimit{Cur: want, Max: max(old.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		lim = syscall.Rlimit{Cur: old.Max, Max: old.Max} // as far as the hard limit
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return old.Cur
		}
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	return lim.Cur
}

// TestQuietSessionGivesBackItsStock: after a pipelined burst the writer has
// kept written pendings on the session (see newPending); once the session
// is quiet, its FIN check gives them back to the pool, so a connection that
// once pipelined and then idles keeps none of them.
func TestQuietSessionGivesBackItsStock(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 1, "  timeout: 5000\n")
	srv, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	var req strings.Builder
	for i := range 64 {
		fmt.Fprintf(&req, "get quiet:%d\r\n", i)
	}
	c.send(req.String())
	for i := range 64 {
		if got := c.line(); got != "END" {
			t.Fatalf("get %d: %q", i, got)
		}
	}
	n, _ := srv.KeptPendings()
	if n == 0 {
		t.Fatalf("after a burst of 64 pipelined gets the session kept no written pendings: the test shows nothing")
	}
	t.Logf("after the burst the session keeps %d written pendings", n)
	deadline := time.Now().Add(3 * proxy.FinCheck)
	for {
		n, stocked := srv.KeptPendings()
		if n == 0 && !stocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a quiet session still keeps %d written pendings after %v", n, 3*proxy.FinCheck)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
