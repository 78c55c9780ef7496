package backend_test

import (
	"testing"

	"shardproxy/backend"
	"shardproxy/internal/testserver"
)

// TestRegistryShares: two leases of one scope share a backend for the same
// configuration, and it closes only when the last holder gives it back;
// another scope, or another configuration, gets a backend of its own.
func TestRegistryShares(t *testing.T) {
	m := testserver.StartMemcached(t)
	var reg backend.Registry
	cfg := backend.Config{Addr: m.Addr, Dialect: mc}

	old, cur := reg.Lease("pool"), reg.Lease("pool")
	a := old.Get(cfg)
	b := cur.Get(cfg)
	if a != b {
		t.Fatal("two leases of one scope got different backends for the same configuration")
	}
	if made, kept := cur.Counts(); made != 0 || kept != 1 {
		t.Errorf("second lease counts made %d, kept %d; want 0 and 1", made, kept)
	}
	if other := reg.Lease("other").Get(cfg); other == a {
		t.Error("another scope shares the backend")
	}
	changed := cfg
	changed.Conns = 2
	if c := cur.Get(changed); c == a {
		t.Error("another configuration shares the backend")
	}

	old.Release(true)
	if got := sendAll(t, a, "version\r\n"); got[0].Err != nil {
		t.Fatalf("the backend still held by a lease failed: %v", got[0].Err)
	}
	cur.Release(true)
	reg.Wait()
	if got := sendAll(t, a, "version\r\n"); got[0].Err == nil {
		t.Fatal("the backend nothing holds still serves")
	}
	if n := reg.Len(); n != 1 { // other's
		t.Errorf("registry holds %d backends; want 1", n)
	}
}

// TestRegistryDrains: the last Put of a backend with a request in flight
// closes it only once the reply is in.
func TestRegistryDrains(t *testing.T) {
	addr := script(t, 1, "VERSION 1.6.18\r\n")
	var reg backend.Registry
	l := reg.Lease("pool")
	b := l.Get(backend.Config{Addr: addr, Dialect: mc})
	done := make(chan struct{})
	call := backend.Call{Req: request(t, "version\r\n"), Done: func(*backend.Call) { close(done) }}
	b.Send(&call, 0)
	l.Put(b) // while the request is queued or in flight
	<-done
	if call.Reply.Err != nil {
		t.Fatalf("the request in flight at the last Put failed: %v", call.Reply.Err)
	}
	reg.Wait()
	if reg.Len() != 0 {
		t.Errorf("registry holds %d backends after the last Put; want 0", reg.Len())
	}
}
