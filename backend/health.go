package backend

import (
	"time"

	"shardproxy/codec"
)

// Active health checks (Config.HealthInterval), two of them:
//
// A bad backend is probed. Its retry time no longer lets the next client
// request through: it starts a probe instead, a new socket dialled and
// put through the whole handshake (memcached "version", and "mn" for a
// meta pool; Redis AUTH, SELECT and PING), bounded by HealthTimeout and
// closed afterwards. The backend stays bad (requests fail fast with
// CauseMarkedBad) until a probe succeeds; a failed one is tried again
// HealthInterval after it started. So a server that accepts connections
// and answers nothing, or answers wrongly, never gets a client's request.
// A probe runs on the retry timer's goroutine; at most one is under way
// per backend.
//
// An idle shared socket is checked. The slot's writer notes when it last
// wrote; when HealthInterval passes with nothing written and nothing in
// flight, it writes the dialect's validation request (the last of its
// handshake: "version", "mn" on a meta socket, PING) as a call of its own
// and holds every call queued meanwhile until the reply comes: a check is
// never interleaved with client requests, and no client request is
// written on a socket that is being checked. A good reply releases the
// held calls onto the socket. No reply within HealthTimeout, a wrong
// one, or a socket that broke drops the socket, and the held calls go out
// on a new one (dialled then, as for any call that finds no socket): the
// request after an idle period that the network silently cut does not
// fail. A busy socket is never checked: the writer only looks when a
// timer fires, and a socket written to within HealthInterval just
// re-arms it. A check's failure does not count against the backend's
// health (the path, not the server, may be what failed; the next dial
// tells); its reply counts in none of the request or reply counters.
// Dedicated slots are not checked: their client owns the socket's state.

// idleChecks returns the validation requests for cfg's idle sockets: a
// text socket's and a meta one's. Without HealthInterval, or with a
// dialect that sends nothing to validate, there are none.
func idleChecks(cfg Config) (checks [2]*codec.Request) {
	if cfg.HealthInterval <= 0 {
		return checks
	}
	for i, meta := range []bool{false, true} {
		o := cfg.Handshake
		o.MetaProbe = false
		o.Meta = o.Meta || meta
		if reqs := cfg.Dialect.Handshake(o); len(reqs) > 0 {
			checks[i] = reqs[len(reqs)-1]
		}
	}
	return checks
}

// probe tries a bad backend once and restores it when the probe succeeds;
// otherwise it stays bad and the next probe is timed. It runs on the retry
// timer's goroutine.
func (b *Backend) probe() {
	b.mu.Lock()
	if b.closed || !b.bad {
		b.mu.Unlock()
		return
	}
	first := !b.probing
	b.probing = true
	last := b.lastCause
	b.mu.Unlock()
	if first {
		b.log.Info("backend probing", "last_cause", last.String(), "interval", b.cfg.HealthInterval)
	}

	start := time.Now()
	b.stats.Probes.Add(1)
	cause, ok := b.probeServer(start.Add(b.cfg.HealthTimeout))

	b.mu.Lock()
	if b.closed || !b.bad {
		b.mu.Unlock()
		return
	}
	if !ok {
		b.stats.ProbeFailures.Add(1)
		b.lastCause = cause
		wait := max(0, b.cfg.HealthInterval-time.Since(start))
		b.nextProbe = time.Now().Add(wait)
		b.timer = time.AfterFunc(wait, b.probe)
		b.mu.Unlock()
		b.log.Debug("backend probe failed", "cause", cause.String(), "next_in", wait)
		return
	}
	b.bad, b.probing = false, false
	b.badUntil.Store(0)
	b.failures = 0
	b.failing.Store(false)
	b.stats.Restores.Add(1)
	b.mu.Unlock()
	b.log.Info("backend restored by probe", "last_cause", last.String(), "took", time.Since(start))
	if b.cfg.OnStateChange != nil {
		b.cfg.OnStateChange(b, false)
	}
}

// probeServer dials a socket, puts it through the handshake a new
// socket gets (without the meta probe: a meta pool's handshake requires
// mn, a text pool's has none) by deadline, and closes it.
func (b *Backend) probeServer(deadline time.Time) (Cause, bool) {
	nc, err := dial(b.cfg, deadline)
	if err != nil {
		return CauseConnecting, false
	}
	defer nc.Close()
	o := b.cfg.Handshake
	o.MetaProbe = false
	hs := handshake(nc, b.cfg.Dialect, o, deadline)
	return hs.cause, hs.ok
}

// checked is what an idle socket's check tells its slot's writer.
type checked struct {
	call *Call
	s    *sock
	ok   bool
}

// check writes an idle check on s, or returns nil when s is gone or
// the backend has no check to send. Writer only.
func (c *conn) check(s *sock) *Call {
	b := c.b
	req := b.checks[0]
	if s.meta {
		req = b.checks[1]
	}
	if req == nil {
		return nil
	}
	now := time.Now()
	call := &Call{Req: req, probe: true, start: now, deadline: now.Add(b.cfg.HealthTimeout)}
	call.Done = func(call *Call) {
		ok := call.Reply.Err == nil && (call.Reply.Kind == codec.ReplyOK || busy(b.cfg.Dialect, call.Reply.Raw))
		call.Release()
		// Cap 1: one check at a time, so the send never waits; the kick
		// has the writer take it.
		c.checked <- checked{call: call, s: s, ok: ok}
		c.kick()
	}
	b.stats.IdleChecks.Add(1)
	b.stats.InQueue.Add(1) // write moves it to OutQueue, as any call
	if _, sent := s.write([]*Call{call}, nil); !sent {
		b.stats.InQueue.Add(-1)
		return nil
	}
	return call
}

// checkFailed drops s, whose idle check failed; a check failed by the
// backend's Close tells nothing. Writer only.
func (c *conn) checkFailed(s *sock) {
	cause := s.kill(CauseBadValidate, false)
	if cause == CauseClosed {
		return
	}
	c.b.stats.IdleReplaced.Add(1)
	c.b.log.Info("backend idle socket failed its check", "cause", cause.String())
}
