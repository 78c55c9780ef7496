package backend

import (
	"net"
	"runtime"
	"time"

	"shardproxy/codec"
)

// writer is the state of a slot's writer goroutine (writeLoop): the
// socket it writes to, the calls it holds while none is up, the connect
// under way and the idle check in flight. Only the writer goroutine
// touches it; each method handles one event.
type writer struct {
	c          *conn
	s          *sock // written to; nil: none yet, or it failed
	bufs       net.Buffers
	attempt    []*Call         // waiting for the connect under way
	waiting    []*Call         // came after it started
	dialing    chan dialResult // non-nil while a connect runs; its result wakes the writer
	timer      *time.Timer     // sets c.due at the earliest deadline of the calls held
	preconnect bool            // dial with no call waiting, until the first socket is up
	warned     bool            // a failed connect at start was logged

	// Idle checks (health.go); idle is nil when they are off.
	interval  time.Duration
	idle      *time.Timer // sets c.due to look whether s is idle; its outcome comes on c.checked
	lastWrite time.Time   // when s was last written to (a call's start)
	checking  *Call       // the idle check in flight, whose outcome is awaited
	checkOn   *sock       // the socket it checks
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
//
// Everything that wakes the writer kicks c.wake: queued calls, a connect's
// end, a check's outcome, and the timers, which run a function that marks
// c.due rather than send on a channel. So the writer waits on one channel
// receive, not a select over five: a select parks on every channel it
// names, and one naming a timer's channel also puts that timer in and out
// of the runtime's heap, on every wake-up; that was about 2% of the
// proxy's CPU unpipelined.
func (c *conn) writeLoop() {
	var w writer // on the writer's stack: the methods do not keep it
	w.init(c)
	defer w.stopTimers()
	defer close(c.stopped)
	for {
		<-c.wake
		w.woken()
		w.events()
		if !w.takeQueue() {
			w.shutdown()
			return
		}
		w.advance()
	}
}

// init makes w c's writer state, its timers stopped.
func (w *writer) init(c *conn) {
	*w = writer{
		c:          c,
		timer:      time.AfterFunc(time.Hour, func() { c.markDue(dueDeadline) }),
		preconnect: c.b.cfg.Preconnect && !c.once,
		interval:   c.b.cfg.HealthInterval,
	}
	w.timer.Stop()
	if w.interval > 0 && !c.once && c.b.checks != [2]*codec.Request{} {
		w.idle = time.AfterFunc(w.interval, func() { c.markDue(dueIdle) })
		w.idle.Stop()
	}
}

// What a writer's timers mark in conn.due.
const (
	dueDeadline = 1 << iota // a held call's deadline may have passed
	dueIdle                 // look whether the socket is idle
)

// markDue is what the writer's timers run: it marks what is due and
// wakes the writer.
func (c *conn) markDue(what uint32) {
	c.due.Or(what)
	c.kick()
}

// events handles what woke the writer besides queued calls: a connect's
// end, a check's outcome, and the timers' marks. A mark or a result can be
// a wake-up's late twin (a timer stopped after it ran); each handler is
// idempotent: expire fails only calls whose deadline has passed, and
// idleDue looks at the socket's last write.
func (w *writer) events() {
	if w.dialing != nil {
		select {
		case r := <-w.dialing:
			w.dialed(r)
		default:
		}
	}
	c := w.c
	if w.idle != nil { // idle checks on
		select {
		case r := <-c.checked:
			w.checkDone(r)
		default:
		}
	}
	if c.due.Load() == 0 {
		return
	}
	due := c.due.Swap(0)
	if due&dueDeadline != 0 {
		w.attempt, w.waiting = c.expire(w.attempt), c.expire(w.waiting)
	}
	if due&dueIdle != 0 {
		w.idleDue() // set only by the idle timer, which exists
	}
}

// stopTimers stops the writer's timers when it returns.
func (w *writer) stopTimers() {
	if w.idle != nil {
		w.idle.Stop()
	}
	w.timer.Stop()
}

// woken: work is queued, the conn is closing, or a redial is due.
func (w *writer) woken() {
	// Let the goroutines that are ready to run (clients whose requests
	// arrived in the same poll) queue theirs first: one write then
	// carries them all. The kick put this goroutine next in line;
	// without yielding it would write each request alone, and every
	// write wakes the server.
	runtime.Gosched()
	if w.c.redial.Swap(false) {
		w.preconnect = true
	}
}

// dialed takes the outcome of the connect under way: the new socket, or
// the failure that answers the calls that waited for it.
func (w *writer) dialed(r dialResult) {
	w.dialing = nil
	if r.s != nil {
		w.s = r.s
		w.preconnect = false
		w.warned = true // up once: a later failed dial is no start's
		if w.idle != nil {
			w.lastWrite = time.Now()
			w.idle.Reset(w.interval)
		}
		return
	}
	c := w.c
	c.spend(r.cause)
	bad := c.b.Bad()
	if r.cause != CauseMarkedBad && r.cause != CauseClosed {
		bad = c.b.sockFailed(nil, r.cause, sockFailure{})
	}
	w.attempt = c.failAll(w.attempt, r.cause)
	if w.preconnect && !w.warned {
		w.warned = true
		c.b.log.Warn("backend not validated at start", "cause", r.cause.String(), "retry_in", c.b.cfg.RetryTimeout)
	}
	if c.b.cfg.Reconnect {
		// memcached's rule: dial again at once until the backend is
		// bad, then at its retry time (reconnect.go).
		w.preconnect = !bad && !c.once
		return
	}
	if !w.preconnect {
		return
	}
	w.preconnect = false           // until redialLater's wake
	if r.cause != CauseMarkedBad { // marked bad and logged: requests dial after the retry timeout
		c.redialLater()
	}
}

// idleDue looks whether the socket has been idle for the health interval,
// and checks it if so.
func (w *writer) idleDue() {
	s := w.s
	if s == nil || s.dead.Load() || w.checking != nil {
		return // a new socket or the check's outcome re-arms it
	}
	if wait := w.interval - time.Since(w.lastWrite); wait > 0 || s.pending.Load() > 0 {
		w.idle.Reset(max(wait, w.interval/4))
		return
	}
	if w.checking = w.c.check(s); w.checking != nil {
		w.checkOn = s
		w.lastWrite = w.checking.start
	}
	w.idle.Reset(w.interval)
}

// checkDone takes an idle check's outcome: a failed check drops its
// socket, and the calls held meanwhile dial a new one.
func (w *writer) checkDone(r checked) {
	if r.call != w.checking {
		return
	}
	w.checking, w.checkOn = nil, nil
	if !r.ok {
		w.c.checkFailed(r.s)
		if r.s == w.s {
			w.s = nil // the held calls dial a new one
		}
	}
}

// takeQueue moves the queued calls to waiting; false when the conn is
// closed.
func (w *writer) takeQueue() bool {
	c := w.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	batch := c.queue
	c.queue = c.spare[:0]
	c.queued.Store(0)
	c.spare = nil
	c.mu.Unlock()
	// The calls stay counted in InQueue until they are written or
	// answered: a reload drains a backend by that count.
	w.waiting = append(w.waiting, batch...)
	c.recycle(batch)
	return true
}

// shutdown fails the calls held and kills the socket: the conn is closed.
func (w *writer) shutdown() {
	w.c.failAll(w.attempt, CauseClosed)
	w.c.failAll(w.waiting, CauseClosed)
	if w.s != nil {
		w.s.kill(CauseClosed, false)
	}
}

// advance does what the calls held need next: write them on the socket,
// hold them while it is checked, fail them when a dedicated slot is
// spent, or dial.
func (w *writer) advance() {
	if w.s != nil && w.s.dead.Load() {
		w.s = nil // never written again: the next batch dials
	}
	switch {
	case w.s != nil && w.s == w.checkOn:
		// Checked now: the calls wait for the outcome, which wakes the
		// writer, or for their own deadlines.
		armEarliest(w.timer, w.attempt, w.waiting)
	case w.s == nil && w.c.once && w.c.spent.Load() != 0:
		// A dedicated slot's socket is gone, and with it the state its
		// client kept there: never dial another.
		cause := Cause(w.c.spent.Load() - 1)
		w.attempt = w.c.failAll(w.attempt, cause)
		w.waiting = w.c.failAll(w.waiting, cause)
	case w.s == nil:
		w.dial()
		armEarliest(w.timer, w.attempt, w.waiting)
	case len(w.attempt)+len(w.waiting) > 0:
		w.write()
	}
}

// dial starts a connect, unless one runs, when calls wait or the slot
// connects at start; the calls waiting go with it.
func (w *writer) dial() {
	if w.dialing != nil || (len(w.attempt)+len(w.waiting) == 0 && !w.preconnect) {
		return
	}
	w.attempt, w.waiting = append(w.attempt, w.waiting...), w.waiting[:0]
	w.dialing = make(chan dialResult, 1)
	go func(c *conn, ch chan<- dialResult) {
		s, cause := c.connect()
		ch <- dialResult{s, cause}
		c.kick()
	}(w.c, w.dialing)
}

// write sends the calls held on the socket, in their order.
func (w *writer) write() {
	w.timer.Stop()
	w.attempt = append(w.attempt, w.waiting...)
	clear(w.waiting)
	w.waiting = w.waiting[:0]
	w.lastWrite = w.attempt[len(w.attempt)-1].start
	var sent bool
	if w.bufs, sent = w.s.write(w.attempt, w.bufs[:0]); sent {
		clear(w.attempt)
		w.attempt = w.attempt[:0]
		return
	}
	// The socket died after it was picked: these calls were never sent,
	// and go out on a new one.
	w.s = nil
	w.c.kick()
}

// redialLater wakes the writer to dial again after the retry timeout
// (c.redial): a backend
// connected at start keeps dialling until it is up, as memcached's proxy
// does, so that it is validated before the first request needs it.
func (c *conn) redialLater() {
	time.AfterFunc(c.b.cfg.RetryTimeout, c.redialAgain)
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
	first := earliest(lists...)
	t.Stop()
	if !first.IsZero() {
		t.Reset(time.Until(first))
	}
}
