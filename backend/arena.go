package backend

import (
	"sync"
	"sync/atomic"
)

// Replies up to arenaMax are copied into 64 KiB chunks. Bigger ones stay
// in the read buffer (see deliver), which then goes to the reply: a 16 KiB
// buffer for a 5 KiB reply, as a multi-get's part often is, cost more in
// garbage than the copy does.
const (
	arenaSize = 64 << 10
	arenaMax  = 16 << 10
)

// arena is a chunk small replies are carved from (see sock.carve). It
// counts its references: one per carved reply not yet released, and one
// for the socket while the socket carves from it. At zero it goes back to
// arenaPool: at a few hundred thousand replies a second, chunks left to
// the garbage collector kept it marking and sweeping. A reply that is
// never released (Call.Release is optional) keeps its chunk out of the
// pool, and the collector frees it as before.
type arena struct {
	buf  []byte // written by the carving socket's reader only
	refs atomic.Int32
}

var arenaPool = sync.Pool{New: func() any { return &arena{buf: make([]byte, 0, arenaSize)} }}

// getArena returns an empty chunk holding the caller's reference.
func getArena() *arena {
	a := arenaPool.Get().(*arena)
	a.buf = a.buf[:0]
	a.refs.Store(1)
	return a
}

// release drops one reference; the last one recycles the chunk.
func (a *arena) release() {
	if a.refs.Add(-1) == 0 {
		arenaPool.Put(a)
	}
}

// carve returns n bytes (n <= arenaMax) for a small reply and the chunk
// they are cut from, with a reference taken for the reply. The reader
// allocates a chunk per 64 KiB of replies rather than one per reply, and
// reuses chunks whose replies have all been released.
func (s *sock) carve(n int) ([]byte, *arena) {
	a := s.arena
	if a == nil || cap(a.buf)-len(a.buf) < n {
		if a != nil {
			a.release() // the socket's own reference
		}
		a = getArena()
		s.arena = a
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	a.refs.Add(1)
	return a.buf[l : l+n : l+n], a
}

// dropArena releases the socket's reference to its current chunk, when
// its reader stops.
func (s *sock) dropArena() {
	if s.arena != nil {
		s.arena.release()
		s.arena = nil
	}
}
