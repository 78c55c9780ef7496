package backend_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/memcache"
)

var mc codec.Dialect = &memcache.Dialect{}

// script is a fake memcached: it answers the version handshake, then reads
// expect requests (a set's data line included) before it writes the canned
// replies in order (a reply of "" closes the connection). Waiting for the
// whole pipeline makes the test independent of how the proxy batches its
// writes: every request is on the socket when the replies come.
func script(t *testing.T, expect int, replies ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for n := 0; n < expect; {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == "version\r\n" {
						nc.Write([]byte("VERSION 1.6.18\r\n"))
						continue
					}
					if strings.HasPrefix(l, "set ") { // the data line belongs to it
						if _, err := r.ReadString('\n'); err != nil {
							return
						}
					}
					n++
				}
				for _, reply := range replies {
					if reply == "" {
						return
					}
					nc.Write([]byte(reply))
				}
				io.Copy(io.Discard, r) // then hang
			}()
		}
	}()
	return ln.Addr().String()
}

// request parses a client request with the memcache dialect.
func request(t testing.TB, s string) *codec.Request {
	t.Helper()
	req := &codec.Request{}
	p := mc.NewRequestParser(codec.Options{})
	if _, err := p.ParseRequest([]byte(s), req); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return req
}

// sendAll sends every request on one socket and returns the replies in order.
func sendAll(t *testing.T, b *backend.Backend, reqs ...string) []codec.Reply {
	t.Helper()
	var wg sync.WaitGroup
	calls := make([]backend.Call, len(reqs))
	var mu sync.Mutex
	var order []int
	for i, r := range reqs {
		wg.Add(1)
		idx := i
		calls[i] = backend.Call{Req: request(t, r), Done: func(*backend.Call) {
			mu.Lock()
			order = append(order, idx)
			mu.Unlock()
			wg.Done()
		}}
	}
	for i := range calls {
		b.Send(&calls[i], 0)
	}
	out := replies(t, &wg, calls)
	for i, o := range order {
		if o != i {
			t.Fatalf("calls completed out of order: %v", order)
		}
	}
	return out
}

// replies waits until wg says every call completed and returns their
// replies in order.
func replies(t *testing.T, wg *sync.WaitGroup, calls []backend.Call) []codec.Reply {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls not completed")
	}
	out := make([]codec.Reply, len(calls))
	for i := range calls {
		out[i] = calls[i].Reply
	}
	return out
}

func causeOf(r codec.Reply) string {
	var e *backend.Error
	if errors.As(r.Err, &e) {
		return e.Cause.String()
	}
	if r.Err != nil {
		return r.Err.Error()
	}
	return ""
}

// TestDesync: replies complete before a bad byte are delivered; every call
// after it fails with the cause, in order, exactly once.
func TestDesync(t *testing.T) {
	cases := []struct {
		name    string
		replies []string
		want    []string // reply text, or "!cause"
	}{
		{"garbage mid-pipeline",
			[]string{"STORED\r\n", "garbage\r\n", "STORED\r\n"},
			[]string{"STORED\r\n", "!parsing", "!parsing"}},
		{"impossible length",
			[]string{"VALUE k 0 4294967293\r\n"},
			[]string{"!parsing", "!parsing"}},
		{"missing CRLF after data",
			[]string{"VALUE k 0 2\r\nhiXXEND\r\n"},
			[]string{"!parsing"}},
		{"close mid-reply",
			[]string{"STORED\r\n", "VALUE k 0 10\r\nhi", ""},
			[]string{"STORED\r\n", "!disconnected", "!disconnected"}},
		{"trailing data",
			[]string{"STORED\r\nEND\r\n"},
			[]string{"STORED\r\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := script(t, len(tc.want), tc.replies...)
			b := backend.New(backend.Config{Addr: addr, Dialect: mc, Timeout: 5 * time.Second, FailureLimit: 100})
			defer b.Close()
			reqs := make([]string, len(tc.want))
			for i := range reqs {
				if i%2 == 0 {
					reqs[i] = "set k 0 0 1\r\nx\r\n"
				} else {
					reqs[i] = "get k\r\n"
				}
			}
			// One batch, one socket: send them together.
			got := sendAll(t, b, reqs...)
			for i, w := range tc.want {
				if c, ok := strings.CutPrefix(w, "!"); ok {
					if causeOf(got[i]) != c {
						t.Errorf("call %d: got %q / %v, want cause %s", i, got[i].Raw, got[i].Err, c)
					}
				} else if string(got[i].Raw) != w || got[i].Err != nil {
					t.Errorf("call %d: got %q / %v, want %q", i, got[i].Raw, got[i].Err, w)
				}
			}
		})
	}
}

// TestMarkBadAndRetry: FailureLimit failures mark the backend bad (calls fail
// at once with markedbad); after RetryTimeout it dials again.
func TestMarkBadAndRetry(t *testing.T) {
	srv := testserver.StartMemcached(t)
	srv.Stop()
	var mu sync.Mutex
	var events []bool
	b := backend.New(backend.Config{
		Addr: srv.Addr, Dialect: mc, Timeout: time.Second, ConnectTimeout: 500 * time.Millisecond,
		FailureLimit: 2, RetryTimeout: 300 * time.Millisecond,
		OnStateChange: func(_ *backend.Backend, bad bool) { mu.Lock(); events = append(events, bad); mu.Unlock() },
	})
	defer b.Close()
	for i, want := range []string{"connecting", "connecting", "markedbad", "markedbad"} {
		if got := causeOf(sendAll(t, b, "get k\r\n")[0]); got != want {
			t.Fatalf("call %d: cause %q, want %q", i, got, want)
		}
	}
	if !b.Bad() {
		t.Fatal("backend not bad after the failure limit")
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for b.Bad() {
		if time.Now().After(deadline) {
			t.Fatal("still bad after the retry timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := sendAll(t, b, "get k\r\n")[0]; string(r.Raw) != "END\r\n" {
		t.Fatalf("after retry: %q %v", r.Raw, r.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || !events[0] || events[1] {
		t.Fatalf("state changes %v, want [true false]", events)
	}
	if n := b.Stats().Ejects.Load(); n != 1 {
		t.Fatalf("ejects = %d, want 1", n)
	}
}

// TestPipelineBatches sends many requests on a real memcached and checks each
// reply matches its own request.
func TestPipelineBatches(t *testing.T) {
	srv := testserver.StartMemcached(t)
	b := backend.New(backend.Config{Addr: srv.Addr, Dialect: mc, Timeout: 5 * time.Second, Conns: 2})
	defer b.Close()
	var reqs []string
	for i := range 500 {
		k := "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		reqs = append(reqs, "set "+k+" 0 0 "+itoa(len(k))+"\r\n"+k+"\r\n", "get "+k+"\r\n")
	}
	got := sendAll(t, b, reqs...)
	for i := 0; i < len(reqs); i += 2 {
		k := strings.Fields(reqs[i])[1]
		if string(got[i].Raw) != "STORED\r\n" {
			t.Fatalf("set %s: %q %v", k, got[i].Raw, got[i].Err)
		}
		want := "VALUE " + k + " 0 " + itoa(len(k)) + "\r\n" + k + "\r\nEND\r\n"
		if string(got[i+1].Raw) != want {
			t.Fatalf("get %s: %q, want %q", k, got[i+1].Raw, want)
		}
	}
	// The counters are added per read of replies: they still count each.
	st := b.Stats()
	var observed int64
	for i := range st.Latency.Counts {
		observed += st.Latency.Counts[i].Load()
	}
	n := int64(len(reqs))
	if st.Requests.Load() != n || st.Responses.Load() != n || observed != n || st.Latency.Sum.Load() <= 0 {
		t.Errorf("requests %d, responses %d, latencies %d (sum %d): want %d each",
			st.Requests.Load(), st.Responses.Load(), observed, st.Latency.Sum.Load(), n)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestReleasedRepliesRecycle checks what recycling reply chunks must never
// do: overwrite a reply that was not released. Every other reply is
// released as soon as it arrives, so its chunk's room goes back to the
// pool once the reply next to it is released; the kept ones are checked
// after thousands more replies went through recycled chunks. Values
// differ per request, so a reply written over by a later one shows.
func TestReleasedRepliesRecycle(t *testing.T) {
	srv := testserver.StartMemcached(t)
	b := backend.New(backend.Config{Addr: srv.Addr, Dialect: mc, Timeout: 5 * time.Second})
	defer b.Close()
	const keys = 64
	value := func(k int) string { return strings.Repeat(string(rune('a'+k%26)), 200+k) }
	var sets []string
	for k := range keys {
		sets = append(sets, "set rk"+itoa(k)+" 0 0 "+itoa(len(value(k)))+"\r\n"+value(k)+"\r\n")
	}
	sendAll(t, b, sets...)

	const rounds = 40
	type kept struct {
		call *backend.Call
		want string
	}
	var held []kept
	for round := range rounds {
		var wg sync.WaitGroup
		calls := make([]backend.Call, keys)
		for k := range calls {
			wg.Add(1)
			calls[k] = backend.Call{Req: request(t, "get rk"+itoa(k)+"\r\n"), Done: func(c *backend.Call) {
				if k%2 == 1 {
					c.Release() // its room may be reused from now on
				}
				wg.Done()
			}}
			b.Send(&calls[k], 0)
		}
		wg.Wait()
		for k := 0; k < keys; k += 2 {
			want := "VALUE rk" + itoa(k) + " 0 " + itoa(len(value(k))) + "\r\n" + value(k) + "\r\nEND\r\n"
			held = append(held, kept{&calls[k], want})
		}
		// Release half of what was held before: chunks become free
		// while replies around them in other chunks are still held.
		if round%2 == 1 {
			for i := range held[:len(held)/2] {
				if got := string(held[i].call.Reply.Raw); got != held[i].want {
					t.Fatalf("round %d: a held reply changed: %q, want %q", round, abbrev(got), abbrev(held[i].want))
				}
				held[i].call.Release()
			}
			held = held[len(held)/2:]
		}
	}
	for _, h := range held {
		if got := string(h.call.Reply.Raw); got != h.want {
			t.Fatalf("a held reply changed: %q, want %q", abbrev(got), abbrev(h.want))
		}
		h.call.Release()
		if h.call.Reply.Raw != nil {
			t.Fatal("Release left Reply.Raw set")
		}
	}
}

func abbrev(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
