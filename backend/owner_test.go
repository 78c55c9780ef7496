package backend_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// wait waits for ch, failing the test with what was awaited after a
// generous bound (a hang, not a slow machine).
func wait[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		tb.Fatalf("still waiting for %s", what)
		panic("unreachable")
	}
}

// pausing wraps a dialect: framing the reply to req stops, the first
// time, until proceed is closed, having closed framing.
type pausing struct {
	codec.Dialect
	req     *codec.Request
	framing chan struct{}
	proceed chan struct{}
	once    sync.Once
}

func (d *pausing) pause(req *codec.Request) {
	if req == d.req {
		d.once.Do(func() {
			close(d.framing)
			<-d.proceed
		})
	}
}

func (d *pausing) ParseReply(buf []byte, req *codec.Request) (int, codec.ReplyKind, error) {
	d.pause(req)
	return d.Dialect.ParseReply(buf, req)
}

func (d *pausing) ResumeReply(buf []byte, req *codec.Request, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	d.pause(req)
	return d.Dialect.ResumeReply(buf, req, st)
}

// record keeps the order calls completed in.
type record struct {
	mu    sync.Mutex
	order []*backend.Call
	all   chan struct{} // closed when want calls have completed
	want  int
}

func newRecord(want int) *record { return &record{all: make(chan struct{}), want: want} }

func (r *record) done(c *backend.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = append(r.order, c)
	if len(r.order) == r.want {
		close(r.all)
	}
}

func (r *record) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// TestEnqueueWhileFraming: while the reader is inside the framing of a
// 400k-element reply, other goroutines' Sends to the same socket return,
// and the writer writes them (the server reads every one); none
// completes before the big reply, and each then gets its own reply, in
// order per sender.
func TestEnqueueWhileFraming(t *testing.T) {
	seen := make(chan [2]string, 1024)
	srv := startArrayServer(t, seen)
	huge := command(t, "LRANGE", "400000", "0", "-1")
	d := &pausing{Dialect: redis, req: huge, framing: make(chan struct{}), proceed: make(chan struct{})}
	be := backend.New(backend.Config{Addr: srv.addr, Dialect: d})
	t.Cleanup(be.Close)
	var release sync.Once
	proceed := func() { release.Do(func() { close(d.proceed) }) }
	t.Cleanup(proceed) // before Close, should the test fail with the reader paused

	const senders, each = 4, 25
	rec := newRecord(1 + senders*each)
	first := backend.Call{Req: huge, Done: rec.done}
	be.Send(&first, 0)
	if got := wait(t, seen, "the server to read the big request"); got[0] != "LRANGE" {
		t.Fatalf("server read %v first", got)
	}
	wait(t, d.framing, "the reader to frame the big reply")

	calls := make([][]backend.Call, senders)
	sent := make(chan int, senders)
	for g := range calls {
		calls[g] = make([]backend.Call, each)
		for i := range calls[g] {
			calls[g][i] = backend.Call{Req: command(t, "GET", "k"+strconv.Itoa(g)+"-"+strconv.Itoa(i)), Done: rec.done}
		}
		go func() {
			for i := range calls[g] {
				be.Send(&calls[g][i], 0)
			}
			sent <- g
		}()
	}
	for range senders {
		wait(t, sent, "Send to return while the reader frames a reply")
	}
	for range senders * each {
		wait(t, seen, "the writer to write while the reader frames a reply")
	}
	if n := rec.count(); n != 0 {
		t.Fatalf("%d calls completed before the reply ahead of them", n)
	}
	proceed()
	wait(t, rec.all, "every call to complete")

	if rec.order[0] != &first {
		t.Fatal("the big reply did not complete first")
	}
	if want := len(srv.array(400000)); first.Reply.Err != nil || len(first.Reply.Raw) != want {
		t.Fatalf("big reply: %d bytes (%v), want %d", len(first.Reply.Raw), first.Reply.Err, want)
	}
	next := make([]int, senders) // each sender's next call to complete
	for _, c := range rec.order[1:] {
		key := string(c.Req.Keys[0])
		g, _ := strconv.Atoi(key[1:2])
		if want := "k" + strconv.Itoa(g) + "-" + strconv.Itoa(next[g]); key != want {
			t.Fatalf("sender %d: %s completed before %s", g, key, want)
		}
		next[g]++
		if want := "$" + strconv.Itoa(len(key)) + "\r\n" + key + "\r\n"; string(c.Reply.Raw) != want {
			t.Fatalf("reply to GET %s: %q (%v), want %q", key, c.Reply.Raw, c.Reply.Err, want)
		}
	}
}

// TestHugeReplyResumes sends big replies of several sizes, interleaved
// with small ones, through a dialect that resumes framing: every call
// gets its own reply, the dialect sees its framed bytes again where it
// left them, and framing looks at each byte about once (not once per
// read).
func TestHugeReplyResumes(t *testing.T) {
	srv := startArrayServer(t, nil)
	d := &resuming{Dialect: redis}
	be := backend.New(backend.Config{Addr: srv.addr, Dialect: d})
	defer be.Close()
	sizes := []int{400000, 1, 10000, 0, 100000, 3, 250000}
	rec := newRecord(2 * len(sizes))
	var calls []*backend.Call
	total := 0
	var bt backend.Batch
	for i, n := range sizes {
		big := &backend.Call{Req: command(t, "LRANGE", strconv.Itoa(n), "0", "-1"), Done: rec.done}
		small := &backend.Call{Req: command(t, "GET", "after"+strconv.Itoa(i)), Done: rec.done}
		calls = append(calls, big, small)
		be.Stage(big, 0, &bt)
		be.Stage(small, 0, &bt)
		total += len(srv.array(n))
	}
	bt.Flush()
	wait(t, rec.all, "every call to complete")
	for i, c := range rec.order {
		if c != calls[i] {
			t.Fatalf("call %d completed out of order", i)
		}
	}
	for i, n := range sizes {
		if got, want := calls[2*i].Reply.Raw, srv.array(n); string(got) != string(want) {
			t.Fatalf("LRANGE %d: %d bytes (%v), want %d", n, len(got), calls[2*i].Reply.Err, len(want))
		}
		key := "after" + strconv.Itoa(i)
		if got := string(calls[2*i+1].Reply.Raw); got != "$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n" {
			t.Fatalf("GET %s: %q (%v)", key, got, calls[2*i+1].Reply.Err)
		}
	}
	if err := d.breach(); err != nil {
		t.Fatalf("ResumeReply contract: %v", err)
	}
	if n := d.examined.Load(); n > int64(2*total) {
		t.Errorf("framing looked at %d bytes for %d bytes of arrays: not resumed", n, total)
	}
}

// TestCloseFailsInFlight: Close answers the calls written and awaiting a
// reply with CauseClosed, in order, before it returns, and leaves the
// counters at zero.
func TestCloseFailsInFlight(t *testing.T) {
	seen := make(chan [2]string, 1024)
	srv := startArrayServer(t, seen)
	be := backend.New(backend.Config{Addr: srv.addr, Dialect: redis})
	const n = 50
	rec := newRecord(n)
	calls := make([]backend.Call, n)
	for i := range calls {
		calls[i] = backend.Call{Req: command(t, "GET", "hang"+strconv.Itoa(i)), Done: rec.done}
		be.Send(&calls[i], 0)
	}
	for range n {
		wait(t, seen, "the server to read every request")
	}
	be.Close()
	if got := rec.count(); got != n {
		t.Fatalf("Close returned with %d of %d calls completed", got, n)
	}
	for i, c := range rec.order {
		if c != &calls[i] {
			t.Fatalf("call %d completed out of order", i)
		}
		if got := causeOf(c.Reply); got != "closed" {
			t.Fatalf("call %d: cause %q, want closed", i, got)
		}
	}
	st := be.Stats()
	if st.InQueue.Load() != 0 || st.OutQueue.Load() != 0 || st.Connections.Load() != 0 {
		t.Errorf("after Close: in_queue %d, out_queue %d, connections %d; want 0",
			st.InQueue.Load(), st.OutQueue.Load(), st.Connections.Load())
	}
}

// TestTimeoutFailsInFlight: the read deadline, armed for the oldest call,
// fails every call in flight with CauseTimeout, in order; the socket is
// not written again, and the next request is answered on a new one.
func TestTimeoutFailsInFlight(t *testing.T) {
	seen := make(chan [2]string, 1024)
	srv := startArrayServer(t, seen)
	be := backend.New(backend.Config{Addr: srv.addr, Dialect: redis, Timeout: 200 * time.Millisecond})
	defer be.Close()
	const n = 10
	rec := newRecord(n)
	calls := make([]backend.Call, n)
	for i := range calls {
		calls[i] = backend.Call{Req: command(t, "GET", "hang"+strconv.Itoa(i)), Done: rec.done}
		be.Send(&calls[i], 0)
	}
	wait(t, rec.all, "the calls to time out")
	for i, c := range rec.order {
		if c != &calls[i] || causeOf(c.Reply) != "timeout" {
			t.Fatalf("call %d: %v (cause %q); want call %d to time out", i, c.Req.Keys, causeOf(c.Reply), i)
		}
	}
	if r := roundTrip(t, be, command(t, "GET", "again")); string(r.Raw) != "$5\r\nagain\r\n" {
		t.Fatalf("after the timeout: %q %v", r.Raw, r.Err)
	}
	st := be.Stats()
	if st.Timeouts.Load() != n || st.InQueue.Load() != 0 || st.OutQueue.Load() != 0 || st.Connections.Load() != 1 {
		t.Errorf("timeouts %d (want %d), in_queue %d, out_queue %d, connections %d (want 0, 0, 1)",
			st.Timeouts.Load(), n, st.InQueue.Load(), st.OutQueue.Load(), st.Connections.Load())
	}
}

// TestSendAllocatesNothing pins the fast path: once a socket's storage
// has grown, a call through writer, hand-off and reader allocates
// nothing, one at a time or 64 in a batch. (A reply over the arena's
// limit costs the buffer pools' allocations, see BenchmarkSend/Big.)
func TestSendAllocatesNothing(t *testing.T) {
	srv := testserver.StartMemcached(t)
	be := backend.New(backend.Config{Addr: srv.Addr, Dialect: mc, Timeout: 5 * time.Second})
	defer be.Close()
	if r := roundTrip(t, be, request(t, "set small 0 0 5\r\nsmall\r\n")); r.Err != nil {
		t.Fatal(r.Err)
	}
	calls := make([]backend.Call, 64)
	var left atomic.Int32
	done := make(chan struct{}, 1)
	for i := range calls {
		calls[i] = backend.Call{Req: request(t, "get small\r\n"), Done: func(*backend.Call) {
			if left.Add(-1) == 0 {
				done <- struct{}{}
			}
		}}
	}
	var bt backend.Batch
	run := func(n int) func() {
		return func() {
			left.Store(int32(n))
			for i := range calls[:n] {
				be.Stage(&calls[i], 0, &bt)
			}
			bt.Flush()
			<-done
			for i := range calls[:n] {
				calls[i].Release()
			}
		}
	}
	for _, n := range []int{1, 64} {
		run(n)() // storage grown
		if a := testing.AllocsPerRun(100, run(n)); a != 0 {
			t.Errorf("%d calls in a batch: %.1f allocations", n, a)
		}
	}
}

// TestExactlyOnceUnderFaults sends from many goroutines over two sockets
// while the server drops connections and answers some requests after
// their timeout: every call completes exactly once, with its own reply
// or a backend error (always for a request the server dropped the
// connection at), each sender's calls complete in order, and the queues'
// counters end at zero.
func TestExactlyOnceUnderFaults(t *testing.T) {
	srv := startArrayServer(t, nil)
	be := backend.New(backend.Config{Addr: srv.addr, Dialect: redis, Conns: 2, Timeout: 100 * time.Millisecond})
	defer be.Close()
	const senders, rounds, depth = 8, 30, 10
	var completions [senders][rounds * depth]atomic.Int32
	var replies, failures atomic.Int64
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			last := -1 // the last call of this sender to complete
			var bt backend.Batch
			for r := range rounds {
				var round sync.WaitGroup
				for i := r * depth; i < (r+1)*depth; i++ {
					key := "k" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
					switch (i + 7*g) % 97 {
					case 13:
						key = "die" + key
					case 51:
						key = "slow" + key
					}
					round.Add(1)
					c := &backend.Call{Req: command(t, "GET", key), Done: func(c *backend.Call) {
						defer round.Done()
						completions[g][i].Add(1)
						mu.Lock()
						if i < last {
							t.Errorf("sender %d: call %d completed after %d", g, i, last)
						}
						last = i
						mu.Unlock()
						want := "$" + strconv.Itoa(len(key)) + "\r\n" + key + "\r\n"
						switch {
						case c.Reply.Err != nil:
							failures.Add(1)
						case strings.HasPrefix(key, "die"):
							t.Errorf("GET %s: a reply, %q", key, c.Reply.Raw)
						case string(c.Reply.Raw) != want:
							t.Errorf("GET %s: %q", key, c.Reply.Raw)
						default:
							replies.Add(1)
						}
					}}
					be.Stage(c, uint32(g), &bt)
				}
				bt.Flush()
				round.Wait()
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	wait(t, finished, "every call to complete")
	for g := range completions {
		for i := range completions[g] {
			if n := completions[g][i].Load(); n != 1 {
				t.Fatalf("sender %d call %d completed %d times", g, i, n)
			}
		}
	}
	st := be.Stats()
	if st.InQueue.Load() != 0 || st.OutQueue.Load() != 0 {
		t.Errorf("in_queue %d, out_queue %d; want 0", st.InQueue.Load(), st.OutQueue.Load())
	}
	t.Logf("%d replies, %d failures, %d timeouts", replies.Load(), failures.Load(), st.Timeouts.Load())
	if replies.Load() == 0 || failures.Load() == 0 {
		t.Errorf("%d replies and %d failures: want some of each", replies.Load(), failures.Load())
	}
}
