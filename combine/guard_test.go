package combine

import "testing"

// The guard lets a fill through only when no write of its stripe began
// or ended since its ticket, and none is in flight.
func TestGuard(t *testing.T) {
	g := newGuard()
	k := []byte("k")
	keys := [][]byte{k}
	sent := 0
	send := func() { sent++ }

	if tk := g.ticket(k); !g.fill(k, tk, send) || sent != 1 {
		t.Fatal("a fill with nothing written was refused")
	}
	tk := g.ticket(k)
	g.begin(keys)
	if g.fill(k, tk, send) {
		t.Fatal("a fill passed a write routed after its get")
	}
	tk = g.ticket(k) // taken while the write is in flight
	if g.fill(k, tk, send) {
		t.Fatal("a fill passed a write in flight")
	}
	g.end(keys)
	if g.fill(k, tk, send) {
		t.Fatal("a fill passed a write answered after its get")
	}
	if tk := g.ticket(k); !g.fill(k, tk, send) || sent != 2 {
		t.Fatal("a fill after the write ended was refused")
	}
	tk = g.ticket(k)
	g.begin(nil) // a flush: every stripe
	g.end(nil)
	if g.fill(k, tk, send) {
		t.Fatal("a fill passed a flush")
	}
}

// A reload that keeps a route's two pools keeps its guard, so writes in
// flight through the old router still stop the new one's fills; other
// pools get a guard of their own.
func TestGuardKeptAcrossReload(t *testing.T) {
	env := &envLite{}
	old := newMigrate("migrate", nil, nil, "a", "b", plans["dual_write"], env, nil)
	if m := newMigrate("migrate", nil, nil, "a", "b", plans["warm"], env, old); m.guard != old.guard {
		t.Error("the same pools got a new guard")
	}
	if m := newMigrate("migrate", nil, nil, "a", "c", plans["warm"], env, old); m.guard == old.guard {
		t.Error("other pools kept the guard")
	}
}
