package proxy_test

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	fp "shardproxy/internal/faultproxy"
)

// badInputPipeline is one write of good and bad requests and the replies
// the proxy owes, in order; the last request loses the stream's framing,
// so the proxy answers it and closes the connection.
func badInputPipeline(a []string) (string, []string) {
	big := strings.Repeat("x", 5000) // over the rig's item_size_max of 4096
	steps := []struct{ req, want string }{
		{"get " + a[0] + "\r\n", hit(a[0])},
		{"\x00\x01\xfe garbage\r\n", "ERROR\r\n"},
		{"\r\n", "ERROR\r\n"},
		{"get\r\n", "ERROR\r\n"},
		{"set k 0 0\r\n", "ERROR\r\n"},
		{"incr " + a[0] + " abc\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n"},
		{"get " + strings.Repeat("k", 251) + "\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"set " + strings.Repeat("k", 251) + " 0 0 1\r\nx\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"set big 0 0 5000\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n"},
		{"mg " + strings.Repeat("k", 251) + " v\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"get " + a[1] + "\r\n", hit(a[1])},
		{"delete " + strings.Repeat("d", 3000) + "\r\n", "CLIENT_ERROR line too long\r\n"},
		{"get " + a[2] + "\r\n", ""}, // never read: the connection is closed
	}
	var req strings.Builder
	var want []string
	for _, s := range steps {
		req.WriteString(s.req)
		if s.want != "" {
			want = append(want, s.want)
		}
	}
	return req.String(), want
}

// TestFaultClientBadInput sends garbage, malformed and oversize requests
// between good ones: every request gets exactly its reply in order (the
// good ones their values, the bad ones memcached's own error words), an
// oversize value is swallowed, the connection closes only where framing
// is lost, and the backends never see the garbage (the proxy's socket to
// A is never recycled). The pipeline is sent in one write, then again one
// byte per segment (through a fault proxy in front of the proxy) with a
// reload halfway through. Other clients are unaffected.
func TestFaultClientBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	r := newFaultRig(t, nil, "  item_size_max: 4096\n")
	r.fill()
	by := r.watch(2)
	sockets := r.fp.Accepted()
	req, want := badInputPipeline(r.keysA)

	t.Run("one write", func(t *testing.T) {
		c := dial(t, r.addr)
		c.send(req)
		expectReplies(t, "bad input", c.replies(len(want)), want)
		c.expectClosed()
	})
	t.Run("one byte per segment, reload halfway", func(t *testing.T) {
		trickle := fp.New(t, r.addr)
		trickle.SliceWrites(fp.Upstream, 1, 0)
		c := dial(t, trickle.Addr())
		half := len(req) / 2
		c.send(req[:half])
		time.Sleep(50 * time.Millisecond)
		r.reload("  timeout: 600\n")
		c.send(req[half:])
		expectReplies(t, "bad input, trickled", c.replies(len(want)), want)
		c.expectClosed()
	})
	t.Run("not memcached at all", func(t *testing.T) {
		c := dial(t, r.addr)
		c.send("GET / HTTP/1.0\r\n\r\n") // memcached closes without a word too
		c.expectClosed()
		// memcached answers these and reads on: the value as a command.
		const bad = "CLIENT_ERROR bad command line format\r\n"
		for req, want := range map[string][]string{
			"set k 0 0 abc\r\nxyz\r\n": {bad, "ERROR\r\n"},
			"set k 0 0 -1\r\n":         {bad},
		} {
			c := dial(t, r.addr)
			c.send(req)
			for _, w := range want {
				if got := c.reply(); got != w {
					t.Errorf("%q: %q, want %q", req, got, w)
				}
			}
			if got := c.do("get " + r.keysA[3] + "\r\n"); got != hit(r.keysA[3]) {
				t.Errorf("%q: then a get: %q", req, got)
			}
		}
	})
	if got := dial(t, r.addr).do("get " + r.keysA[3] + "\r\n"); got != hit(r.keysA[3]) {
		t.Errorf("after the bad input: %q", got)
	}
	// The reload replaced the backends, so count A's sockets before it only:
	// the bad input of the first run reached no backend.
	if n := r.fp.Accepted(); n > sockets+1 {
		t.Errorf("the proxy opened %d sockets to A: bad input disturbed a backend", n-sockets)
	}
	by.check(t)
}

// TestFaultClientHalfRequest: clients send half a request and go silent
// for longer than the pool's timeout (a reload happens meanwhile). Nobody
// else waits for them; when the rest arrives, each request is answered. A
// client that leaves halfway stores nothing and leaks nothing.
func TestFaultClientHalfRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	r := newFaultRig(t, nil, "")
	r.fill()
	a := r.keysA
	settled := dial(t, r.addr)
	settled.do("get " + a[0] + "\r\n")
	base := runtime.NumGoroutine()
	by := r.watch(2)

	setter, getter, leaver := dial(t, r.addr), dial(t, r.addr), dial(t, r.addr)
	setter.send("set half 0 0 10\r\nhello")
	getter.send("get " + a[0][:3])
	leaver.send("set gone 0 0 10\r\nhel")
	leaver.nc.Close()

	// Meanwhile A's keys are served to others.
	other := dial(t, r.addr)
	for i := 1; i < 4; i++ {
		if got := other.do("get " + a[i] + "\r\n"); got != hit(a[i]) {
			t.Errorf("another client of A while requests hang half-sent: %q", got)
		}
	}
	time.Sleep(faultTimeout + 100*time.Millisecond)
	r.reload("  timeout: 600\n")
	time.Sleep(200 * time.Millisecond)

	setter.send("world\r\nget half\r\n")
	expectReplies(t, "the rest of a set", setter.replies(2), []string{"STORED\r\n", "VALUE half 0 10\r\nhelloworld\r\nEND\r\n"})
	getter.send(a[0][3:] + "\r\n")
	if got := getter.reply(); got != hit(a[0]) {
		t.Errorf("the rest of a get line: %q", got)
	}
	if got := other.do("get gone\r\n"); got != "END\r\n" {
		t.Errorf("a set whose client left halfway was stored: %q", got)
	}
	by.check(t)
	for _, c := range []*client{setter, getter, other} {
		c.nc.Close()
	}
	settle(t, "half requests", base, 2)
}

// TestFaultClientDisconnectInFlight: clients pipeline requests to A and B
// and disconnect (RST) before reading the replies, one of them halfway
// through a value; a reload follows at once in one run. Another client
// then uses the same backend sockets: it gets its own replies and nothing
// of the departed clients', no partial value is stored, the proxy's socket
// to A stays in sync (no reconnect), and no goroutine is left behind.
func TestFaultClientDisconnectInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	for _, reload := range []bool{false, true} {
		t.Run(fmt.Sprintf("reload=%v", reload), func(t *testing.T) {
			r := newFaultRig(t, nil, "")
			r.fill()
			a, b := r.keysA, r.keysB
			warm := dial(t, r.addr)
			warm.do("get " + a[0] + " " + b[0] + "\r\n")
			base := runtime.NumGoroutine()
			sockets := r.fp.Accepted()
			r.fp.Latency(fp.Downstream, 100*time.Millisecond, 0) // A's replies are still on the wire at the close

			var pipe strings.Builder
			for i := range 200 {
				fmt.Fprintf(&pipe, "get %s\r\nget %s\r\n", a[i%len(a)], b[i%len(b)])
			}
			for range 3 {
				c := dial(t, r.addr)
				c.send(pipe.String())
				c.nc.(*net.TCPConn).SetLinger(0)
				c.nc.Close()
			}
			up := dial(t, r.addr)
			up.send("set upload 0 0 100\r\n" + strings.Repeat("u", 50))
			up.nc.Close()
			if reload {
				r.reload("  timeout: 600\n")
			}

			d := dial(t, r.addr)
			want := []string{hit(a[1]), hit(b[1]), hit(a[2]), multiHit(a[3], b[3])}
			d.send(gets(a[1], b[1], a[2]) + "get " + a[3] + " " + b[3] + "\r\n")
			expectReplies(t, "a client after the departed ones", d.replies(len(want)), want)
			if got := d.do("get upload\r\n"); got != "END\r\n" {
				t.Errorf("a half-uploaded value was stored: %q", got)
			}
			r.fp.Clear()
			if !reload && r.fp.Accepted() != sockets {
				t.Errorf("the proxy reconnected to A: the departed clients' replies desynchronised its socket")
			}
			d.nc.Close()
			warm.nc.Close()
			settle(t, "departed clients", base-2, 2)
			waitCurrConns(t, r, 0)
		})
	}
}

// waitCurrConns polls until the proxy has want client connections.
func waitCurrConns(t *testing.T, r *faultRig, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := r.srv.Stats().CurrConnections
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d client connections, want %d", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFaultClientFinWithLastRequest: clients that send their last requests
// and shut down their write side at once get every reply and then the
// close, within a few seconds. The FIN often reaches the proxy in the same
// poll as the requests; the session must still notice it (see readLoop's
// skipped reads), or the connection would stay open until keepalive. Some
// send only noreply requests: nothing is written back to them, so no write
// can stumble on the closed peer either.
func TestFaultClientFinWithLastRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 1, "")
	_, addr := startProxy(t, yaml, "mc")
	eachClient(t, addr, 50, finClient)
}

// finClient sends requests and its FIN in one go and checks that the proxy
// answers and then closes within closeWithin.
func finClient(i int, c *client) error {
	const closeWithin = 5 * time.Second // the proxy checks after 1 s
	req, want := fmt.Sprintf("set fin%d 0 0 1\r\nx\r\nget fin%d\r\n", i, i), fmt.Sprintf("STORED\r\nVALUE fin%d 0 1\r\nx\r\nEND\r\n", i)
	if i%2 == 1 {
		req, want = fmt.Sprintf("set fin%d 0 0 1 noreply\r\nx\r\n", i), ""
	}
	if _, err := c.nc.Write([]byte(req)); err != nil {
		return err
	}
	c.nc.(*net.TCPConn).CloseWrite()
	c.nc.SetReadDeadline(time.Now().Add(closeWithin))
	got, err := io.ReadAll(c.r)
	if err != nil {
		return fmt.Errorf("not closed %v after its FIN: %v (read %q)", closeWithin, err, got)
	}
	if string(got) != want {
		return fmt.Errorf("got %q, want %q", got, want)
	}
	return nil
}
