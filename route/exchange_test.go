package route_test

import (
	"sync"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/memcache"
	"shardproxy/route"
)

var mc codec.Dialect = &memcache.Dialect{}

// owner records what an Exchange tells its owner.
type owner struct {
	mu       sync.Mutex
	received []int
	answered int
	done     chan struct{}
}

func newOwner() *owner { return &owner{done: make(chan struct{}, 1)} }

func (o *owner) Received(_ *route.Exchange, n int) {
	o.mu.Lock()
	o.received = append(o.received, n)
	o.mu.Unlock()
}

func (o *owner) Answered(*route.Exchange) {
	o.mu.Lock()
	o.answered++
	o.mu.Unlock()
	o.done <- struct{}{}
}

func (o *owner) wait(t *testing.T) {
	t.Helper()
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the exchange was not answered")
	}
}

// exchange returns an Exchange owned by o holding the memcache request s.
func exchange(t *testing.T, o *owner, s string) *route.Exchange {
	t.Helper()
	x := &route.Exchange{}
	x.Init(o)
	x.Reset()
	if _, err := mc.NewRequestParser(codec.Options{}).ParseRequest([]byte(s), &x.Req); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return x
}

type backends []*backend.Backend

func (bs backends) Backend(i int) *backend.Backend { return bs[i] }

// TestExchangeAnswers: each of an Exchange's ways of being answered tells
// its owner once, counts the bytes it holds, and renders what the client
// sees.
func TestExchangeAnswers(t *testing.T) {
	m1, m2 := testserver.StartMemcached(t), testserver.StartMemcached(t)
	b1 := backend.New(backend.Config{Addr: m1.Addr, Dialect: mc, Timeout: 5 * time.Second})
	b2 := backend.New(backend.Config{Addr: m2.Addr, Dialect: mc, Timeout: 5 * time.Second})
	t.Cleanup(func() { b1.Close(); b2.Close() })
	closed := backend.New(backend.Config{Addr: m1.Addr, Dialect: mc})
	closed.Close()

	t.Run("complete", func(t *testing.T) {
		o := newOwner()
		x := exchange(t, o, "get k\r\n")
		x.Complete([]byte("VALUE k 0 1\r\nv\r\nEND\r\n"))
		o.wait(t)
		out, failed := x.AppendReply(nil, mc)
		if string(out) != "VALUE k 0 1\r\nv\r\nEND\r\n" || failed != 0 {
			t.Errorf("AppendReply = %q, %d failed", out, failed)
		}
		if o.answered != 1 || len(o.received) != 1 || o.received[0] != len(out) || x.ReplyBytes() != int64(len(out)) {
			t.Errorf("answered %d, received %v, ReplyBytes %d; want 1, [%d], %d", o.answered, o.received, x.ReplyBytes(), len(out), len(out))
		}
	})
	t.Run("send", func(t *testing.T) {
		o := newOwner()
		x := exchange(t, o, "get k\r\n")
		x.Send(b1)
		o.wait(t)
		out, failed := x.AppendReply(nil, mc)
		if string(out) != "END\r\n" || failed != 0 || x.ReplyBytes() != 5 || o.answered != 1 {
			t.Errorf("AppendReply = %q, %d failed, ReplyBytes %d, answered %d", out, failed, x.ReplyBytes(), o.answered)
		}
		x.ReleaseReplies()
	})
	t.Run("send to a closed backend", func(t *testing.T) {
		o := newOwner()
		x := exchange(t, o, "get k\r\n")
		x.Send(closed)
		o.wait(t)
		out, failed := x.AppendReply(nil, mc)
		if string(out) != "SERVER_ERROR backend failure: closed\r\n" || failed != 1 {
			t.Errorf("AppendReply = %q, %d failed", out, failed)
		}
	})
	t.Run("fan out", func(t *testing.T) {
		o := newOwner()
		x := exchange(t, o, "get a b c\r\n")
		subs, targets := x.Split(mc, []int{0, 1, 0})
		if len(subs) != 2 {
			t.Fatalf("Split made %d sub-requests, want 2", len(subs))
		}
		x.FanOut(backends{b1, b2}, targets)
		o.wait(t)
		out, failed := x.AppendReply(nil, mc)
		if string(out) != "END\r\n" || failed != 0 || len(o.received) != 2 || o.answered != 1 {
			t.Errorf("AppendReply = %q, %d failed; received %v, answered %d", out, failed, o.received, o.answered)
		}
	})
	t.Run("fan out to all", func(t *testing.T) {
		o := newOwner()
		x := exchange(t, o, "flush_all\r\n")
		x.FanOutAll(backends{b1, closed}, 2)
		o.wait(t)
		if _, failed := x.AppendReply(nil, mc); failed != 1 || len(o.received) != 2 {
			t.Errorf("%d failed, received %v; want 1 and two replies", failed, o.received)
		}
	})
}

// TestExchangeTap: a Tap sees each backend call's reply before the owner
// hears of it, with its TapArg, and Reset clears both.
func TestExchangeTap(t *testing.T) {
	m1, m2 := testserver.StartMemcached(t), testserver.StartMemcached(t)
	b1 := backend.New(backend.Config{Addr: m1.Addr, Dialect: mc, Timeout: 5 * time.Second})
	b2 := backend.New(backend.Config{Addr: m2.Addr, Dialect: mc, Timeout: 5 * time.Second})
	t.Cleanup(func() { b1.Close(); b2.Close() })

	o := newOwner()
	x := exchange(t, o, "flush_all\r\n")
	var mu sync.Mutex
	var seen []string
	x.TapArg = 7
	x.Tap = func(tx *route.Exchange, c *backend.Call) {
		o.mu.Lock()
		before := len(o.received)
		o.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		if tx != x || tx.TapArg != 7 || before != len(seen) {
			t.Errorf("tap of the wrong exchange, arg %d, or after the owner heard (%d, %d)", tx.TapArg, before, len(seen))
		}
		seen = append(seen, string(c.Reply.Raw))
	}
	x.FanOutAll(backends{b1, b2}, 2)
	o.wait(t)
	mu.Lock()
	if len(seen) != 2 || seen[0] != "OK\r\n" || seen[1] != "OK\r\n" {
		t.Errorf("tap saw %q, want two OK", seen)
	}
	mu.Unlock()
	x.Reset()
	if x.Tap != nil || x.TapArg != 0 {
		t.Error("Reset keeps the tap")
	}
}
