package kind_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/kind"
	"shardproxy/memcache"
)

// TestOrder sends two blocking commands, ordered, on two dedicated
// connections of one server: the second's connection is open, the
// first's still to be opened, its handshake answered 100 ms late. The
// second is written only once the first is, as the order says; unordered
// it would be written 100 ms before it.
func TestOrder(t *testing.T) {
	addr := testserver.FakeMemcached(t, func(conn int, line string) string {
		if !strings.HasPrefix(line, "version") {
			return "END\r\n"
		}
		if conn > 1 { // the first connection is the open one
			time.Sleep(100 * time.Millisecond)
		}
		return testserver.FakeVersion
	})
	d := &memcache.Dialect{}
	b := backend.New(backend.Config{Addr: addr, Dialect: d, Timeout: 5 * time.Second})
	t.Cleanup(b.Close)
	dp := kind.NewDedicatedPool(0)
	t.Cleanup(dp.Close)
	get := func() *codec.Request {
		req := &codec.Request{}
		if _, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte("get k\r\n"), req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	send := func(ded *backend.Dedicated, c *backend.Call, wg *sync.WaitGroup) {
		wg.Add(1)
		c.Done = func(*backend.Call) { wg.Done() }
		ded.Send(c)
	}
	var wg sync.WaitGroup
	open, _ := dp.Take(b, 0, d)
	send(open, &backend.Call{Req: get()}, &wg) // its socket opens now
	wg.Wait()
	fresh, _ := dp.Take(b, 0, d)

	first, second := &backend.Call{Req: get()}, &backend.Call{Req: get()}
	now := time.Now()
	first.Gate, first.Written = dp.Order(b, now)
	second.Gate, second.Written = dp.Order(b, now)
	send(fresh, first, &wg)
	send(open, second, &wg)
	wg.Wait()
	if first.Reply.Err != nil || second.Reply.Err != nil {
		t.Fatalf("replies: %v, %v", first.Reply.Err, second.Reply.Err)
	}
	_, sent1, _ := first.Times()
	_, sent2, _ := second.Times()
	if sent2.Before(sent1) {
		t.Fatalf("the second command was written %v before the first", sent1.Sub(sent2))
	}
	// Nothing waits on an order that has ended, once settled.
	third := &backend.Call{Req: get()}
	third.Gate, third.Written = dp.Order(b, time.Now().Add(-kind.OrderSettle))
	select {
	case <-third.Gate:
	default:
		t.Fatalf("a settled command after every command ordered was written waits")
	}
	send(open, third, &wg)
	wg.Wait()
}

// TestOrderArrival orders three commands routed in the reverse of the
// order they arrived in, as two clients' reader goroutines may run: each
// gate opens in arrival order, once the one before it is written.
func TestOrderArrival(t *testing.T) {
	b := backend.New(backend.Config{Addr: "127.0.0.1:1", Dialect: &memcache.Dialect{}})
	t.Cleanup(b.Close)
	dp := kind.NewDedicatedPool(0)
	t.Cleanup(dp.Close)
	t0 := time.Now()
	type ordered struct {
		gate    <-chan struct{}
		written func()
	}
	var turns [3]ordered
	for i := 2; i >= 0; i-- { // routed last to first
		turns[i].gate, turns[i].written = dp.Order(b, t0.Add(time.Duration(i)*time.Microsecond))
	}
	for i, o := range turns {
		select {
		case <-o.gate:
		case <-time.After(5 * time.Second):
			t.Fatalf("command %d never let through", i)
		}
		for _, later := range turns[i+1:] {
			select {
			case <-later.gate:
				t.Fatalf("a command's gate opened before the one that arrived before it was written (%d)", i)
			default:
			}
		}
		o.written()
	}
	if dp.Ordered() {
		t.Fatal("commands ordered after every one was written")
	}
}

// TestWaitBefore holds a request that arrived after a blocking command
// until that command is written, and lets the command through at once
// rather than after its settle.
func TestWaitBefore(t *testing.T) {
	b := backend.New(backend.Config{Addr: "127.0.0.1:1", Dialect: &memcache.Dialect{}})
	t.Cleanup(b.Close)
	dp := kind.NewDedicatedPool(0)
	t.Cleanup(dp.Close)
	at := time.Now().Add(time.Hour) // settles by WaitBefore only
	gate, written := dp.Order(b, at)
	dp.WaitBefore(at) // arrived with it (pipelined after it): no wait
	waited := make(chan struct{})
	go func() {
		dp.WaitBefore(at.Add(time.Microsecond))
		close(waited)
	}()
	select {
	case <-gate:
	case <-time.After(5 * time.Second):
		t.Fatal("a later request did not let the blocking command through")
	}
	select {
	case <-waited:
		t.Fatal("the later request went before the blocking command was written")
	case <-time.After(20 * time.Millisecond):
	}
	written()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the later request still waits after the blocking command was written")
	}
}
