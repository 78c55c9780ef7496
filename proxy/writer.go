package proxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/resp"
)

// writer is the write side of a session: the requests in the client's
// order and the right to write their replies.
//
// Whoever answers the oldest request writes: the goroutine that completes a
// request (a backend's reader, usually) takes the right to write if nobody
// holds it and sends every reply that is ready, in order, in one write that
// does not wait. Replies that are not at the head wait for the one before
// them; the goroutine that answers that one sends them too. A reply big
// enough to go without copying goes in the same write, from the backend's
// buffer (writev); a value spliced into a pipe follows it from there
// (writeSpliced). Only when a write would block (the client reads
// slowly) or the socket has no file descriptor (TLS), the right passes to
// the session's writer goroutine, which may block. A request is so usually
// answered on the goroutine that read its reply, without waking another.
type writer struct {
	raw  syscall.RawConn // nil: every write goes through the goroutine
	wake chan struct{}   // cap 1: the goroutine holds the right to write
	quit chan struct{}
	gone chan struct{} // closed when the goroutine has returned

	mu      sync.Mutex
	fifo    []*pending  // not yet written, oldest first
	busy    bool        // someone holds the right to write
	started bool        // the writer goroutine runs
	broken  bool        // a write failed or the client quit: drop replies
	failed  bool        // a write failed
	pending []byte      // what a write that would have blocked left over
	freed   []*pending  // written, for the reader to reuse (see newPending)
	stocked atomic.Bool // freed is not empty
	// finish: the session drains and its reader has stopped, so the
	// reply that empties the queue is the last: whoever writes it
	// half-closes the socket at once (finishWrite). finished: that
	// half-close was done.
	finish, finished bool
	halfClosed       bool // finished, and the socket's write side is closed
	corked           bool // the last replies are being written corked (cork)

	mute resp.ReplyMode // CLIENT REPLY OFF or SKIP in force, in the client's order (the holder's; reply.go)

	batch     []*pending // the holder's scratch
	partEnded bool       // the holder's: an error ended the reply to the parts' request

	// The non-blocking write's argument and results (the holder's), and
	// the function RawConn.Write calls, made once: a closure per write
	// would be an allocation per write.
	out     []byte
	big     []byte // written after out, without copying (writev)
	more    bool   // a spliced value follows out and big at once (RawWritevMore)
	n       int
	err     error
	iov     []syscall.Iovec
	writeFn func(fd uintptr) bool

	// writeSpliced's, alike: the reply's value in a pipe, whether to wait
	// for the socket, and the error.
	spliced  *backend.Spliced
	wait     bool
	serr     error
	spliceFn func(fd uintptr) bool
}

// spliceOut is spliceFn: it moves the pipe's bytes while the socket takes
// them, and waits for it when told to.
func (w *writer) spliceOut(fd uintptr) bool {
	done, err := w.spliced.SpliceOut(int(fd))
	w.serr = err
	return done || err != nil || !w.wait
}

// rawWrite is writeFn: one write(2) (or writev(2), with big) attempt,
// never a wait.
func (w *writer) rawWrite(fd uintptr) bool {
	switch {
	case w.more:
		bufs := [2][]byte{w.out, w.big}
		w.n, w.err = backend.RawWritevMore(int(fd), bufs[:], &w.iov)
	case w.big == nil:
		w.n, w.err = backend.RawWrite(int(fd), w.out)
	default:
		bufs := [2][]byte{w.out, w.big}
		w.n, w.err = backend.RawWritev(int(fd), bufs[:], &w.iov)
	}
	return true
}

// flushAt is how many ready replies at the head are written even while a
// later request is still unanswered; fewer wait for it.
const flushAt = 32

func (w *writer) init(nc net.Conn) {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.raw = rc
		}
	}
	w.writeFn = w.rawWrite
	w.spliceFn = w.spliceOut
	w.wake = make(chan struct{}, 1)
	w.quit = make(chan struct{})
	w.gone = make(chan struct{})
}

// push appends ps to the requests awaiting their replies, in order.
func (s *session) push(ps []*pending) {
	if s.queue(ps) {
		s.flush()
	}
}

// queue appends ps to the writer's queue and reports whether one of them
// was answered before it was queued (by the proxy itself, or by a fast
// backend): nobody wrote it, since it was not queued, so the caller
// flushes.
func (s *session) queue(ps []*pending) bool {
	w := &s.w
	w.mu.Lock()
	if w.fifo == nil {
		w.fifo = make([]*pending, 0, 16)
	}
	w.fifo = append(w.fifo, ps...)
	w.mu.Unlock()
	for _, p := range ps {
		if p.ready.Load() {
			return true
		}
	}
	return false
}

// flush writes the replies that are ready at the head, unless someone
// else holds the right to write (who then writes them).
func (s *session) flush() {
	w := &s.w
	w.mu.Lock()
	if w.busy {
		w.mu.Unlock()
		return
	}
	w.busy = true
	s.writeReady(false)
}

// startWriter starts the session's writer goroutine. handOff starts it
// when it is first needed: most sessions never need it, and an idle
// connection then costs one goroutine, not two.
func (s *session) startWriter() {
	go func() {
		defer close(s.w.gone)
		for {
			select {
			case <-s.w.wake:
			case <-s.w.quit:
				return
			}
			s.writeLeftover()
			s.w.mu.Lock()
			s.writeReady(true)
		}
	}()
}

// stop ends the writer goroutine; every reply is written by then.
func (w *writer) stop() {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if started {
		close(w.quit)
		<-w.gone
	}
}

// handOff passes the right to write to the writer goroutine, starting it
// the first time. w.mu is held.
func (s *session) handOff() {
	if !s.w.started {
		s.w.started = true
		s.startWriter()
	}
	s.w.mu.Unlock()
	select {
	case s.w.wake <- struct{}{}:
	default:
	}
}

// writeReady writes the ready replies at the head until none is left, then
// gives up the right to write. It is called with w.mu held and the right
// to write taken, and returns with w.mu released. Without blocking it
// writes with one non-blocking system call per batch and hands the rest to
// the writer goroutine.
func (s *session) writeReady(blocking bool) {
	w := &s.w
	for {
		n := w.readyHead()
		if n > 0 && !blocking && w.raw == nil {
			s.handOff() // the goroutine writes TLS sockets
			return
		}
		if n == 0 {
			if w.finish && len(w.fifo) == 0 && len(w.pending) == 0 {
				s.finishWrite()
			}
			w.busy = false
			w.mu.Unlock()
			if s.waiting.Load() {
				s.wakeReader()
			}
			return
		}
		batch := w.takeHead(n)
		broken := w.broken
		if w.finish && len(w.fifo) == 0 && !w.corked {
			s.cork() // the last replies: their FIN goes in the same segment
		}
		w.mu.Unlock()

		broken = s.writeBatch(batch, broken, blocking)

		w.mu.Lock()
		s.stock(batch)
		clear(batch)
		w.batch = batch[:0]
		w.broken = w.broken || broken
		if len(w.pending) > 0 {
			s.handOff() // the goroutine sends the rest first
			return
		}
	}
}

// lastReply is called by a draining session's reader once it has stopped
// reading (serve): no request will be queued any more. If everything is
// written and nobody writes, it half-closes the socket now; else whoever
// writes the last reply does, right after it (writeReady). Either way the
// client's FIN leaves with its last reply, so a client that checks its
// connection before sending the next request sees the end rather than
// sending into a connection about to close. Sockets only: a TLS session
// half-closes in linger, as before.
func (s *session) lastReply() {
	w := &s.w
	if w.raw == nil {
		return
	}
	w.mu.Lock()
	w.finish = true
	if !w.busy && len(w.fifo) == 0 && len(w.pending) == 0 {
		s.finishWrite()
	}
	w.mu.Unlock()
}

// finishWrite half-closes the socket, once, and reports whether the
// socket is half-closed (a connection that cannot be is not). Under mu,
// with the queue and the leftover written.
func (s *session) finishWrite() bool {
	w := &s.w
	if !w.finished {
		w.finished = true
		cw, ok := s.nc.(interface{ CloseWrite() error })
		w.halfClosed = ok && cw.CloseWrite() == nil // sends what a cork held, with the FIN
	}
	return w.halfClosed
}

// cork holds a TCP socket's last replies until finishWrite's half-close,
// so that they and the FIN leave in one segment: a client that reads the
// reply finds the end with it. Under mu.
func (s *session) cork() {
	w := &s.w
	if _, ok := s.nc.(*net.TCPConn); !ok {
		return
	}
	w.corked = true
	w.raw.Control(corkFD)
}

// readyHead returns how many replies at the head to write now: the ready
// ones, or none while fewer than flushAt are and a later one is not.
// Under mu.
func (w *writer) readyHead() int {
	ready := 0
	for ready < len(w.fifo) && w.fifo[ready].ready.Load() {
		ready++
	}
	if ready < len(w.fifo) && ready < flushAt {
		// Wait for the rest: the client has them in flight too, and
		// one write for all of them costs a fraction of one per
		// reply. Whoever answers the last one writes.
		return 0
	}
	return ready
}

// takeHead moves the first n requests of the queue to the holder's batch
// and returns it. Under mu.
func (w *writer) takeHead(n int) []*pending {
	batch := append(w.batch[:0], w.fifo[:n]...)
	m := copy(w.fifo, w.fifo[n:])
	clear(w.fifo[m:])
	w.fifo = w.fifo[:m]
	return batch
}

// appendOne appends p's reply to out, or, for a big one, writes it with
// what out holds before it (writeBigReply, which reports a client gone).
func (s *session) appendOne(out []byte, p *pending, tally *lookupTally, blocking bool) ([]byte, bool) {
	mark := len(out)
	if p.Req.Part != codec.PartWhole {
		out = s.appendPart(out, p)
		tally.count(p, out[mark:])
		return out, false
	}
	if head, big, spliced, tail := p.BigReply(out, p.pool.dialect); big != nil || spliced != nil {
		if len(head) > mark {
			tally.count(p, head[mark:])
		} else {
			tally.count(p, big)
		}
		return s.writeBigReply(head, big, spliced, tail, blocking)
	}
	out = s.appendReply(out, p)
	tally.count(p, out[mark:])
	return out, false
}

// writeBatch writes the replies of batch, unless the client is gone
// (broken), and is done with its pendings: their counts, held bytes and
// buffers are released. It reports whether the client is gone now.
func (s *session) writeBatch(batch []*pending, broken, blocking bool) bool {
	outHolder, out := getOut()
	now := time.Now() // the batch's replies are written now (observe.go)
	var lat latencyTally
	var tally lookupTally
	var heldDone int64
	var pl *pool // the pool of the last run of batch, and its length
	var inPool, parts int64
	for _, p := range batch {
		if p.pool != pl {
			if pl != nil {
				pl.inflight.Add(-inPool)
				tally.flush(pl)
			}
			pl, inPool = p.pool, 0
		}
		if p.Req.Part != codec.PartWhole {
			parts++
		}
		if !broken {
			if uint8(s.w.mute)|uint8(p.reply) == 0 || s.w.shows(p) {
				out, broken = s.appendOne(out, p, &tally, blocking)
			}
			if p.Req.Close { // shown or muted, a QUIT ends the connection
				out, broken = s.quit(out, blocking), true
			}
		}
		lat.observe(s, p, now)
		release(p)
		heldDone += p.ReplyBytes()
		inPool++
		p.ReleaseReplies() // written or copied: their buffers can go
		p.reset()
	}
	if pl != nil {
		pl.inflight.Add(-inPool)
		tally.flush(pl)
	}
	lat.flush()
	// Once per batch: both counters are shared with the reader's core.
	s.held.Add(-heldDone)
	if parts > 0 {
		s.partsOut.Add(-parts)
	}
	s.written(len(batch))
	if !broken {
		out = s.writeOut(out, blocking)
	}
	putOut(outHolder, out)
	return broken
}

// quit writes out, which ends with a quit's reply, and stops the session:
// nothing goes out after it. It returns out emptied.
func (s *session) quit(out []byte, blocking bool) []byte {
	out = s.writeOut(out, blocking)
	s.closing.Store(true)
	if tc, ok := s.nc.(interface{ CloseRead() error }); ok {
		tc.CloseRead()
	}
	return out
}

// writeBigReply writes head (the replies before, and the start of this
// one) and big, the reply's data in the backend's buffer, then the part
// of its value spliced into a pipe, if any. It returns the write buffer,
// emptied, with what follows the data (tail) in it, and whether the
// write failed.
func (s *session) writeBigReply(head, big []byte, spliced *backend.Spliced, tail string, blocking bool) ([]byte, bool) {
	var broken bool
	if blocking {
		broken = s.writeBig(head, big)
	} else {
		// A spliced value and its After follow the head at once: the
		// socket holds a part-filled segment for them (MSG_MORE, and
		// SPLICE_F_MORE on the value), so the reply leaves in as few
		// segments as its size needs, not one more per part, each of
		// which would cost the kernel a segment and wake the client.
		s.w.more = spliced != nil
		broken = s.writeNB(head, big)
		s.w.more = false
	}
	out := head[:0]
	if spliced != nil {
		if !broken {
			broken = s.writeSpliced(spliced, blocking)
		}
		out = append(out, spliced.After...)
	}
	return append(out, tail...), broken
}

// writeOut writes out; without blocking, what the socket does not take now
// goes to w.pending for the writer goroutine. It returns out emptied.
func (s *session) writeOut(out []byte, blocking bool) []byte {
	if len(out) == 0 {
		return out
	}
	if blocking {
		if _, err := s.nc.Write(out); err != nil {
			s.writeFailed()
		}
		return out[:0]
	}
	s.writeNB(out, nil)
	return out[:0]
}

// writeNB writes out and then big (a reply in the backend's own buffer,
// or nil) with one non-blocking write or writev; what the socket does not
// take now is copied to w.pending, for the writer goroutine (big may be
// recycled once this returns). Once something waits there, everything
// after it does too, in order. It reports whether the write failed.
func (s *session) writeNB(out, big []byte) bool {
	w := &s.w
	w.mu.Lock()
	if len(w.pending) > 0 {
		w.pending = append(append(w.pending, out...), big...)
		w.mu.Unlock()
		return false
	}
	w.mu.Unlock()
	w.out, w.big = out, big
	err := w.raw.Write(w.writeFn)
	n, werr := w.n, w.err
	w.out, w.big, w.err = nil, nil, nil
	if err == nil {
		err = werr
	}
	if n < 0 {
		n = 0
	}
	switch {
	case err == nil || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
		if n < len(out)+len(big) {
			w.mu.Lock()
			if n < len(out) {
				w.pending = append(append(w.pending, out[n:]...), big...)
			} else {
				w.pending = append(w.pending, big[n-len(out):]...)
			}
			w.mu.Unlock()
		}
		return false
	default:
		s.writeFailed()
		return true
	}
}

// writeBig writes out and then big, a reply sent from the backend's own
// buffer (writer goroutine only). It reports whether the write failed.
func (s *session) writeBig(out, big []byte) bool {
	s.vec = [2][]byte{out, big}
	bufs := net.Buffers(s.vec[:])
	_, err := bufs.WriteTo(s.nc)
	s.vec = [2][]byte{}
	if err != nil {
		s.writeFailed()
		return true
	}
	return false
}

// writeSpliced writes the part of a reply's value that waits in a pipe
// (backend.Spliced), after what went before it. Without blocking it moves
// what the socket takes now; a slow client's rest waits in w.pending, as
// any reply's does, copied out of the pipe. It reports whether the write
// failed.
func (s *session) writeSpliced(sp *backend.Spliced, blocking bool) bool {
	w := &s.w
	if !blocking {
		w.mu.Lock()
		behind := len(w.pending) > 0
		w.mu.Unlock()
		if !behind {
			if s.spliceOut(sp, false) != nil {
				s.writeFailed()
				return true
			}
			if sp.Len() == 0 {
				return false
			}
		}
		w.mu.Lock()
		var err error
		w.pending, err = sp.AppendTo(w.pending)
		w.mu.Unlock()
		if err != nil {
			s.writeFailed()
			return true
		}
		return false
	}
	if s.spliceOut(sp, true) != nil {
		s.writeFailed()
		return true
	}
	return false
}

// spliceOut moves sp's bytes to the client's socket; see writer.spliceOut.
func (s *session) spliceOut(sp *backend.Spliced, wait bool) error {
	w := &s.w
	w.spliced, w.wait = sp, wait
	err := w.raw.Write(w.spliceFn)
	if err == nil {
		err = w.serr
	}
	w.spliced, w.serr = nil, nil
	return err
}

// writeLeftover sends, blocking, what a non-blocking write left over.
func (s *session) writeLeftover() {
	w := &s.w
	w.mu.Lock()
	rest := w.pending
	w.pending = nil
	failed := w.failed
	w.mu.Unlock()
	if len(rest) > 0 && !failed {
		if _, err := s.nc.Write(rest); err != nil {
			s.writeFailed()
		}
	}
}

// writeFailed drops the client: the reader stops, later replies are
// dropped.
func (s *session) writeFailed() {
	s.w.mu.Lock()
	s.w.broken, s.w.failed = true, true
	s.w.mu.Unlock()
	s.closing.Store(true)
	// Wake the reader; serve closes the socket once it is out. Closing
	// here could wait for the reader to leave its read callback, which
	// may be this very goroutine (see readLoop).
	s.nc.SetReadDeadline(time.Now())
}

// wakeReader wakes a reader waiting in waitFor or quiesce.
func (s *session) wakeReader() {
	s.mu.Lock()
	s.drained.Broadcast()
	s.mu.Unlock()
}

// quiesce waits until every request read has been answered and its reply
// written (or dropped), and nobody is writing.
func (s *session) quiesce() {
	s.batch.Flush()
	s.leave()
	idle := func() bool {
		if s.outstanding.Load() != 0 {
			return false
		}
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		return !s.w.busy
	}
	s.waiting.Store(true)
	s.mu.Lock()
	for !idle() {
		s.drained.Wait()
	}
	s.mu.Unlock()
	s.waiting.Store(false)
}

// lookupTally adds up the lookups, hits and storage requests of a batch's
// replies (codec.LookupCounter), to be added to their pool's counters
// once per run of one pool rather than once per reply: the batch loop
// flushes it where it ends a run.
type lookupTally struct {
	gets, hits, stores int64
}

// count counts p, whose client is sent reply (or its start).
func (t *lookupTally) count(p *pending, reply []byte) {
	lc := p.pool.lookups
	if lc == nil {
		return
	}
	switch keys, store := lc.Lookups(&p.Req); {
	case store:
		t.stores++
	case keys > 0:
		t.gets += int64(keys)
		t.hits += int64(lc.Hits(&p.Req, reply))
	}
}

// flush adds the counts to pl's counters, the pool of the replies
// counted.
func (t *lookupTally) flush(pl *pool) {
	st := pl.stats
	if t.gets > 0 {
		st.GetCmds.Add(t.gets)
		st.GetHits.Add(t.hits)
	}
	if t.stores > 0 {
		st.SetCmds.Add(t.stores)
	}
	*t = lookupTally{}
}
