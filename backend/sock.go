package backend

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/codec"
)

// sock is one TCP or unix socket. Two goroutines use it, each with data
// of its own: the conn's writer sends batches, and the socket's reader
// frames replies and completes calls. They share only the hand-off (the
// calls written and not yet taken by the reader) and the socket's fate,
// under mu, which no client session ever takes.
type sock struct {
	c   *conn
	nc  net.Conn
	raw *rawConn // nc's socket, for reads and writes that skip the scheduler; nil for TLS
	// meta is set before the socket is used when its server answered
	// the meta probe: Config.MetaRewrite applies to the calls written on it.
	meta bool

	// dead is set once, under mu, by whoever finds the socket broken
	// (kill): nothing more is written on it, and its reader fails the
	// calls in flight.
	dead atomic.Bool
	// pending counts the calls handed to the reader and not yet
	// completed: added to by the writer under mu, taken from by the
	// reader. The writer arms the read deadline when it leaves zero.
	pending atomic.Int64

	mu      sync.Mutex
	handoff []*Call   // written (or being written), oldest first; not yet taken by the reader
	writing bool      // the writer is sending calls it handed over
	wrote   sync.Cond // on mu: writing went false
	cause   Cause     // why the socket died, once dead
	readDL  time.Time // the read deadline set on the socket; zero: none

	// The reader goroutine's own; nothing else touches them.
	inflight []*Call          // taken from handoff, oldest first; a window of fifo
	fifo     []*Call          // inflight's storage, from its start
	other    []*Call          // handoff's other storage: the two swap
	st       codec.ReplyState // how far the reply to inflight[0] is framed
	arena    *arena           // small replies are carved from it
	done     []*Call          // deliver's scratch
	run      []*codec.Request // the joined calls' requests at the head, while a joined call is (join.go)
	runBuf   []*codec.Request // run's storage
	spl      splicing         // the head's reply, while its value is spliced (splice.go)

	// The writer's own: join's scratch.
	joinBuf  []byte
	joinReqs []*codec.Request
}

func newSock(c *conn, nc net.Conn) *sock {
	s := &sock{c: c, nc: nc, raw: newRawConn(nc)}
	s.wrote.L = &s.mu
	return s
}

// write hands batch to the reader and writes it in one go; false if the
// socket died first, when nothing was written and the calls are still
// the writer's. The wire bytes and deadlines are read before the hand-off:
// from then on the reader may complete the calls, and their owners reuse
// them. Only the writer calls it.
func (s *sock) write(batch []*Call, bufs net.Buffers) (net.Buffers, bool) {
	if s.c.push != nil {
		return s.writePush(batch, bufs)
	}
	b := s.c.b
	var wrote []func()
	if s.c.once { // a dedicated socket: its calls may be ordered after others' (Call.Gate)
		wrote = passGates(batch, nil)
		defer func() {
			for _, w := range wrote {
				w()
			}
		}()
	}
	deadline := earliest(batch)
	first, n := batch[0].deadline, int64(len(batch))
	now := time.Now() // one clock read per write; Call.Times reports it
	for _, call := range batch {
		call.sent = now
	}
	s.mu.Lock()
	if s.dead.Load() {
		s.mu.Unlock()
		return bufs[:0], false
	}
	// Rewritten only now that this socket takes them (under mu, before
	// the hand-off): calls a dead socket gives back go out on the next
	// one as they came, whatever its server speaks.
	if s.meta && b.cfg.MetaRewrite != nil {
		s.rewriteMeta(batch)
	}
	if b.joiner != nil {
		bufs = s.join(batch, bufs)
	} else {
		for _, call := range batch {
			bufs = append(bufs, call.Req.Wire)
		}
	}
	s.handoff = append(s.handoff, batch...)
	s.writing = true
	// Into one count before out of the other: a drain never sees both
	// at zero while these calls are under way.
	b.stats.OutQueue.Add(n)
	b.stats.InQueue.Add(-n)
	if s.pending.Add(n) == n && !first.IsZero() && (s.readDL.IsZero() || first.Before(s.readDL)) {
		// The socket was idle: arm the read deadline for the oldest
		// call, unless the one set is earlier. An idle socket keeps
		// the deadline of its last busy spell: when it passes, the
		// reader's wake-up finds nothing late, and expired re-arms the
		// deadline for the oldest call then in flight, or clears it.
		// So a socket busy with one request at a time moves its
		// deadline once a timeout, not once a request: setting one
		// moves a timer in the runtime's heap. Under mu, so that
		// expired, clearing the deadline of an idle socket, cannot
		// undo this.
		s.setReadDeadline(first)
	}
	s.mu.Unlock()

	if err := s.writeOut(bufs, deadline); err != nil {
		s.kill(writeCause(err), true)
	}
	clear(bufs)
	return bufs[:0], true
}

// earliest returns the earliest deadline among the calls, or zero when
// none has one.
func earliest(lists ...[]*Call) time.Time {
	var first time.Time
	for _, calls := range lists {
		for _, call := range calls {
			if d := call.deadline; !d.IsZero() && (first.IsZero() || d.Before(first)) {
				first = d
			}
		}
	}
	return first
}

// rewriteMeta rewrites the calls that ask for it (Call.MetaRewrite) for
// a server that speaks the meta protocol. Under mu, before the hand-off.
func (s *sock) rewriteMeta(batch []*Call) {
	b := s.c.b
	for _, call := range batch {
		if call.MetaRewrite {
			was := len(call.Req.Wire)
			if b.cfg.MetaRewrite(call.Req) {
				// RequestBytes counted the request as it was queued;
				// it counts what the server is sent.
				b.stats.RequestBytes.Add(int64(len(call.Req.Wire) - was))
			}
		}
	}
}

// writeCause names why a write failed: its deadline, or anything else.
func writeCause(err error) Cause {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return CauseTimeout
	}
	return CauseWriting
}

// writeOut writes bufs, with s.writing set by the caller under mu, and
// clears s.writing once the system call has returned. Only the writer
// calls it.
//
// deadline (zero: none) bounds a write that has to wait for the socket to
// take more. On a raw socket it is set only then, and cleared after: most
// writes go out at once, and setting a deadline moves a timer in the
// runtime's heap.
func (s *sock) writeOut(bufs net.Buffers, deadline time.Time) error {
	var err error
	if s.raw != nil {
		err = s.raw.writeAll(bufs, deadline, s.nc.SetWriteDeadline)
	} else {
		s.nc.SetWriteDeadline(deadline)
		w := bufs // WriteTo consumes its receiver
		_, err = w.WriteTo(s.nc)
	}
	// A reader failing the socket meanwhile waits for this before it
	// completes any call: the system call may have been reading their
	// request bytes until now.
	s.mu.Lock()
	s.writing = false
	s.wrote.Broadcast()
	s.mu.Unlock()
	return err
}

// kill marks the socket dead and closes it, the first time: nothing more
// is written on it, and its reader, woken by the close, fails the calls
// in flight. It returns the cause the socket died of, the first one
// given. count says whether the failure counts against the backend's
// health. Any goroutine may call it; it completes no call.
func (s *sock) kill(cause Cause, count bool) Cause {
	return s.killWith(cause, count, sockFailure{depth: -1})
}

// killWith is kill for a goroutine that knows more of the failure: the
// calls the socket held and the bytes read and not framed (Event).
func (s *sock) killWith(cause Cause, count bool, f sockFailure) Cause {
	s.mu.Lock()
	if s.dead.Load() {
		cause = s.cause
		s.mu.Unlock()
		return cause
	}
	s.cause = cause
	s.dead.Store(true)
	// Dead under mu, the writer hands over no more calls (write): those
	// in flight now are all the failure fails.
	count = count || (f.countBusy && s.pending.Load() > 0)
	s.mu.Unlock()
	s.c.spend(cause)
	s.nc.Close()
	if count {
		if f.depth < 0 {
			f.depth = int(s.pending.Load())
		}
		s.c.b.sockFailed(s.c, cause, f)
	}
	return cause
}

// take moves the calls handed over since the last take to the end of the
// in-flight list, and reports whether there were any. Reader only.
func (s *sock) take() bool {
	s.mu.Lock()
	h := s.swap()
	s.mu.Unlock()
	return s.adopt(h)
}

// swap takes the hand-off, leaving the reader's spare storage in its
// place (under mu).
func (s *sock) swap() []*Call {
	h := s.handoff
	s.handoff, s.other = s.other[:0], nil
	return h
}

// adopt appends h, a taken hand-off, to the in-flight list and keeps its
// storage for the next swap.
func (s *sock) adopt(h []*Call) bool {
	s.queue(h)
	clear(h)
	s.other = h[:0]
	return len(h) > 0
}

// queue appends batch to inflight. The replies pop calls off the front,
// so inflight moves through fifo; it starts at the front again once it
// drains, and slides back there when it reaches fifo's end with room at
// the front. Only a queue longer than any before it allocates: a socket
// reuses its storage batch after batch.
func (s *sock) queue(batch []*Call) {
	q, n := s.inflight, len(s.inflight)+len(batch)
	if len(q) == 0 {
		q = s.fifo[:0]
	} else if n > cap(q) && n <= cap(s.fifo) {
		all := s.fifo[:cap(s.fifo)]
		end := cap(s.fifo) - cap(q) + len(q) // where q ends in fifo
		clear(all[copy(all, q):end])
		q = all[:len(q)]
	}
	before := cap(q)
	q = append(q, batch...)
	if cap(q) != before { // new storage, which q starts
		s.fifo = q[:0]
	}
	s.inflight = q
}

// pop drops the oldest call from inflight.
func (s *sock) pop() {
	s.inflight[0] = nil
	s.inflight = s.inflight[1:]
	if len(s.inflight) == 0 {
		s.inflight = s.fifo[:0] // drained: the next batch starts at the front
	}
}
