package backend

import "time"

// Dedicated is a socket of a Backend's that serves one client at a time,
// outside the backend's shared slots: Redis blocking commands, which may
// hold their socket until data arrives, and transactions, whose state
// (WATCH, MULTI) the server keeps on the socket.
//
// It dials on first use as the shared slots do (Config's address, TLS,
// ConnectTimeout and the dialect's Handshake: AUTH, SELECT) and counts its
// failures against the backend's health. Unlike a shared slot it never
// dials twice: once its socket has failed, or could not be opened, every
// call fails at once with that cause (Spent), because a new socket would
// not have the state the client built on the old one.
//
// Its calls keep the backend's order and exactly-once guarantees; a call's
// Timeout may replace Config.Timeout (a blocking command's own timeout).
// All methods are safe for concurrent use.
type Dedicated struct {
	b *Backend
	c *conn
}

// Dedicate returns a new dedicated socket slot of b, or nil when b is
// closed. Its handshake asks the server for protocol version proto
// (HandshakeOptions.Proto; 0: the dialect's first), whatever the Proto of
// the requests sent on it. Close it when done: b's Close closes those
// still open.
func (b *Backend) Dedicate(proto uint8) *Dedicated {
	c := newConn(b)
	c.once = true
	c.proto = proto
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	if b.dedicated == nil {
		b.dedicated = map[*conn]struct{}{}
	}
	b.dedicated[c] = struct{}{}
	return &Dedicated{b: b, c: c}
}

// Proto returns the protocol version d's handshake asks for.
func (d *Dedicated) Proto() uint8 { return d.c.proto }

// Backend returns the backend d belongs to.
func (d *Dedicated) Backend() *Backend { return d.b }

// Send queues c on d. If the backend is marked bad, or d is closed or
// spent, c completes at once, on the caller's goroutine.
func (d *Dedicated) Send(c *Call) {
	if d.b.prepare(c, time.Now()) {
		d.c.enqueue(c)
	}
}

// Stage queues c on d in the batch, as Backend.Stage does for a shared
// slot.
func (d *Dedicated) Stage(c *Call, bt *Batch) {
	if bt.now.IsZero() {
		bt.now = time.Now()
	}
	if d.b.prepare(c, bt.now) {
		bt.add(d.c, c)
	}
}

// Spent reports whether d's socket has failed (or could not be opened):
// every call on d now fails at once.
func (d *Dedicated) Spent() bool { return d.c.spent.Load() != 0 }

// Close fails d's queued and in-flight calls with CauseClosed and closes
// its socket; a client blocked on it so leaves the server at once. It
// waits for d's goroutines, so it must not be called from a Done function.
func (d *Dedicated) Close() {
	d.b.mu.Lock()
	delete(d.b.dedicated, d.c)
	d.b.mu.Unlock()
	d.c.close()
}
