package backend

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/memcache"
)

var spliceDialect = &memcache.Dialect{}

// spliceRequest parses a client's memcache request.
func spliceRequest(t *testing.T, s string) *codec.Request {
	t.Helper()
	req := &codec.Request{}
	if _, err := spliceDialect.NewRequestParser(codec.Options{}).ParseRequest([]byte(s), req); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return req
}

// spliceCalls sends reqs to b as one batch, each call allowed to splice,
// and returns them once every one is done.
func spliceCalls(t *testing.T, b *Backend, reqs ...string) []*Call {
	t.Helper()
	var wg sync.WaitGroup
	calls := make([]*Call, len(reqs))
	var bt Batch
	for i, r := range reqs {
		wg.Add(1)
		calls[i] = &Call{Req: spliceRequest(t, r), Splice: true, MetaRewrite: true, Done: func(*Call) { wg.Done() }}
		b.Stage(calls[i], 0, &bt)
	}
	bt.Flush()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls not completed")
	}
	return calls
}

// clientSees returns what c's client is sent, as a writer makes it:
// Reply.Raw, then the bytes in the pipe, then After, shown as the client's
// own request's reply. It releases c.
func clientSees(t *testing.T, c *Call) string {
	t.Helper()
	if c.Reply.Err != nil {
		return "error: " + c.Reply.Err.Error()
	}
	raw := append([]byte(nil), c.Reply.Raw...)
	if sp := c.Spliced(); sp != nil {
		var err error
		if raw, err = sp.AppendTo(raw); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, sp.After...)
	}
	c.Release()
	return string(spliceDialect.AppendReply(nil, c.Req, raw, c.Reply.Kind))
}

// pipesIdle checks that every pipe made is back in the pool.
func pipesIdle(t *testing.T) {
	t.Helper()
	pipes.mu.Lock()
	defer pipes.mu.Unlock()
	if pipes.open != len(pipes.free) {
		t.Errorf("%d pipes open, %d of them free", pipes.open, len(pipes.free))
	}
}

// TestSplicedGets: gets of values around the splice bounds, alone and in
// one batch with misses and small values, on text and on meta sockets,
// give the client what memcached answers; the long values' were spliced.
// (A batch's gets on a text socket go joined as one multi-get, whose
// reply is not spliced: there only the replies are checked.)
func TestSplicedGets(t *testing.T) {
	srv := testserver.StartMemcached(t, "-I", "2m")
	sizes := []int{100, 20 << 10, 100 << 10, 200 << 10, 600 << 10}
	value := func(n int) string { return strings.Repeat(fmt.Sprintf("<%d>", n), n)[:n] }
	order := []int{100 << 10, 100, 200 << 10, 600 << 10, -1, 20 << 10, 100 << 10}
	for _, tc := range []struct {
		meta, batch bool
		spliced     [2]int64 // how many replies, at least and at most
	}{
		// Alone, the 100 KB and 200 KB values are spliced; the 600 KB
		// one is when a read took all but 256 KB of it.
		{false, false, [2]int64{3, 4}},
		{true, false, [2]int64{3, 4}},
		{false, true, [2]int64{0, 4}},
		{true, true, [2]int64{1, 4}},
	} {
		t.Run(fmt.Sprintf("meta=%v,batch=%v", tc.meta, tc.batch), func(t *testing.T) {
			cfg := Config{Addr: srv.Addr, Dialect: spliceDialect, Timeout: 5 * time.Second}
			if tc.meta {
				cfg.Handshake.MetaProbe = true
				cfg.MetaRewrite = memcache.MetaGet
			}
			b := New(cfg)
			defer b.Close()
			var sets []string
			for _, n := range sizes {
				sets = append(sets, fmt.Sprintf("set v%d 3 0 %d\r\n%s\r\n", n, n, value(n)))
			}
			for i, c := range spliceCalls(t, b, sets...) {
				if got := clientSees(t, c); got != "STORED\r\n" {
					t.Fatalf("set %d: %q", sizes[i], got)
				}
			}
			before := SplicedReplies()
			var gets []string
			for _, n := range order {
				gets = append(gets, fmt.Sprintf("get v%d\r\n", n))
			}
			var calls []*Call
			if tc.batch {
				calls = spliceCalls(t, b, gets...)
			} else {
				for _, g := range gets {
					calls = append(calls, spliceCalls(t, b, g)...)
				}
			}
			if tc.meta && calls[0].Spliced() == nil {
				t.Errorf("the first 100 KB value was not spliced")
			}
			for i, c := range calls {
				n := order[i]
				want := "END\r\n"
				if n >= 0 {
					want = fmt.Sprintf("VALUE v%d 3 %d\r\n%s\r\nEND\r\n", n, n, value(n))
				}
				if got := clientSees(t, c); got != want {
					t.Errorf("get of %d bytes: %d bytes %.80q, want %d", n, len(got), got, len(want))
				}
			}
			if d := SplicedReplies() - before; d < tc.spliced[0] || d > tc.spliced[1] {
				t.Errorf("%d replies spliced, want %d to %d", d, tc.spliced[0], tc.spliced[1])
			}
			pipesIdle(t)
		})
	}
}

// spliceFake is a memcached that answers the version handshake and every
// get with reply, then does what after says: "hang" or "close".
func spliceFake(t *testing.T, reply, after string) string {
	return testserver.Fake(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if l == "version\r\n" {
				nc.Write([]byte("VERSION 1.6.18\r\n"))
				continue
			}
			nc.Write([]byte(reply))
			if after == "close" {
				return
			}
		}
	})
}

// TestSpliceFaults: a server that stalls, closes or ends the reply wrong
// while its value is being spliced fails the call with the cause, and
// the pipe is not lost.
func TestSpliceFaults(t *testing.T) {
	head := "VALUE k 0 102400\r\n"
	part := strings.Repeat("x", 50<<10)
	for _, tc := range []struct {
		name, reply, after string
		cause              Cause
	}{
		{"stall", head + part, "hang", CauseTimeout},
		{"close", head + part, "close", CauseDisconnected},
		{"bad trailer", head + strings.Repeat("x", 100<<10) + "\r\nEMD\r\n", "hang", CauseParsing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(Config{Addr: spliceFake(t, tc.reply, tc.after), Dialect: spliceDialect,
				Timeout: 300 * time.Millisecond})
			defer b.Close()
			before := SplicedReplies()
			c := spliceCalls(t, b, "get k\r\n")[0]
			var e *Error
			if !errors.As(c.Reply.Err, &e) || e.Cause != tc.cause {
				t.Errorf("reply %.60q, error %v; want cause %s", c.Reply.Raw, c.Reply.Err, tc.cause)
			}
			if c.Spliced() != nil {
				t.Errorf("a failed call keeps its pipe")
			}
			c.Release()
			if d := SplicedReplies() - before; d != 0 {
				t.Errorf("%d replies counted spliced", d)
			}
			pipesIdle(t)
		})
	}
}

// resizePipes closes the free pipes and gives the next ones size bytes.
func resizePipes(size int) {
	pipes.mu.Lock()
	defer pipes.mu.Unlock()
	for _, p := range pipes.free {
		p.close()
	}
	pipes.open -= len(pipes.free)
	pipes.free = nil
	pipeSize = size
}

// TestSplicePipeFull: a value the pipe cannot hold (here a pipe of one
// page) is read after all: what reached the pipe goes back in front of
// the rest, and the client gets the whole value.
func TestSplicePipeFull(t *testing.T) {
	size := pipeSize
	resizePipes(4096)
	defer resizePipes(size)
	srv := testserver.StartMemcached(t)
	b := New(Config{Addr: srv.Addr, Dialect: spliceDialect, Timeout: 5 * time.Second})
	defer b.Close()
	v := strings.Repeat("0123456789abcdef", 100<<10/16)
	c := spliceCalls(t, b, fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", len(v), v))[0]
	if got := clientSees(t, c); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	before := SplicedReplies()
	for i := range 3 {
		c := spliceCalls(t, b, "get k\r\n", "get nope\r\n")
		if got, want := clientSees(t, c[0]), "VALUE k 0 102400\r\n"+v+"\r\nEND\r\n"; got != want {
			t.Errorf("get %d: %d bytes, differ at %d", i, len(got), firstDiff([]byte(got), []byte(want)))
		}
		if got := clientSees(t, c[1]); got != "END\r\n" {
			t.Errorf("get %d of a miss: %q", i, got)
		}
	}
	if d := SplicedReplies() - before; d != 0 {
		t.Errorf("%d replies spliced through a one-page pipe", d)
	}
	pipesIdle(t)
}
