package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/sharding"
)

// keysFor returns, for each server address, count keys the pool places on it.
// servers are the "host:port" addresses as the pool's YAML lists them.
func keysFor(t *testing.T, servers []string, count int) map[string][]string {
	t.Helper()
	ss := make([]sharding.Server, len(servers))
	for i, a := range servers {
		ss[i] = sharding.Server{Name: a, Weight: 1}
	}
	p, err := sharding.New(sharding.Config{Servers: ss})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%d", i)
		idx, err := p.Pick([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		a := p.Servers()[idx].Name
		if len(out[a]) < count {
			out[a] = append(out[a], k)
		}
		done := true
		for _, s := range servers {
			done = done && len(out[s]) == count
		}
		if done {
			return out
		}
	}
}

// TestBackendKilledUnderLoad kills one of three servers while clients run:
// its keys get SERVER_ERROR within the timeout, the other servers' keys keep
// working, and after a restart it is used again once the retry timeout passed.
func TestBackendKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	const timeout, retry = 500 * time.Millisecond, time.Second
	servers, yaml := memcachedPool(t, 3, fmt.Sprintf(
		"  timeout: %d\n  server_failure_limit: 2\n  server_retry_timeout: %d\n",
		timeout.Milliseconds(), retry.Milliseconds()))
	_, addr := startProxy(t, yaml, "mc")
	addrs := []string{servers[0].Addr, servers[1].Addr, servers[2].Addr}
	keys := keysFor(t, addrs, 20)
	victim := servers[0]

	c := dial(t, addr)
	for _, a := range addrs {
		for _, k := range keys[a] {
			if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(k), k)); got != "STORED\r\n" {
				t.Fatalf("set %s: %q", k, got)
			}
		}
	}

	// Load on the healthy servers for the whole test.
	stop := make(chan struct{})
	var loadErrs atomic.Int64
	var loadOps atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := dial(t, addr)
			healthy := append(keys[addrs[1]], keys[addrs[2]]...)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := healthy[(i+w)%len(healthy)]
				want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(k), k)
				if got := lc.do("get " + k + "\r\n"); got != want {
					loadErrs.Add(1)
					t.Errorf("healthy key %s: %q", k, got)
				}
				loadOps.Add(1)
			}
		}()
	}

	victim.Stop()
	for _, k := range keys[victim.Addr] {
		start := time.Now()
		got := c.do("get " + k + "\r\n")
		took := time.Since(start)
		if !strings.HasPrefix(got, "SERVER_ERROR backend failure") {
			t.Errorf("key %s on the dead server: got %q", k, got)
		}
		if took > timeout+timeout/5 {
			t.Errorf("key %s on the dead server answered after %v (timeout %v)", k, took, timeout)
		}
	}
	// After server_failure_limit failures it is marked bad: fail fast.
	if got := c.do("get " + keys[victim.Addr][0] + "\r\n"); got != "SERVER_ERROR backend failure: markedbad\r\n" {
		t.Errorf("marked-bad server: got %q", got)
	}

	victim.Restart()
	deadline := time.Now().Add(retry + 3*time.Second)
	k := keys[victim.Addr][0]
	for {
		got := c.do(fmt.Sprintf("set %s 0 0 1\r\nx\r\n", k))
		if got == "STORED\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted server not used again after %v: %q", retry, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := c.do("get " + k + "\r\n"); got != fmt.Sprintf("VALUE %s 0 1\r\nx\r\nEND\r\n", k) {
		t.Errorf("after restart: %q", got)
	}
	close(stop)
	wg.Wait()
	t.Logf("healthy-server requests during the kill: %d, errors: %d", loadOps.Load(), loadErrs.Load())
	if loadOps.Load() == 0 {
		t.Fatal("the load generator did nothing")
	}
}

// hangServer accepts connections; if answerVersion is set it answers the
// proxy's "version" handshake, then it reads and never answers.
func hangServer(t *testing.T, answerVersion bool) string {
	t.Helper()
	return testserver.Fake(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		if answerVersion {
			if l, err := r.ReadString('\n'); err != nil || l != "version\r\n" {
				return
			}
			nc.Write([]byte("VERSION 1.6.18\r\n"))
		}
		buf := make([]byte, 4096)
		for {
			nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	})
}

func TestBackendHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	for _, tc := range []struct {
		name      string
		handshake bool
		cause     string
	}{
		{"after handshake", true, "timeout"},
		{"never answers", false, "timeout"}, // the request's deadline comes before the handshake's
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			good, _ := memcachedPool(t, 1, "")
			hang := hangServer(t, tc.handshake)
			yaml := fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  timeout: %d\n  server_failure_limit: 100\n  servers:\n    - %s:1\n    - %s:1\n",
				timeout.Milliseconds(), good[0].Addr, hang)
			_, addr := startProxy(t, yaml, "mc")
			keys := keysFor(t, []string{good[0].Addr, hang}, 5)
			c := dial(t, addr)
			var took []time.Duration
			for _, k := range keys[hang] {
				start := time.Now()
				got := c.do("get " + k + "\r\n")
				d := time.Since(start)
				took = append(took, d)
				// An unanswered handshake ends at the request's deadline or
				// the connect's (the same here), whichever comes first.
				if got != "SERVER_ERROR backend failure: "+tc.cause+"\r\n" &&
					(tc.handshake || got != "SERVER_ERROR backend failure: readvalidate\r\n") {
					t.Errorf("hanging server, key %s: %q", k, got)
				}
				if d < timeout-timeout/5 || d > 2*timeout {
					t.Errorf("key %s failed after %v, want about %v", k, d, timeout)
				}
			}
			// Each request fails at its timeout: the median within 20% (a
			// loaded machine may delay a single one more).
			slices.Sort(took)
			t.Logf("failed after %v (median %v)", took, took[len(took)/2])
			if med := took[len(took)/2]; med < timeout-timeout/5 || med > timeout+timeout/5 {
				t.Errorf("median failure time %v, want %v ±20%%", med, timeout)
			}
			// The proxy stays healthy: the good server's keys work on the same
			// and on a new connection.
			for _, cc := range []*client{c, dial(t, addr)} {
				k := keys[good[0].Addr][0]
				if got := cc.do(fmt.Sprintf("set %s 0 0 1\r\nx\r\n", k)); got != "STORED\r\n" {
					t.Errorf("good server after hang: %q", got)
				}
			}
		})
	}
}

// TestBadInput sends malformed requests: each gets memcached's error, and
// the connection stays open where memcached keeps it (closed only where
// the line has no end the proxy will wait for), other clients keep being
// served, and memory stays bounded.
func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 3, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "mc")
	other := dial(t, addr)
	other.do("set other 0 0 2\r\nok\r\n")

	cases := []struct {
		name   string
		req    string
		want   string
		closed bool
	}{
		{"garbage", "\x01\x02 garbage here\r\n", "ERROR\r\n", false},
		{"unknown verb", "hello world\r\n", "ERROR\r\n", false},
		{"key of 251 bytes", "get " + strings.Repeat("k", 251) + "\r\n", "CLIENT_ERROR bad command line format\r\n", false},
		{"set key of 251 bytes", "set " + strings.Repeat("k", 251) + " 0 0 1\r\nx\r\n", "CLIENT_ERROR bad command line format\r\n", false}, // value swallowed
		{"value length 2^31", "set k 0 0 2147483648\r\n", "CLIENT_ERROR bad command line format\r\n", false},
		{"negative length", "set k 0 0 -1\r\n", "CLIENT_ERROR bad command line format\r\n", false},
		{"missing CRLF after data", "set k 0 0 3\r\nabcde", "CLIENT_ERROR bad data chunk\r\n", false}, // read on after 3+2 bytes
		{"line too long", "set k 0 0 1" + strings.Repeat(" ", 2048) + "\r\n", "CLIENT_ERROR line too long\r\n", true},
		{"bad flags", "set k abc 0 1\r\nx\r\n", "CLIENT_ERROR bad command line format\r\n", false}, // value swallowed
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			if got := c.do(tc.req); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if tc.closed {
				c.expectClosed()
			} else if got := c.do("get other\r\n"); got != "VALUE other 0 2\r\nok\r\nEND\r\n" {
				t.Fatalf("connection not usable after the error: %q", got)
			}
			if got := other.do("get other\r\n"); got != "VALUE other 0 2\r\nok\r\nEND\r\n" {
				t.Fatalf("other client affected: %q", got)
			}
		})
	}

	for _, prefix := range []string{"", "get "} {
		lineTooLong(t, addr, other, prefix)
	}
}

// lineTooLong sends a 10 MiB line with no newline and measures what the
// proxy allocates refusing it. A get line has no limit, but its key does:
// it is refused as memcached refuses a key over 250 bytes, the rest of the
// line dropped as it arrives, and the connection stays.
func lineTooLong(t *testing.T, addr string, other *client, prefix string) {
	t.Run("10 MB line without newline "+prefix, func(t *testing.T) {
		line := []byte(prefix + strings.Repeat("x", 10<<20))
		c := dial(t, addr)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var sendErr error
		done := make(chan struct{})
		go func() {
			c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_, sendErr = c.nc.Write(line) // the proxy may close before all is sent
			close(done)
		}()
		want := "CLIENT_ERROR line too long"
		if prefix != "" {
			want = "CLIENT_ERROR bad command line format"
		}
		if got := c.line(); got != want {
			t.Fatalf("got %q", got)
		}
		<-done
		if prefix == "" {
			c.expectClosed()
		} else if got := c.do("\r\nget other\r\n"); got != "VALUE other 0 2\r\nok\r\nEND\r\n" {
			t.Fatalf("after the line: %q", got)
		}
		runtime.ReadMemStats(&after)
		grew := after.TotalAlloc - before.TotalAlloc
		t.Logf("proxy allocated %d KiB while refusing a 10 MiB line (send ended with %v)", grew>>10, sendErr)
		if grew > 2<<20 {
			t.Errorf("allocated %d bytes for a refused line; want it bounded by the line limit", grew)
		}
		if got := other.do("get other\r\n"); got != "VALUE other 0 2\r\nok\r\nEND\r\n" {
			t.Fatalf("other client affected: %q", got)
		}
	})
}
