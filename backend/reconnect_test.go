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
	"shardproxy/internal/testserver"
	"shardproxy/memcache"
)

// newMock starts a testserver.Mock that answers each request line with
// the next reply the test queues.
func newMock(t *testing.T) (*testserver.Mock, chan string) {
	replies := make(chan string, 16)
	return testserver.NewMock(t, func(string) string { return <-replies }), replies
}

// events records what Config.OnEvent is told, as "cause depth rbuf" or
// "markedbad retry".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) on(_ *backend.Backend, ev backend.Event) {
	s := ev.Cause.String() + " " + itoa(ev.Depth) + " " + string(ev.Rbuf)
	if ev.Cause == backend.CauseMarkedBad {
		s = ev.Cause.String() + " " + ev.Retry.String()
	}
	e.mu.Lock()
	e.got = append(e.got, s)
	e.mu.Unlock()
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func (e *events) wait(t *testing.T, want ...string) {
	t.Helper()
	waitFor(t, 3*time.Second, "events "+strings.Join(want, ", "), func() bool { return len(e.list()) >= len(want) })
	if got := e.list(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// reconnecting starts a backend under memcached's rule (Config.Reconnect)
// on m's address.
func reconnecting(t *testing.T, addr string, ev *events, limit int, retry time.Duration) *backend.Backend {
	t.Helper()
	b := backend.New(backend.Config{
		Addr: addr, Dialect: mc, Timeout: 200 * time.Millisecond, ConnectTimeout: time.Second,
		FailureLimit: limit, RetryTimeout: retry, Preconnect: true, Reconnect: true,
		HealthInterval: 50 * time.Millisecond, // ignored under memcached's rule
		NoJoin:         true, BreaksStream: memcache.BreaksStream, OnEvent: ev.on,
	})
	t.Cleanup(b.Close)
	return b
}

// Under memcached's rule a socket the server closes, even idle, is
// dialled again at once, with no request waiting, and validated; only
// the failure past the limit marks the backend bad; the retry dials on
// its own, and only a validated socket ends the bad period.
func TestReconnectRule(t *testing.T) {
	m, replies := newMock(t)
	ev := &events{}
	b := reconnecting(t, m.Addr, ev, 1, 400*time.Millisecond)
	waitFor(t, time.Second, "validated at start", func() bool { return b.Version() != "" })

	m.CloseCur() // idle: failure 1 of limit 1, dialled again at once
	took := waitFor(t, time.Second, "the redial", func() bool { return m.Accepted.Load() == 2 })
	if took > 200*time.Millisecond || b.Bad() {
		t.Fatalf("redial after %v, bad %v: want at once, not bad", took, b.Bad())
	}
	ev.wait(t, "disconnected 0 ")
	replies <- "END\r\n"
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "END\r\n" {
		t.Fatalf("after the redial: %q %v", r.Raw, r.Err)
	}

	// Validation passed: the count starts again. A silent server now
	// fails the redial's validation within the read timeout: two
	// failures, past the limit.
	m.Validate.Store(false)
	m.CloseCur()
	waitFor(t, time.Second, "marked bad", b.Bad)
	ev.wait(t, "disconnected 0 ", "disconnected 0 ", "readvalidate 0 ", "markedbad 400ms")
	if got := causeOf(call(t, b, request(t, "get k\r\n"))); got != "markedbad" {
		t.Fatalf("call while bad: cause %q, want markedbad", got)
	}
	// The retries dial with no request; their failures are not told again.
	n := m.Accepted.Load()
	waitFor(t, 2*time.Second, "a retry", func() bool { return m.Accepted.Load() > n })
	if !b.Bad() {
		t.Fatal("a retry that failed validation ended the bad period")
	}
	m.Validate.Store(true)
	waitFor(t, 2*time.Second, "restored by a retry", func() bool { return !b.Bad() })
	replies <- "END\r\n"
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "END\r\n" {
		t.Fatalf("after the restore: %q %v", r.Raw, r.Err)
	}
	if got := ev.list(); len(got) != 4 {
		t.Fatalf("events %q: the failures while bad were told", got)
	}
	for _, l := range m.Lines() {
		if l != "version\r\n" && l != "get k\r\n" {
			t.Fatalf("server was sent %q: no idle checks under memcached's rule", l)
		}
	}
}

// The failure of a socket is told once, with the calls it held and the
// bytes read and not framed: a reply cut short (timeout, what follows its
// last whole line), bytes after the last reply (trailingdata, no call
// held), an error reply that breaks the stream (passed on, then
// invalidprotocol). Each is dialled again at once, failure limit 3.
func TestReconnectEvents(t *testing.T) {
	m, replies := newMock(t)
	ev := &events{}
	b := reconnecting(t, m.Addr, ev, 3, time.Minute)
	waitFor(t, time.Second, "validated at start", func() bool { return b.Version() != "" })

	replies <- "VALUE k 0 2\r\nhi\r\nEN"
	if got := causeOf(call(t, b, request(t, "get k\r\n"))); got != "timeout" {
		t.Fatalf("cut reply: cause %q, want timeout", got)
	}
	ev.wait(t, "timeout 1 EN")
	waitFor(t, time.Second, "the redial", func() bool { return m.Accepted.Load() == 2 })

	replies <- "VALUE k 0 2\r\nok\r\nEND\r\ngarbage"
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "VALUE k 0 2\r\nok\r\nEND\r\n" {
		t.Fatalf("reply before trailing data: %q %v", r.Raw, r.Err)
	}
	ev.wait(t, "timeout 1 EN", "trailingdata 0 garbage")
	waitFor(t, time.Second, "the redial", func() bool { return m.Accepted.Load() == 3 })

	replies <- "CLIENT_ERROR bad command line format\r\n"
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "CLIENT_ERROR bad command line format\r\n" {
		t.Fatalf("CLIENT_ERROR: %q %v", r.Raw, r.Err)
	}
	ev.wait(t, "timeout 1 EN", "trailingdata 0 garbage", "invalidprotocol 0 ")
	waitFor(t, time.Second, "the redial", func() bool { return m.Accepted.Load() == 4 })

	replies <- "SERVER_ERROR out of memory\r\n" // answers one request: the socket stays
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "SERVER_ERROR out of memory\r\n" {
		t.Fatalf("SERVER_ERROR: %q %v", r.Raw, r.Err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := m.Accepted.Load(); n != 4 || b.Bad() || len(ev.list()) != 3 {
		t.Fatalf("after SERVER_ERROR: %d sockets, bad %v, events %q", n, b.Bad(), ev.list())
	}
}

// NoJoin writes one-key gets of one batch each as it came.
func TestNoJoin(t *testing.T) {
	m, replies := newMock(t)
	b := reconnecting(t, m.Addr, &events{}, 3, time.Minute)
	var bt backend.Batch
	var wg sync.WaitGroup
	for _, k := range []string{"a", "b", "c"} {
		wg.Add(1)
		replies <- "END\r\n"
		b.Stage(&backend.Call{Req: request(t, "get "+k+"\r\n"), Done: func(*backend.Call) { wg.Done() }}, 0, &bt)
	}
	bt.Flush()
	wg.Wait()
	if got := strings.Join(m.Lines(), ""); got != "version\r\nget a\r\nget b\r\nget c\r\n" {
		t.Fatalf("server read %q", got)
	}
}

// TestCloseAfterReply: a server that closes each connection right after
// its one reply, the FIN in the same breath: the reader sees the end of the
// stream when it reads after the reply, and drops the socket, so each
// request goes out on a new connection and none fails. (The reply's read
// can take the FIN with it; a reader that waited for more bytes after a
// read that emptied the socket, without reading again, would not see the
// end until the next request was written on the dead socket and failed.)
func TestCloseAfterReply(t *testing.T) {
	addr := testserver.Fake(t, closeAfterGet)
	b := backend.New(backend.Config{Addr: addr, Dialect: mc, Timeout: 5 * time.Second,
		ConnectTimeout: 5 * time.Second, NoJoin: true})
	t.Cleanup(b.Close)

	for i := range 50 {
		if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "END\r\n" {
			t.Fatalf("request %d: %q, cause %q: written on a socket its server had closed", i, r.Raw, causeOf(r))
		}
		// The reader's read after the reply finds the end of the stream:
		// the socket is gone before the next request, which dials anew.
		waitFor(t, 5*time.Second, "the closed socket dropped", func() bool {
			return b.Stats().Connections.Load() == 0
		})
	}
}

// closeAfterGet serves a memcached's connection until its first "get k",
// which it answers END before it returns, and testserver.Fake closes the
// connection at once: the FIN follows the reply.
func closeAfterGet(nc net.Conn) {
	r := bufio.NewReader(nc)
	for {
		l, err := r.ReadString('\n')
		switch {
		case err != nil:
			return
		case l == "version\r\n": // the connect's validation
			nc.Write([]byte("VERSION 1.6.18\r\n"))
		case l == "get k\r\n":
			nc.Write([]byte("END\r\n"))
			return
		default:
			nc.Write([]byte("ERROR\r\n"))
		}
	}
}

// TestRequestRacingClose: a request handed to a socket after its reader
// read the server's close, and before the socket died of it, is failed by
// that close, and the failure counts towards marking the backend bad as
// any failed request's does. (An idle socket's close alone does not
// count, TestCloseAfterReply; this one failed a request.)
func TestRequestRacingClose(t *testing.T) {
	addr := testserver.Fake(t, closeAfterGet)
	b := backend.New(backend.Config{Addr: addr, Dialect: mc, Timeout: 5 * time.Second,
		ConnectTimeout: 5 * time.Second, NoJoin: true, FailureLimit: 1, RetryTimeout: time.Minute})
	t.Cleanup(b.Close)

	var once atomic.Bool
	raced := &backend.Call{Req: request(t, "get k\r\n")}
	done := make(chan struct{})
	raced.Done = func(*backend.Call) { close(done) }
	handed := make(chan bool, 1)
	backend.SetTestHookDisconnected(t, func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		// The reader has read the close of the first request's socket;
		// the writer hands it this request meanwhile.
		b.Send(raced, 0)
		deadline := time.Now().Add(5 * time.Second)
		for b.Stats().OutQueue.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		handed <- b.Stats().OutQueue.Load() > 0
	})
	if r := call(t, b, request(t, "get k\r\n")); string(r.Raw) != "END\r\n" {
		t.Fatalf("first request: %q, cause %q", r.Raw, causeOf(r))
	}
	if !<-handed {
		t.Fatal("the racing request was not handed to the closing socket")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the racing request was not completed")
	}
	if raced.Reply.Err == nil {
		t.Fatalf("the racing request was answered %q on a socket its server had closed", raced.Reply.Raw)
	}
	if !b.Bad() {
		t.Errorf("a request failed by the server's close (cause %q) did not count: with a failure limit of 1 the backend is not bad",
			causeOf(raced.Reply))
	}
}
