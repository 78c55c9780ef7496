package backend

import (
	"math"
	"time"
)

// memcached's proxy's rule for a failed socket (Config.Reconnect), which
// a Lua memcache pool's backends follow in place of twemproxy's:
//
// Every failure of a socket (a dial, a validation, a request on it, the
// server closing it, even idle) counts once. While the count is at most
// Config.FailureLimit the slot dials again at once, with no request
// waiting: the first failure reconnects at once. The failure that passes
// the limit marks the backend bad: requests fail at once with
// CauseMarkedBad, and every Config.RetryTimeout the slots dial again; a
// dial that fails meanwhile just waits for the next retry. Only a socket
// that passes validation (the dialect's handshake: memcached "version")
// ends the bad period and resets the count; a good reply does not. So a
// server that validates but breaks every request is dialled again after
// each, never marked bad, as memcached's proxy does.
//
// The validation reply is awaited for Config.Timeout (memcached's read
// timeout) when it is set, the dial for Config.ConnectTimeout.
// Config.HealthInterval's probes and idle checks are off: a bad backend's
// retries are its probes.
//
// Config.OnEvent hears of each failure of a backend not yet bad (a
// failure while it is bad is not told again), and of its being marked
// bad, which is what memcached's proxy logs to "watch proxyevents".

// Event is a backend's failure or change of state as Config.OnEvent is
// told of it.
type Event struct {
	// Cause is why a socket failed; CauseMarkedBad: the backend was
	// marked bad, and Retry is when it is tried again.
	Cause Cause
	// Depth is how many calls the socket held when it failed.
	Depth int
	// Rbuf is what the socket had read and not yet framed (for a reply
	// cut short, what followed its last whole line). Valid only during
	// the call to OnEvent.
	Rbuf []byte
	// Retry is the wait before the next try, for CauseMarkedBad.
	Retry time.Duration
}

// sockFailure is what the goroutine that finds a socket broken knows of
// it besides the cause: the calls it held and the bytes read and not
// framed. depth < 0: the calls handed to the reader. countBusy: the
// failure counts only if calls are in flight once the socket is dead (a
// server's close, which fails no request on an idle socket).
type sockFailure struct {
	depth     int
	rbuf      []byte
	countBusy bool
}

// event tells Config.OnEvent of e.
func (b *Backend) event(e Event) {
	if b.cfg.OnEvent != nil {
		b.cfg.OnEvent(b, e)
	}
}

// reconnectFailed counts a failure of one of c's sockets under
// memcached's rule; c is nil for a failure the writer redials for on
// its own (a failed dial). It reports whether the backend is bad now.
func (b *Backend) reconnectFailed(c *conn, cause Cause, f sockFailure) bool {
	b.countFailure(cause)
	b.mu.Lock()
	wasBad := b.bad
	b.failures++
	b.failing.Store(true)
	b.lastCause = cause
	over := b.failures > b.cfg.FailureLimit && !b.closed
	if over {
		b.bad = true
		b.badUntil.Store(math.MaxInt64)
		if b.timer != nil {
			b.timer.Stop()
		}
		b.timer = time.AfterFunc(b.cfg.RetryTimeout, b.redialAll)
	}
	b.mu.Unlock()
	if !wasBad {
		b.event(Event{Cause: cause, Depth: max(f.depth, 0), Rbuf: f.rbuf})
	}
	if over && !wasBad {
		b.stats.Ejects.Add(1)
		b.stats.EjectedAt.Store(time.Now().UnixMicro())
		b.log.Warn("backend marked bad", "cause", cause.String(), "retry_in", b.cfg.RetryTimeout)
		b.event(Event{Cause: CauseMarkedBad, Retry: b.cfg.RetryTimeout})
		if b.cfg.OnStateChange != nil {
			b.cfg.OnStateChange(b, true)
		}
	}
	if !over && c != nil {
		c.redialNow()
	}
	return over
}

// redialAll is a bad backend's retry: every slot dials again.
func (b *Backend) redialAll() {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return
	}
	for _, c := range b.conns {
		c.redialNow()
	}
	if p := b.conns3.Load(); p != nil {
		for _, c := range *p {
			c.redialNow()
		}
	}
}

// validated ends a bad period and resets the count: a new socket passed
// validation.
func (b *Backend) validated() {
	if !b.failing.Load() {
		return // the common case, without the lock
	}
	b.mu.Lock()
	wasBad := b.bad && !b.closed
	b.bad, b.failures = false, 0
	b.failing.Store(false)
	b.badUntil.Store(0)
	last := b.lastCause
	b.mu.Unlock()
	if !wasBad {
		return
	}
	b.stats.Restores.Add(1)
	b.log.Info("backend recovered", "after", last.String())
	if b.cfg.OnStateChange != nil {
		b.cfg.OnStateChange(b, false)
	}
}

// redialNow has the slot's writer dial again with no call waiting.
func (c *conn) redialNow() {
	if c.once {
		return // a dedicated slot dials once
	}
	c.redialAgain()
}

// redialAgain has the slot's writer dial again, unless the slot is closed.
func (c *conn) redialAgain() {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed {
		c.redial.Store(true)
		c.kick()
	}
}
