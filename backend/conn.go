package backend

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shardproxy/codec"
)

// conn is one of a backend's socket slots: a queue of calls not yet written,
// the current socket (if any), and the writer goroutine that dials and writes.
type conn struct {
	b       *Backend
	wake    chan struct{} // cap 1: work is queued or the conn is closing
	started atomic.Bool   // the writer goroutine runs (from the first kick on)

	mu     sync.Mutex
	queue  []*Call // not yet written
	spare  []*Call // the previous queue's storage, reused
	cur    *sock
	closed bool
}

// sock is one TCP or unix socket and the calls written on it, oldest first.
// Its reader goroutine matches replies to inflight in order.
type sock struct {
	c        *conn
	nc       net.Conn
	raw      *rawConn // nc's socket, for reads and writes that skip the scheduler; nil for TLS
	arena    *arena   // small replies are carved from it; reader goroutine only
	done     []*Call  // deliver's scratch; reader goroutine only
	inflight []*Call  // guarded by c.mu; a window of fifo
	fifo     []*Call  // inflight's storage, from its start; guarded by c.mu
	dead     bool     // guarded by c.mu
	cause    Cause    // why the socket failed; guarded by c.mu
	// writing is set (under c.mu) while write sends a published batch:
	// fail then leaves the calls to write (in deferred), which completes
	// them once the system call no longer reads their request bytes.
	writing  bool
	deferred []*Call
}

func newConn(b *Backend) *conn {
	return &conn{b: b, wake: make(chan struct{}, 1)}
}

// kick wakes the writer, starting it on first use: an idle backend (most of
// a large pool) costs no goroutine.
func (c *conn) kick() {
	if !c.started.Load() && !c.started.Swap(true) {
		go c.writeLoop()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) enqueue(call *Call) {
	one := [1]staged{{c, call}}
	c.enqueueStaged(one[:])
}

// enqueueStaged queues the calls of calls that are for c, in their order.
func (c *conn) enqueueStaged(calls []staged) {
	var n, bytes int64
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		for _, sc := range calls {
			if sc.conn == c {
				c.b.stats.Requests.Add(1)
				c.b.stats.RequestBytes.Add(int64(len(sc.call.Req.Wire)))
				c.b.finish(sc.call, CauseClosed)
			}
		}
		return
	}
	for _, sc := range calls {
		if sc.conn == c {
			c.queue = append(c.queue, sc.call)
			n++
			bytes += int64(len(sc.call.Req.Wire))
		}
	}
	c.b.stats.InQueue.Add(n)
	c.mu.Unlock()
	c.b.stats.Requests.Add(n)
	c.b.stats.RequestBytes.Add(bytes)
	c.kick()
}

func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	queue := c.queue
	c.queue = nil
	s := c.cur
	c.mu.Unlock()
	c.b.stats.InQueue.Add(-int64(len(queue)))
	for _, call := range queue {
		c.b.finish(call, CauseClosed)
	}
	if s != nil {
		s.fail(CauseClosed, false)
	}
	c.kick()
}

// dialResult is what a connect attempt tells the writer.
type dialResult struct {
	s     *sock
	cause Cause
}

// writeLoop takes batches off the queue and writes them on the current
// socket. With no socket it starts a connect in its own goroutine and holds
// the calls meanwhile, failing each at its own deadline: a request never
// waits out a connect timeout longer than its timeout. A failed connect
// fails the calls that were waiting when it started; calls that came later
// get a connect of their own.
func (c *conn) writeLoop() {
	var (
		bufs       net.Buffers
		attempt    []*Call         // waiting for the connect under way
		waiting    []*Call         // came after it started
		dialing    chan dialResult // non-nil while a connect runs
		timer      = time.NewTimer(time.Hour)
		preconnect = c.b.cfg.Preconnect
	)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-c.wake:
			// Let the goroutines that are ready to run (clients whose
			// requests arrived in the same poll) queue theirs first: one
			// write then carries them all. The kick put this goroutine
			// next in line; without yielding it would write each request
			// alone, and every write wakes the server.
			runtime.Gosched()
		case r := <-dialing:
			dialing = nil
			if r.s == nil {
				attempt = c.failAll(attempt, r.cause)
			}
		case <-timer.C:
			attempt, waiting = c.expire(attempt), c.expire(waiting)
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			c.failAll(attempt, CauseClosed)
			c.failAll(waiting, CauseClosed)
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.spare = nil
		s := c.cur
		c.mu.Unlock()
		// The calls stay counted in InQueue until they are written or
		// answered: a reload drains a backend by that count.
		waiting = append(waiting, batch...)
		c.recycle(batch)

		if s == nil {
			if dialing == nil && (len(attempt)+len(waiting) > 0 || preconnect) {
				preconnect = false
				attempt, waiting = append(attempt, waiting...), waiting[:0]
				dialing = make(chan dialResult, 1)
				go func(ch chan<- dialResult) {
					s, cause := c.connect()
					ch <- dialResult{s, cause}
				}(dialing)
			}
			armEarliest(timer, attempt, waiting)
			continue
		}
		if len(attempt)+len(waiting) > 0 {
			timer.Stop()
			attempt = append(attempt, waiting...)
			clear(waiting)
			waiting = waiting[:0]
			bufs = s.write(attempt, bufs[:0])
			clear(attempt)
			attempt = attempt[:0]
		}
	}
}

// failAll answers every call with cause and returns the emptied slice.
func (c *conn) failAll(calls []*Call, cause Cause) []*Call {
	c.b.stats.InQueue.Add(-int64(len(calls)))
	for _, call := range calls {
		c.b.finish(call, cause)
	}
	clear(calls)
	return calls[:0]
}

// expire answers the calls whose deadline has passed with CauseTimeout and
// returns the others.
func (c *conn) expire(calls []*Call) []*Call {
	now := time.Now()
	kept := calls[:0]
	for _, call := range calls {
		if !call.deadline.IsZero() && !now.Before(call.deadline) {
			c.b.stats.InQueue.Add(-1)
			c.b.finish(call, CauseTimeout)
		} else {
			kept = append(kept, call)
		}
	}
	clear(calls[len(kept):])
	return kept
}

// armEarliest sets t to fire at the earliest deadline among the calls.
func armEarliest(t *time.Timer, lists ...[]*Call) {
	var first time.Time
	for _, calls := range lists {
		for _, call := range calls {
			if d := call.deadline; !d.IsZero() && (first.IsZero() || d.Before(first)) {
				first = d
			}
		}
	}
	t.Stop()
	if !first.IsZero() {
		t.Reset(time.Until(first))
	}
}

// recycle keeps a written batch's storage for the next queue.
func (c *conn) recycle(batch []*Call) {
	clear(batch)
	c.mu.Lock()
	if c.spare == nil && cap(batch) <= 4096 {
		c.spare = batch[:0]
	}
	c.mu.Unlock()
}

// connect dials and validates a new socket, or reports why it could not.
func (c *conn) connect() (*sock, Cause) {
	b := c.b
	if b.Bad() {
		return nil, CauseMarkedBad
	}
	deadline := time.Now().Add(b.cfg.ConnectTimeout)
	nc, err := dial(b.cfg, deadline)
	if err != nil {
		b.failed(CauseConnecting)
		return nil, CauseConnecting
	}
	if cause, ok := handshake(nc, b.cfg.Dialect, b.cfg.Handshake, deadline); !ok {
		nc.Close()
		b.failed(cause)
		return nil, cause
	}
	s := &sock{c: c, nc: nc, raw: newRawConn(nc)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, CauseClosed
	}
	c.cur = s
	c.mu.Unlock()
	b.stats.Connections.Add(1)
	go s.readLoop()
	return s, 0
}

// handshake sends the dialect's validation requests and checks every reply.
func handshake(nc net.Conn, d codec.Dialect, o codec.HandshakeOptions, deadline time.Time) (Cause, bool) {
	reqs := d.Handshake(o)
	if len(reqs) == 0 {
		return 0, true
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	var out []byte
	for _, r := range reqs {
		out = append(out, r.Wire...)
	}
	if _, err := nc.Write(out); err != nil {
		return CauseWriting, false
	}
	buf := make([]byte, 0, 512)
	for _, r := range reqs {
		for {
			n, kind, err := d.ParseReply(buf, r)
			if err == nil {
				if kind != codec.ReplyOK {
					return CauseBadValidate, false
				}
				buf = buf[:copy(buf, buf[n:])]
				break
			}
			if !errors.Is(err, codec.ErrIncomplete) || len(buf) >= 64<<10 {
				return CauseBadValidate, false
			}
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			m, err := nc.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+m]
			if err != nil && m == 0 {
				return CauseReadValidate, false
			}
		}
	}
	if len(buf) != 0 {
		return CauseBadValidate, false
	}
	return 0, true
}

// queue appends batch to inflight (under c.mu). The replies pop calls off
// the front, so inflight moves through fifo; it starts at the front again
// once it drains, and slides back there when it reaches fifo's end with
// room at the front. Only a queue longer than any before it allocates:
// a socket reuses its storage batch after batch.
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

// pop drops the oldest call from inflight (under c.mu).
func (s *sock) pop() {
	s.inflight[0] = nil
	s.inflight = s.inflight[1:]
	if len(s.inflight) == 0 {
		s.inflight = s.fifo[:0] // drained: the next batch starts at the front
	}
}

// write moves batch to the in-flight list and writes it in one go. The
// wire bytes and deadlines are read before the batch is published: once it
// is in s.inflight, a concurrent fail may complete its calls and their
// owners may reuse them.
func (s *sock) write(batch []*Call, bufs net.Buffers) net.Buffers {
	c := s.c
	var deadline time.Time
	for _, call := range batch {
		bufs = append(bufs, call.Req.Wire)
		if !call.deadline.IsZero() && (deadline.IsZero() || call.deadline.Before(deadline)) {
			deadline = call.deadline
		}
	}
	first := batch[0].deadline
	c.mu.Lock()
	if s.dead {
		c.mu.Unlock()
		c.b.stats.InQueue.Add(-int64(len(batch)))
		// The socket died after it was picked; these calls were never sent.
		for _, call := range batch {
			c.b.finish(call, CauseDisconnected)
		}
		clear(bufs)
		return bufs[:0]
	}
	wasIdle := len(s.inflight) == 0
	s.queue(batch)
	s.writing = true
	// Out of one count into the other under the lock: a drain never sees
	// both at zero while these calls are under way.
	c.b.stats.OutQueue.Add(int64(len(batch)))
	c.b.stats.InQueue.Add(-int64(len(batch)))
	if wasIdle && !first.IsZero() {
		// Arm the read deadline for the oldest call. An idle socket may
		// still carry a stale, earlier deadline: that only costs a
		// spurious wake-up, after which expired re-arms it.
		s.nc.SetReadDeadline(first)
	}
	c.mu.Unlock()

	s.nc.SetWriteDeadline(deadline)
	var err error
	if s.raw != nil {
		err = s.raw.writeAll(bufs)
	} else {
		w := bufs // WriteTo consumes its receiver
		_, err = w.WriteTo(s.nc)
	}
	c.mu.Lock()
	s.writing = false
	deferred, cause := s.deferred, s.cause
	s.deferred = nil
	c.mu.Unlock()
	c.b.stats.OutQueue.Add(-int64(len(deferred)))
	for _, call := range deferred { // failed while their bytes were being sent
		c.b.finish(call, cause)
	}
	if err != nil {
		cause := CauseWriting
		if errors.Is(err, os.ErrDeadlineExceeded) {
			cause = CauseTimeout
		}
		s.fail(cause, true)
	}
	clear(bufs)
	return bufs[:0]
}

// fail drops the socket and answers every call written on it with cause.
// It is safe to call more than once; only the first call acts. count says
// whether the failure counts against the backend's health.
func (s *sock) fail(cause Cause, count bool) {
	s.c.mu.Lock()
	calls, ok := s.detach(cause)
	s.c.mu.Unlock()
	if ok {
		s.failed(cause, count, calls)
	}
}

// detach marks the socket dead, so that nothing more is written on it, and
// returns the calls fail must answer; false if it was dead already. c.mu
// is held.
func (s *sock) detach(cause Cause) ([]*Call, bool) {
	c := s.c
	if s.dead {
		return nil, false
	}
	s.dead = true
	s.cause = cause
	if c.cur == s {
		c.cur = nil
	}
	calls := s.inflight
	s.inflight = nil
	if s.writing { // write completes them when its system call is done
		s.deferred, calls = calls, nil
	}
	return calls, true
}

// failed is the rest of fail, outside the lock: it closes the socket and
// answers calls with cause.
func (s *sock) failed(cause Cause, count bool, calls []*Call) {
	s.nc.Close()
	b := s.c.b
	b.stats.Connections.Add(-1)
	b.stats.OutQueue.Add(-int64(len(calls)))
	if count {
		b.failed(cause)
	}
	if cause != CauseClosed {
		b.log.Debug("backend socket failed", "cause", cause.String(), "in_flight", len(calls))
	}
	for _, call := range calls {
		b.finish(call, cause)
	}
}

const (
	readChunk   = 16 << 10
	shrinkAbove = 1 << 20
	exactUpTo   = 4 << 20 // largest announced reply given its buffer at once
)

// readLoop reads replies and hands each to the oldest in-flight call.
func (s *sock) readLoop() {
	r := reader{buf: GetBuffer(readChunk), pooled: true}
	defer func() {
		if r.pooled {
			PutBuffer(r.buf)
		}
		s.dropArena()
	}()
	for {
		r.grow()
		var n int
		var err error
		if s.raw != nil {
			n, err = s.raw.read(r.buf[len(r.buf):cap(r.buf)])
		} else {
			n, err = s.nc.Read(r.buf[len(r.buf):cap(r.buf)])
		}
		r.buf = r.buf[:len(r.buf)+n]
		if n > 0 && !s.deliver(&r) {
			return
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if s.expired() {
					s.fail(CauseTimeout, true)
					return
				}
				continue
			}
			cause := CauseReading
			if errors.Is(err, net.ErrClosed) {
				cause = CauseClosed
			} else if isEOF(err) {
				cause = CauseDisconnected
			}
			// A server closing an idle socket (an idle timeout, a restart
			// between requests) failed no request: it does not count
			// towards marking the backend bad; the next request redials.
			count := cause != CauseClosed && !(cause == CauseDisconnected && s.idle())
			s.fail(cause, count)
			return
		}
		if len(r.buf) == 0 && cap(r.buf) > shrinkAbove {
			r.replace(0, 0)
		}
	}
}

// reader is a socket's read buffer. Nothing outside the reader points into
// buf: a reply that keeps a slice of it (see deliver) takes the buffer,
// and the reader moves on to a new one.
type reader struct {
	buf    []byte
	need   int  // the length the unfinished reply at buf's start announced
	pooled bool // buf came from GetBuffer
}

// grow makes room before a read.
func (r *reader) grow() {
	room := cap(r.buf) - len(r.buf)
	switch {
	case r.need > cap(r.buf) && (r.need <= exactUpTo || room < readChunk/4):
		// A big reply: one buffer of its length, read into directly
		// and handed over whole (see deliver). Past exactUpTo the
		// buffer grows as the bytes arrive: a reply's header alone
		// does not commit a gigabyte.
		n := r.need
		if n > exactUpTo {
			n = min(n, 2*cap(r.buf))
		}
		r.replace(n, len(r.buf))
	case r.need <= len(r.buf) && room < readChunk/4:
		r.replace(2*cap(r.buf), len(r.buf))
	}
}

// replace moves the last keep bytes of buf to a new buffer of at least size
// bytes (readChunk at least). The old one is recycled unless a reply took it.
func (r *reader) replace(size, keep int) {
	old, oldPooled := r.buf, r.pooled
	// Room for what is kept too: a buffer append grew would be a second
	// allocation, of a size the pools do not take back.
	r.buf, r.pooled = GetBuffer(max(size, keep, readChunk)), true
	r.buf = append(r.buf, old[len(old)-keep:]...)
	if oldPooled {
		PutBuffer(old)
	}
}

// deliver frames every complete reply in r.buf and completes its call. It
// returns false when the socket failed.
//
// Small replies are copied out (see carve). The first reply over arenaMax
// is handed over as a slice of the buffer itself, which it then owns (and
// recycles, see Call.Release, when it starts the buffer): the bytes after
// it move to a new buffer.
//
// The replies of one read are framed under one hold of the lock (fail
// cannot answer a call while its reply is being framed) and completed
// after it, in order.
func (s *sock) deliver(r *reader) bool {
	c := s.c
	b := c.b
	buf := r.buf
	start := 0
	var (
		taken  bool  // a reply owns buf
		dead   bool  // fail answered the calls left
		failed Cause // why the socket must fail, if it must
		bytes  int64
	)
	r.need = 0
	done := s.done[:0]
	c.mu.Lock()
	for start < len(buf) {
		if s.dead {
			dead = true
			break
		}
		if len(s.inflight) == 0 {
			failed = CauseTrailingData
			break
		}
		call := s.inflight[0]
		n, kind, err := b.cfg.Dialect.ParseReply(buf[start:], call.Req)
		if err != nil {
			if errors.Is(err, codec.ErrIncomplete) {
				r.need = codec.Needed(err)
			} else {
				failed = CauseParsing
			}
			break
		}
		s.pop()
		// The read deadline is left as it is: it belongs to an older call,
		// so it is never later than the new head's. When it fires, expired
		// re-arms it for the head (or clears it) if nothing is late.
		var raw []byte
		switch {
		case n <= arenaMax:
			raw, call.arena = s.carve(n)
			copy(raw, buf[start:start+n])
		case r.pooled && start == 0:
			// The reply starts a recycled buffer: it takes the buffer
			// whole, and recycles it once written (Call.Release). The
			// bytes after it move out now: once the call completes the
			// buffer may be reused at any time.
			raw = buf[:n:n]
			call.owned = buf
			r.pooled = false // replace must not recycle it
			r.replace(readChunk, len(buf)-n)
			buf, start = r.buf, -n
		case !taken:
			raw = buf[start : start+n : start+n]
			taken = true
		default:
			raw = make([]byte, n)
			copy(raw, buf[start:start+n])
		}
		start += n
		bytes += int64(n)
		call.Reply = codec.Reply{Raw: raw, Kind: kind}
		done = append(done, call)
		if kind == codec.ReplyFatal {
			// The server misread the stream: nothing behind this reply
			// can be trusted.
			failed = CauseParsing
			break
		}
	}
	var orphans []*Call
	if failed != 0 {
		// Dead before the replies go out: their clients may send the
		// next request at once, and it must not be written on this
		// socket. The calls behind are answered after them, in order.
		orphans, _ = s.detach(failed)
	}
	c.mu.Unlock()

	if len(done) > 0 {
		now := time.Now() // the replies of one read arrived together
		b.stats.OutQueue.Add(-int64(len(done)))
		b.stats.Responses.Add(int64(len(done)))
		b.stats.ResponseBytes.Add(bytes)
		var lat observations
		for _, call := range done {
			lat.observe(now.Sub(call.start))
			switch call.Reply.Kind {
			case codec.ReplyFailure:
				b.failed(CauseBadValidate)
			case codec.ReplyFatal:
			default:
				b.succeeded()
			}
		}
		lat.addTo(&b.stats.Latency)
	}
	for i, call := range done {
		call.Done(call)
		done[i] = nil
	}
	s.done = done[:0]
	if failed != 0 {
		s.failed(failed, true, orphans)
	}
	if dead || failed != 0 {
		return false
	}
	if taken {
		rest := buf[start:]
		r.pooled = false // the reply has it; replace must not recycle it
		r.replace(min(r.need, exactUpTo), len(rest))
		return true
	}
	r.buf = buf[:copy(buf, buf[start:])]
	return true
}

// idle reports whether no call is waiting for a reply on s.
func (s *sock) idle() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return len(s.inflight) == 0
}

// expired reports whether the oldest in-flight call is past its deadline; if
// not, it re-arms the read deadline for it.
func (s *sock) expired() bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(s.inflight) == 0 {
		s.nc.SetReadDeadline(time.Time{})
		return false
	}
	d := s.inflight[0].deadline
	if !d.IsZero() && !time.Now().Before(d) {
		return true
	}
	s.nc.SetReadDeadline(d)
	return false
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
