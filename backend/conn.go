package backend

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/codec"
)

// conn is one of a backend's socket slots: a queue of calls not yet
// written, and the writer goroutine that takes batches off it, dials
// sockets and writes the batches to them.
type conn struct {
	b       *Backend
	wake    chan struct{}  // cap 1: work is queued or the conn is closing
	checked chan checked   // cap 1: the idle check's outcome (health.go)
	started atomic.Bool    // the writer goroutine runs (from the first kick on)
	redial  atomic.Bool    // dial again with no call waiting (a backend connected at start)
	stopped chan struct{}  // closed when the writer returns
	readers sync.WaitGroup // the readers of this slot's sockets; added to under mu, while not closed

	// mu is the queue lock. Every client session that sends takes it, so
	// it guards the queue and little else: no socket's in-flight calls,
	// and no framing, ever happen under it.
	mu     sync.Mutex
	queue  []*Call // not yet written
	spare  []*Call // the previous queue's storage, reused
	cur    *sock   // the newest socket, for close to fail
	closed bool

	// once marks a dedicated slot (Dedicated): it dials one socket in
	// its life. spent is set (to the cause plus one) when that socket
	// dies or cannot be opened; from then on every call fails at once.
	once  bool
	spent atomic.Int32
	// push, set before first use, puts a dedicated slot in push mode
	// (DedicatePush): frames go to it, calls complete once written.
	push PushFunc

	// proto is the protocol version its sockets ask for in the handshake
	// (HandshakeOptions.Proto): 0 for the backend's first slots.
	proto uint8
}

func newConn(b *Backend) *conn {
	return &conn{b: b, wake: make(chan struct{}, 1), checked: make(chan checked, 1), stopped: make(chan struct{})}
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

// close fails the queued calls with CauseClosed, kills the current socket
// and waits until the writer and every reader are done: when it returns,
// each call sent before it has completed.
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
	c.cur = nil
	c.mu.Unlock()
	c.b.stats.InQueue.Add(-int64(len(queue)))
	for _, call := range queue {
		c.b.finish(call, CauseClosed)
	}
	if s != nil {
		s.kill(CauseClosed, false)
	}
	c.kick()
	<-c.stopped
	c.readers.Wait()
}

// forget drops s as the current socket, when its reader is done.
func (c *conn) forget(s *sock) {
	c.mu.Lock()
	if c.cur == s {
		c.cur = nil
	}
	c.mu.Unlock()
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
//
// The socket is the writer's own: it learns of a failure from the
// socket's dead flag, drops it, and dials for the next batch. Calls it
// has handed to the socket's reader are the reader's to complete.
//
// With health checks on, it also checks the socket when it has been idle
// (health.go), holding new calls until the check's reply.
func (c *conn) writeLoop() {
	var (
		s          *sock // written to; nil: none yet, or it failed
		bufs       net.Buffers
		attempt    []*Call         // waiting for the connect under way
		waiting    []*Call         // came after it started
		dialing    chan dialResult // non-nil while a connect runs
		timer      = time.NewTimer(time.Hour)
		preconnect = c.b.cfg.Preconnect && !c.once // until the first socket is up
		warned     bool                            // a failed connect at start was logged

		interval  = c.b.cfg.HealthInterval
		idle      *time.Timer      // fires to look whether s is idle; nil: no checks
		idleC     <-chan time.Time // idle's channel, or nil
		checkedC  <-chan checked   // c.checked, or nil without checks
		lastWrite time.Time        // when s was last written to (a call's start)
		checking  *Call            // the idle check in flight, whose outcome is awaited
		checkOn   *sock            // the socket it checks
	)
	timer.Stop()
	defer timer.Stop()
	if interval > 0 && !c.once && c.b.checks != [2]*codec.Request{} {
		idle = time.NewTimer(interval)
		idle.Stop()
		idleC, checkedC = idle.C, c.checked
		defer idle.Stop()
	}
	defer close(c.stopped)
	for {
		select {
		case <-c.wake:
			// Let the goroutines that are ready to run (clients whose
			// requests arrived in the same poll) queue theirs first: one
			// write then carries them all. The kick put this goroutine
			// next in line; without yielding it would write each request
			// alone, and every write wakes the server.
			runtime.Gosched()
			if c.redial.Swap(false) {
				preconnect = true
			}
		case r := <-dialing:
			dialing = nil
			if r.s == nil {
				c.spend(r.cause)
				attempt = c.failAll(attempt, r.cause)
				if preconnect {
					preconnect = false // until redialLater's wake
					if !warned {
						warned = true
						c.b.log.Warn("backend not validated at start", "cause", r.cause.String(), "retry_in", c.b.cfg.RetryTimeout)
					}
					if r.cause != CauseMarkedBad { // marked bad and logged: requests dial after the retry timeout
						c.redialLater()
					}
				}
			} else {
				s = r.s
				preconnect = false
				if idle != nil {
					lastWrite = time.Now()
					idle.Reset(interval)
				}
			}
		case <-timer.C:
			attempt, waiting = c.expire(attempt), c.expire(waiting)
		case <-idleC:
			if s == nil || s.dead.Load() || checking != nil {
				break // a new socket or the check's outcome re-arms it
			}
			if wait := interval - time.Since(lastWrite); wait > 0 || s.pending.Load() > 0 {
				idle.Reset(max(wait, interval/4))
				break
			}
			if checking = c.check(s); checking != nil {
				checkOn = s
				lastWrite = checking.start
			}
			idle.Reset(interval)
		case r := <-checkedC:
			if r.call != checking {
				break
			}
			checking, checkOn = nil, nil
			if !r.ok {
				c.checkFailed(r.s)
				if r.s == s {
					s = nil // the held calls dial a new one
				}
			}
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			c.failAll(attempt, CauseClosed)
			c.failAll(waiting, CauseClosed)
			if s != nil {
				s.kill(CauseClosed, false)
			}
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.spare = nil
		c.mu.Unlock()
		// The calls stay counted in InQueue until they are written or
		// answered: a reload drains a backend by that count.
		waiting = append(waiting, batch...)
		c.recycle(batch)

		if s != nil && s.dead.Load() {
			s = nil // never written again: the next batch dials
		}
		if s != nil && s == checkOn {
			// Checked now: the calls wait for the outcome, which
			// wakes the writer, or for their own deadlines.
			armEarliest(timer, attempt, waiting)
			continue
		}
		if s == nil && c.once && c.spent.Load() != 0 {
			// A dedicated slot's socket is gone, and with it the
			// state its client kept there: never dial another.
			cause := Cause(c.spent.Load() - 1)
			attempt = c.failAll(attempt, cause)
			waiting = c.failAll(waiting, cause)
			continue
		}
		if s == nil {
			if dialing == nil && (len(attempt)+len(waiting) > 0 || preconnect) {
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
			var sent bool
			lastWrite = attempt[len(attempt)-1].start
			if bufs, sent = s.write(attempt, bufs[:0]); sent {
				clear(attempt)
				attempt = attempt[:0]
			} else {
				// The socket died after it was picked: these calls
				// were never sent, and go out on a new one.
				s = nil
				c.kick()
			}
		}
	}
}

// spend marks a dedicated slot as used up by cause.
func (c *conn) spend(cause Cause) {
	if c.once {
		c.spent.CompareAndSwap(0, int32(cause)+1)
	}
}

// redialLater wakes the writer to dial again after the retry timeout
// (c.redial): a backend
// connected at start keeps dialling until it is up, as memcached's proxy
// does, so that it is validated before the first request needs it.
func (c *conn) redialLater() {
	time.AfterFunc(c.b.cfg.RetryTimeout, func() {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if !closed {
			c.redial.Store(true)
			c.kick()
		}
	})
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
// A socket it returns has its reader running. A server that breaks the
// socket on the meta probe (HandshakeOptions.MetaProbe) rather than
// answer it is dialled once more without the probe, as a text server.
func (c *conn) connect() (*sock, Cause) {
	b := c.b
	if b.Bad() {
		return nil, CauseMarkedBad
	}
	deadline := time.Now().Add(b.cfg.ConnectTimeout)
	o := b.cfg.Handshake
	if c.proto != 0 {
		o.Proto = c.proto
	}
	var (
		nc  net.Conn
		hs  shake
		err error
	)
	for {
		if nc, err = dial(b.cfg, deadline); err != nil {
			b.failed(CauseConnecting)
			return nil, CauseConnecting
		}
		hs = handshake(nc, b.cfg.Dialect, o, deadline)
		if hs.ok {
			break
		}
		nc.Close()
		if !hs.probeBroke || !o.MetaProbe {
			b.failed(hs.cause)
			return nil, hs.cause
		}
		o.MetaProbe = false
		deadline = time.Now().Add(b.cfg.ConnectTimeout) // the probe may have run out the first
	}
	b.learnVersion(hs.version)
	b.learnMeta(hs.meta)
	s := newSock(c, nc)
	s.meta = hs.meta
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, CauseClosed
	}
	c.cur = s
	c.readers.Add(1)
	c.mu.Unlock()
	b.stats.Connections.Add(1)
	go s.readLoop()
	return s, 0
}

// shake is what a handshake found.
type shake struct {
	version    string // the server's version, when a reply told it
	meta       bool   // the server speaks the meta protocol (answered mn)
	ok         bool
	cause      Cause // why not ok
	probeBroke bool  // not ok: every reply but the meta probe's was OK, and the probe's never came whole
}

// handshake sends the dialect's validation requests and checks every
// reply. The server's version comes from a codec.VersionReader dialect;
// with o.MetaProbe, a well-framed reply other than OK to the last request
// (the probe) says the server speaks text only.
func handshake(nc net.Conn, d codec.Dialect, o codec.HandshakeOptions, deadline time.Time) shake {
	reqs := d.Handshake(o)
	if len(reqs) == 0 {
		return shake{ok: true}
	}
	probe := o.MetaProbe && !o.Meta
	hs := shake{meta: o.Meta || probe}
	vr, _ := d.(codec.VersionReader)
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	var out []byte
	for _, r := range reqs {
		out = append(out, r.Wire...)
	}
	if _, err := nc.Write(out); err != nil {
		return shake{cause: CauseWriting}
	}
	buf := make([]byte, 0, 512)
	for i, r := range reqs {
		probing := probe && i == len(reqs)-1
		for {
			n, kind, err := d.ParseReply(buf, r)
			if err == nil {
				switch {
				case kind == codec.ReplyOK:
				case probing:
					hs.meta = false
				default:
					return shake{cause: CauseBadValidate}
				}
				if vr != nil {
					if v, ok := vr.ReadVersion(r, buf[:n]); ok {
						hs.version = v
					}
				}
				buf = buf[:copy(buf, buf[n:])]
				break
			}
			if !errors.Is(err, codec.ErrIncomplete) || len(buf) >= 64<<10 {
				return shake{cause: CauseBadValidate, probeBroke: probing}
			}
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			m, err := nc.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+m]
			if err != nil && m == 0 {
				return shake{cause: CauseReadValidate, probeBroke: probing}
			}
		}
	}
	if len(buf) != 0 {
		return shake{cause: CauseBadValidate}
	}
	hs.ok = true
	return hs
}
