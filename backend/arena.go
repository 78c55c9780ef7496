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
// counts its references: one per carved reply not yet released, and the
// socket's while the socket carves from it. At zero it goes back to
// arenaPool: at a few hundred thousand replies a second, chunks left to
// the garbage collector kept it marking and sweeping. A reply that is
// never released (Call.Release is optional) keeps its chunk out of the
// pool, and the collector frees it as before.
//
// The socket takes its reference as arenaBias, from which it pays each
// carved reply's reference without an atomic add: the reader and the
// goroutines that release replies on the other core then do not pull the
// count's cache line back and forth once per reply (an add there cost 2%
// of the proxy's CPU, pipelined). When the socket moves on it gives back
// what it did not pay out (leave).
type arena struct {
	buf    []byte // written by the carving socket's reader only
	refs   atomic.Int32
	carved int32 // replies carved so far; the carving socket's reader only
}

// arenaBias is the socket's reference: more than a chunk can hold replies.
const arenaBias = 1 << 30

var arenaPool = sync.Pool{New: func() any { return &arena{buf: make([]byte, 0, arenaSize)} }}

// getArena returns an empty chunk holding the carving socket's reference.
func getArena() *arena {
	a := arenaPool.Get().(*arena)
	a.buf = a.buf[:0]
	a.carved = 0
	a.refs.Store(arenaBias)
	return a
}

// release drops one carved reply's reference; the last reference
// recycles the chunk.
func (a *arena) release() { a.drop(1) }

// leave drops the carving socket's reference, less the references it
// paid out to the replies it carved.
func (a *arena) leave() { a.drop(arenaBias - a.carved) }

func (a *arena) drop(n int32) {
	if a.refs.Add(-n) == 0 {
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
			a.leave()
		}
		a = getArena()
		s.arena = a
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	a.carved++
	return a.buf[l : l+n : l+n], a
}

// dropArena gives up the socket's reference to its current chunk, when
// its reader stops.
func (s *sock) dropArena() {
	if s.arena != nil {
		s.arena.leave()
		s.arena = nil
	}
}
