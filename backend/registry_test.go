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

// TestRegistryTotals: a scope's counters per name add up every backend of
// that name, so they never go backwards when a new configuration replaces
// a backend or a server leaves and comes back; names beyond RetainNames
// without a live backend are dropped, their counts kept in All.
func TestRegistryTotals(t *testing.T) {
	m := testserver.StartMemcached(t)
	reg := backend.Registry{RetainNames: 2}
	cfg := backend.Config{Name: "s", Addr: m.Addr, Dialect: mc}

	gen1 := reg.Lease("pool")
	sendAll(t, gen1.Get(cfg), "version\r\n", "version\r\n")
	if got := totalOf(reg.Totals("pool"), "s").Requests; got != 2 {
		t.Fatalf("s counts %d requests; want 2", got)
	}
	// A reload changes the server's options: a new backend, the same name.
	gen2 := reg.Lease("pool")
	changed := cfg
	changed.Conns = 2
	sendAll(t, gen2.Get(changed), "version\r\n")
	if got := totalOf(reg.Totals("pool"), "s"); got.Requests != 3 || got.Responses != 3 {
		t.Errorf("with both backends live: %d requests, %d responses; want 3 and 3", got.Requests, got.Responses)
	}
	gen1.Release(true)
	reg.Wait()
	tot := reg.Totals("pool")
	if got := totalOf(tot, "s").Requests; got != 3 {
		t.Errorf("after the old backend closed: %d requests; want 3", got)
	}
	var lat int64
	for _, n := range tot.All.Latency {
		lat += n
	}
	if lat != 3 {
		t.Errorf("latency counts %d replies; want 3", lat)
	}

	// The server leaves and comes back.
	gen2.Release(true)
	reg.Wait()
	gen3 := reg.Lease("pool")
	sendAll(t, gen3.Get(cfg), "version\r\n")
	if got := totalOf(reg.Totals("pool"), "s").Requests; got != 4 {
		t.Errorf("the server back: %d requests; want 4", got)
	}

	// Three more names come and go: only two idle names stay, the longest
	// idle goes, and All keeps every request.
	for _, name := range []string{"a", "b", "c"} {
		l := reg.Lease("pool")
		c := cfg
		c.Name = name
		sendAll(t, l.Get(c), "version\r\n")
		l.Release(true)
		reg.Wait()
	}
	tot = reg.Totals("pool")
	if _, ok := tot.Of("a"); ok {
		t.Error("the longest idle name is kept beyond RetainNames")
	}
	if _, ok := tot.Of("c"); !ok {
		t.Error("the last idle name is dropped")
	}
	if _, ok := tot.Of("s"); !ok {
		t.Error("a live name is dropped")
	}
	if tot.All.Requests != 7 {
		t.Errorf("All counts %d requests; want 7", tot.All.Requests)
	}
	if got := reg.Totals("other").All.Requests; got != 0 {
		t.Errorf("another scope counts %d requests", got)
	}
	gen3.Release(true)
	reg.Wait()
}

// totalOf is tot's counts of name.
func totalOf(tot backend.Totals, name string) backend.Counts {
	c, _ := tot.Of(name)
	return c
}
