package combine

import (
	"hash/maphash"
	"sync"
)

// guard keeps a fill from bringing back a value a write replaced. A fill
// reads a key from one pool after it missed in the other, and adds what
// it read to the other; a write or delete of the key routed meanwhile
// may have changed both pools, and the add, landing after it, would bring
// the old value back. So the keys are hashed over stripes, each with an
// epoch and a count of the writes in flight:
//
//   - a write takes its stripe (begin: the epoch moves, one more in
//     flight) before any of its requests is routed, and gives it back
//     (end: the epoch moves again, one fewer in flight) once both pools
//     answered, before the client has the reply;
//   - a one-key get takes a ticket, the epoch, before its first request
//     is routed;
//   - its fill is sent only if the epoch is still the ticket's and no
//     write is in flight, and it is sent under the stripe's lock, so a
//     write routed after the check is routed after the fill.
//
// A write that began before the ticket and ended before the fill moved
// the epoch; one still in flight is counted. So a fill lands only when no
// write of its stripe was routed or in flight between its get and the
// fill, and the value it read is then at least as new as every write
// acknowledged before the get. The fill and the writes after it take the
// same socket of the key's server (keyHint), so they reach the server in
// the order they were sent; the fill is an add (memcache ME, Redis NX),
// which stores nothing over a value a write left.
//
// A guard sees only this proxy's writes: other proxies writing the same
// keys through the same route have guards of their own (docs/migrations.md
// says what that leaves). A reload keeps the guard of a route whose pools
// stay, so writes in flight through the old router still count.
type guard struct {
	seed    maphash.Seed
	stripes [256]stripe
}

type stripe struct {
	mu       sync.Mutex
	epoch    uint64
	inflight int32
	_        [40]byte // one cache line each
}

func newGuard() *guard { return &guard{seed: maphash.MakeSeed()} }

func (g *guard) stripe(key []byte) *stripe {
	return &g.stripes[maphash.Bytes(g.seed, key)%uint64(len(g.stripes))]
}

// ticket returns key's epoch now.
func (g *guard) ticket(key []byte) uint64 {
	s := g.stripe(key)
	s.mu.Lock()
	e := s.epoch
	s.mu.Unlock()
	return e
}

// begin counts a write of keys in flight; nil keys is every stripe (a
// flush).
func (g *guard) begin(keys [][]byte) { g.each(keys, 1) }

// end counts a write of keys answered.
func (g *guard) end(keys [][]byte) { g.each(keys, -1) }

func (g *guard) each(keys [][]byte, d int32) {
	if keys == nil {
		for i := range g.stripes {
			g.stripes[i].move(d)
		}
		return
	}
	for _, k := range keys {
		g.stripe(k).move(d)
	}
}

func (s *stripe) move(d int32) {
	s.mu.Lock()
	s.epoch++
	s.inflight += d
	s.mu.Unlock()
}

// fill runs send, under key's stripe lock, if nothing was written to the
// stripe since ticket t; it reports whether it did. send must not block
// nor take the stripe again (a request failed at once answers on the
// caller's goroutine: its Done must not write).
func (g *guard) fill(key []byte, t uint64, send func()) bool {
	s := g.stripe(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != t || s.inflight != 0 {
		return false
	}
	send()
	return true
}
