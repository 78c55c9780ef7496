package backend_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// call sends req on b and waits for its reply.
func call(t *testing.T, b *backend.Backend, req *codec.Request) codec.Reply {
	t.Helper()
	done := make(chan struct{})
	c := &backend.Call{Req: req, Done: func(*backend.Call) { close(done) }}
	b.Send(c, 0)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("call not completed")
	}
	return c.Reply
}

// waitFor polls cond every 5ms until it holds or d passes, and returns
// how long it took.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// mute is a memcached stand-in that accepts connections and answers
// nothing until answer is set, then answers version and get. It keeps
// every line it was sent.
type mute struct {
	answer   atomic.Bool
	accepted atomic.Int64
	mu       sync.Mutex
	lines    []string
}

func (m *mute) serve(nc net.Conn) {
	m.accepted.Add(1)
	r := bufio.NewReader(nc)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return
		}
		m.mu.Lock()
		m.lines = append(m.lines, l)
		m.mu.Unlock()
		if !m.answer.Load() {
			continue
		}
		switch {
		case l == "version\r\n":
			nc.Write([]byte("VERSION 1.6.0\r\n"))
		case strings.HasPrefix(l, "get "):
			nc.Write([]byte("END\r\n"))
		}
	}
}

func (m *mute) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// A bad backend whose server accepts connections but answers nothing is
// probed and stays bad: no client request is sent to it (each fails at
// once, markedbad), only the probes' handshakes reach it. Once it
// answers, a probe restores it.
func TestProbeKeepsSilentServerBad(t *testing.T) {
	m := &mute{}
	addr := testserver.Fake(t, m.serve)
	var mu sync.Mutex
	var events []bool
	b := backend.New(backend.Config{
		Addr: addr, Dialect: mc, Timeout: time.Second, ConnectTimeout: 400 * time.Millisecond,
		FailureLimit: 1, RetryTimeout: 100 * time.Millisecond,
		HealthInterval: 100 * time.Millisecond, HealthTimeout: 100 * time.Millisecond,
		OnStateChange: func(_ *backend.Backend, bad bool) { mu.Lock(); events = append(events, bad); mu.Unlock() },
	})
	defer b.Close()
	if got := causeOf(call(t, b, request(t, "get k\r\n"))); got != "readvalidate" {
		t.Fatalf("first call: cause %q, want readvalidate", got)
	}
	// Past several retry times, every request still fails at once.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		start := time.Now()
		if got := causeOf(call(t, b, request(t, "get k\r\n"))); got != "markedbad" {
			t.Fatalf("call while probing: cause %q, want markedbad", got)
		}
		if d := time.Since(start); d > 200*time.Millisecond { // a dial would wait the 400ms connect timeout
			t.Fatalf("a call while probing took %v: it waited for the server", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := b.Stats()
	if st.Probes.Load() < 3 || st.Restores.Load() != 0 {
		t.Fatalf("probes %d, restores %d: want 3 or more probes, no restore", st.Probes.Load(), st.Restores.Load())
	}
	if s := b.State(); !s.Bad || !s.Probing || s.RetryAt.IsZero() {
		t.Fatalf("state %+v: want bad and probing, with the next probe's time", s)
	}
	for _, l := range m.seen() {
		if l != "version\r\n" {
			t.Fatalf("the silent server was sent %q: only probes may reach it", l)
		}
	}
	if n, p := m.accepted.Load(), st.Probes.Load(); n < p || n > p+2 {
		t.Fatalf("server accepted %d connections for %d probes and one client dial", n, p)
	}

	m.answer.Store(true)
	took := waitFor(t, 2*time.Second, "restored by a probe", func() bool { return !b.Bad() })
	t.Logf("restored %v after the server answered (interval 100ms)", took)
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "END\r\n" {
		t.Fatalf("after restore: %q %v", r.Raw, r.Err)
	}
	if n := st.Restores.Load(); n != 1 {
		t.Fatalf("restores %d, want 1", n)
	}
	// OnStateChange runs after the backend is restored: wait for it.
	waitFor(t, time.Second, "the restore's state change", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || !events[0] || events[1] {
		t.Fatalf("state changes %v, want [true false]", events)
	}
}

// Without health checks (HealthInterval 0) the retry time ends the bad
// period by itself, as in twemproxy: the next client request dials the
// silent server and waits for it.
func TestNoHealthChecksRetryOnRequest(t *testing.T) {
	m := &mute{}
	addr := testserver.Fake(t, m.serve)
	b := backend.New(backend.Config{
		Addr: addr, Dialect: mc, Timeout: time.Second, ConnectTimeout: 100 * time.Millisecond,
		FailureLimit: 1, RetryTimeout: 100 * time.Millisecond,
	})
	defer b.Close()
	call(t, b, request(t, "get k\r\n"))
	if !b.Bad() {
		t.Fatal("not bad after a failure at limit 1")
	}
	waitFor(t, time.Second, "retry time", func() bool { return !b.Bad() })
	if got := causeOf(call(t, b, request(t, "get k\r\n"))); got != "readvalidate" {
		t.Fatalf("after the retry time: cause %q, want readvalidate (the request dialled)", got)
	}
	if n := b.Stats().Probes.Load(); n != 0 {
		t.Fatalf("%d probes with health checks off", n)
	}
}

// A real server killed and started again on its port is used again once
// a probe succeeds, about one interval after it is back; the probe
// authenticates as the sockets do, so a wrong password keeps it bad.
func TestProbeRestoresRestartedServer(t *testing.T) {
	const interval = 200 * time.Millisecond
	cases := []struct {
		name     string
		start    func(t *testing.T) *testserver.Server
		dialect  codec.Dialect
		password string
		req      func(t *testing.T) *codec.Request
		want     string // the reply; "" when the server must stay bad
	}{
		{"memcached", func(t *testing.T) *testserver.Server { return testserver.StartMemcached(t) }, mc, "",
			func(t *testing.T) *codec.Request { return request(t, "get k\r\n") }, "END\r\n"},
		{"redis auth", func(t *testing.T) *testserver.Server { return testserver.StartRedis(t, "--requirepass", "pw") }, redis, "pw",
			func(t *testing.T) *codec.Request { return command(t, "GET", "k") }, "$-1\r\n"},
		{"redis wrong password", func(t *testing.T) *testserver.Server { return testserver.StartRedis(t, "--requirepass", "pw") }, redis, "nope",
			func(t *testing.T) *codec.Request { return command(t, "GET", "k") }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.start(t)
			b := backend.New(backend.Config{
				Addr: srv.Addr, Dialect: tc.dialect, Handshake: codec.HandshakeOptions{Password: tc.password},
				Timeout: time.Second, ConnectTimeout: 500 * time.Millisecond,
				FailureLimit: 1, RetryTimeout: interval, HealthInterval: interval, HealthTimeout: 500 * time.Millisecond,
			})
			defer b.Close()
			if tc.want == "" {
				if got := causeOf(call(t, b, tc.req(t))); got != "badvalidate" {
					t.Fatalf("wrong password: cause %q, want badvalidate", got)
				}
				time.Sleep(4 * interval)
				st := b.State()
				if !st.Bad || !st.Probing || st.LastCause != "badvalidate" || b.Stats().ProbeFailures.Load() < 2 {
					t.Fatalf("state %+v, probe failures %d: want bad, probing, badvalidate, 2 or more", st, b.Stats().ProbeFailures.Load())
				}
				return
			}
			if r := call(t, b, tc.req(t)); string(r.Raw) != tc.want {
				t.Fatalf("first call: %q %v", r.Raw, r.Err)
			}
			srv.Stop()
			waitFor(t, 2*time.Second, "marked bad", func() bool {
				call(t, b, tc.req(t))
				return b.Bad()
			})
			time.Sleep(3 * interval) // probes fail meanwhile
			if b.Stats().ProbeFailures.Load() == 0 {
				t.Fatal("no probe failed while the server was down")
			}
			srv.Restart()
			took := waitFor(t, 5*time.Second, "restored", func() bool { return !b.Bad() })
			t.Logf("%s: restored %v after the restarted server answered (interval %v)", tc.name, took, interval)
			if took > interval+300*time.Millisecond {
				t.Errorf("restored after %v, want within about one interval (%v)", took, interval)
			}
			if r := call(t, b, tc.req(t)); string(r.Raw) != tc.want {
				t.Fatalf("after restore: %q %v", r.Raw, r.Err)
			}
			if n := b.Stats().Restores.Load(); n != 1 {
				t.Fatalf("restores %d, want 1", n)
			}
		})
	}
}

// A socket whose path died silently while idle (no FIN, no RST: the
// fault proxy loses its bytes) is found out by its check, and the first
// request after the idle period goes out on a new socket and succeeds.
// Without checks that request is written on the dead socket and times
// out.
func TestIdleCheckFindsLostSocket(t *testing.T) {
	srv := testserver.StartMemcached(t)
	for _, tc := range []struct {
		name     string
		interval time.Duration
		ok       bool
	}{{"checks", 100 * time.Millisecond, true}, {"no checks", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := faultproxy.New(t, srv.Addr)
			b := backend.New(backend.Config{
				Addr: p.Addr(), Dialect: mc, Timeout: 500 * time.Millisecond, FailureLimit: 1,
				HealthInterval: tc.interval, HealthTimeout: 100 * time.Millisecond,
			})
			defer b.Close()
			if r := call(t, b, request(t, "set lost 0 0 1\r\nv\r\n")); string(r.Raw) != "STORED\r\n" {
				t.Fatalf("set: %q %v", r.Raw, r.Err)
			}
			p.LoseAll()
			time.Sleep(500 * time.Millisecond)
			r := call(t, b, request(t, "get lost\r\n"))
			st := b.Stats()
			if !tc.ok {
				if causeOf(r) != "timeout" {
					t.Fatalf("without checks: %q %v, want a timeout on the lost socket", r.Raw, r.Err)
				}
				return
			}
			if string(r.Raw) != "VALUE lost 0 1\r\nv\r\nEND\r\n" {
				t.Fatalf("first request after the idle period: %q %v", r.Raw, r.Err)
			}
			if st.IdleReplaced.Load() != 1 || st.Failures.Load() != 0 || st.Ejects.Load() != 0 || st.Timeouts.Load() != 0 {
				t.Fatalf("replaced %d, failures %d, ejects %d, timeouts %d: want 1, 0, 0, 0",
					st.IdleReplaced.Load(), st.Failures.Load(), st.Ejects.Load(), st.Timeouts.Load())
			}
		})
	}
}

// A request that arrives while its idle socket is being checked waits
// for the check; when the check finds the socket dead, the request goes
// out on a new socket rather than failing with it.
func TestIdleCheckHoldsCalls(t *testing.T) {
	srv := testserver.StartMemcached(t)
	p := faultproxy.New(t, srv.Addr)
	b := backend.New(backend.Config{
		Addr: p.Addr(), Dialect: mc, Timeout: 2 * time.Second, FailureLimit: 1,
		HealthInterval: 50 * time.Millisecond, HealthTimeout: 300 * time.Millisecond,
	})
	defer b.Close()
	if r := call(t, b, request(t, "set held 0 0 1\r\nv\r\n")); string(r.Raw) != "STORED\r\n" {
		t.Fatalf("set: %q %v", r.Raw, r.Err)
	}
	st := b.Stats()
	n := st.IdleChecks.Load()
	p.LoseAll()
	// The next check is written after the loss: it is lost too.
	waitFor(t, 3*time.Second, "a check on the lost socket", func() bool { return st.IdleChecks.Load() > n })
	start := time.Now()
	r := call(t, b, request(t, "get held\r\n"))
	if string(r.Raw) != "VALUE held 0 1\r\nv\r\nEND\r\n" {
		t.Fatalf("request held during the check: %q %v", r.Raw, r.Err)
	}
	t.Logf("a request held by a check of a lost socket took %v (health timeout 300ms)", time.Since(start))
	if st.IdleReplaced.Load() != 1 || st.Failures.Load() != 0 {
		t.Fatalf("replaced %d, failures %d: want 1, 0", st.IdleReplaced.Load(), st.Failures.Load())
	}
}

// A socket in use is never checked, and checks count in none of the
// request, reply or latency counters.
func TestIdleCheckSkipsBusySocket(t *testing.T) {
	srv := testserver.StartMemcached(t)
	b := backend.New(backend.Config{
		Addr: srv.Addr, Dialect: mc, Timeout: time.Second,
		HealthInterval: 400 * time.Millisecond, HealthTimeout: 100 * time.Millisecond,
	})
	defer b.Close()
	st := b.Stats()
	var sent int64
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
		call(t, b, request(t, "get busy\r\n"))
		sent++
		time.Sleep(10 * time.Millisecond)
	}
	if n := st.IdleChecks.Load(); n != 0 {
		t.Fatalf("%d checks on a socket used every 10ms (interval 400ms)", n)
	}
	waitFor(t, 3*time.Second, "checks of the idle socket", func() bool { return st.IdleChecks.Load() >= 2 })
	var observed int64
	for i := range st.Latency.Counts {
		observed += st.Latency.Counts[i].Load()
	}
	if st.Requests.Load() != sent || st.Responses.Load() != sent || observed != sent {
		t.Fatalf("requests %d, responses %d, latencies %d: want %d each (checks not counted)",
			st.Requests.Load(), st.Responses.Load(), observed, sent)
	}
	if st.IdleReplaced.Load() != 0 {
		t.Fatalf("%d sockets replaced on a healthy server", st.IdleReplaced.Load())
	}
}

// Checks come and go between a client's pipelines on one socket: every
// request still gets exactly its own reply, in order.
func TestIdleChecksKeepOrder(t *testing.T) {
	srv := testserver.StartMemcached(t)
	b := backend.New(backend.Config{
		Addr: srv.Addr, Dialect: mc, Timeout: 2 * time.Second,
		HealthInterval: 3 * time.Millisecond, HealthTimeout: time.Second,
	})
	defer b.Close()
	pauses := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 7 * time.Millisecond}
	for i := range 200 {
		k := "order" + itoa(i)
		v := strings.Repeat(string(rune('a'+i%26)), 1+i%9)
		got := sendAll(t, b, "set "+k+" 0 0 "+itoa(len(v))+"\r\n"+v+"\r\n", "get "+k+"\r\n", "get nope\r\n")
		want := []string{"STORED\r\n", "VALUE " + k + " 0 " + itoa(len(v)) + "\r\n" + v + "\r\nEND\r\n", "END\r\n"}
		for j := range want {
			if string(got[j].Raw) != want[j] {
				t.Fatalf("round %d, reply %d: %q %v, want %q", i, j, got[j].Raw, got[j].Err, want[j])
			}
		}
		time.Sleep(pauses[i%len(pauses)])
	}
	if n := b.Stats().IdleChecks.Load(); n == 0 {
		t.Fatal("no check ran between the pipelines: the test tested nothing")
	} else {
		t.Logf("%d checks between 200 pipelines", n)
	}
}
