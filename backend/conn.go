package backend

import (
	"sync"
	"sync/atomic"
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
	due     atomic.Uint32  // what the writer's timers marked (dueDeadline, dueIdle); writer.events clears it
	readers sync.WaitGroup // the readers of this slot's sockets; added to under mu, while not closed

	// mu is the queue lock. Every client session that sends takes it, so
	// it guards the queue and little else: no socket's in-flight calls,
	// and no framing, ever happen under it.
	mu     sync.Mutex
	queue  []*Call // not yet written
	spare  []*Call // the previous queue's storage, reused
	closed bool
	// queued (len(queue)) and cur (the newest socket, for close to fail)
	// are set under mu (forget's clearing of cur aside) and read without
	// it by depth, which Config.FirstIdle asks of every slot on every call.
	queued atomic.Int64
	cur    atomic.Pointer[sock]

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
	// then is the slot a preconnect with Config.FirstIdle kicks once this
	// one's first connect returns, so that the slots connect in order.
	then atomic.Pointer[conn]
}

// kickNext kicks the slot waiting for this one's first connect
// (Config.FirstIdle's preconnect), if any.
func (c *conn) kickNext() {
	if next := c.then.Swap(nil); next != nil {
		next.kick()
	}
}

// depth is how many calls the slot holds: queued, or in flight on its
// newest socket (calls the writer is between the two are not counted).
func (c *conn) depth() int64 {
	n := c.queued.Load()
	if s := c.cur.Load(); s != nil {
		n += s.pending.Load()
	}
	return n
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
	c.queued.Store(int64(len(c.queue)))
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
	c.queued.Store(0)
	s := c.cur.Swap(nil)
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
	c.cur.CompareAndSwap(s, nil)
}

// spend marks a dedicated slot as used up by cause.
func (c *conn) spend(cause Cause) {
	if c.once {
		c.spent.CompareAndSwap(0, int32(cause)+1)
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
