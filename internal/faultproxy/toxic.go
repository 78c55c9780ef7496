package faultproxy

import (
	"fmt"
	"time"
)

// Direction is one of the two byte streams of a connection.
type Direction uint8

const (
	// Downstream is the backend's stream to the client: the replies.
	Downstream Direction = iota
	// Upstream is the client's stream to the backend: the requests.
	Upstream
)

// String returns "downstream" or "upstream".
func (d Direction) String() string {
	switch d {
	case Downstream:
		return "downstream"
	case Upstream:
		return "upstream"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Toxic is what happens to one direction's bytes. The zero Toxic forwards
// every byte at once. The effects apply in this order to each chunk read:
// Hold, then Blackhole, then Latency, then Inject and Cut, then Slice and
// Rate while writing.
type Toxic struct {
	// Hold keeps the direction's bytes until Hold is cleared, then
	// forwards them in order: a path that stalls and loses nothing, as TCP
	// never loses bytes in the middle of a stream. New connections are
	// accepted and held too. A close still passes.
	Hold bool
	// Latency delays each chunk by this long after it was read.
	Latency time.Duration
	// Jitter varies Latency by a uniform amount in [-Jitter, +Jitter]
	// (never below zero).
	Jitter time.Duration
	// Spike adds SpikeBy to the delay of a share of the chunks, chosen at
	// random (0.01: one in a hundred): a server slow now and then. With
	// one request per chunk (a client that waits for each reply), that
	// share of the requests.
	Spike   float64
	SpikeBy time.Duration
	// Rate caps the direction at this many bytes per second; 0 is no cap.
	Rate int
	// Slice splits every write into writes of at most Slice bytes (1: a
	// segment per byte); 0 writes each chunk whole.
	Slice int
	// SliceDelay is the pause after each slice, so that with Slice 1 every
	// byte travels in its own segment.
	SliceDelay time.Duration
	// Blackhole reads the direction's bytes and drops them: the other end
	// never hears anything, and the connection stays open. A close still
	// passes.
	Blackhole bool
	// Cut, if set, ends the connection after a number of bytes.
	Cut *Cut
	// Inject, if set, inserts bytes into the stream at a position.
	Inject *Inject
}

// Cut ends a connection after After more bytes of a direction were
// forwarded (0: at the next chunk, forwarding nothing of it). The
// receiving end gets a FIN, or with Reset a RST (SO_LINGER 0, then close);
// the sending end is closed.
type Cut struct {
	After int64
	Reset bool
}

// Inject inserts Bytes into a direction's stream after At more bytes of it
// were forwarded.
type Inject struct {
	At    int64
	Bytes []byte
}

// Set replaces dir's toxic with t. A Cut or Inject in t counts its bytes
// afresh on every connection, even when it equals the previous one.
func (p *Proxy) Set(dir Direction, t Toxic) {
	if t.Cut != nil {
		c := *t.Cut
		t.Cut = &c
	}
	if t.Inject != nil {
		in := Inject{At: t.Inject.At, Bytes: append([]byte(nil), t.Inject.Bytes...)}
		t.Inject = &in
	}
	p.mu.Lock()
	p.setLocked(dir, t)
	p.mu.Unlock()
}

// setLocked makes t dir's toxic and wakes what it held when it holds no
// more. Called with p.mu held.
func (p *Proxy) setLocked(dir Direction, t Toxic) {
	switch was := p.toxics[dir].Hold; {
	case t.Hold && !was:
		p.held[dir] = make(chan struct{})
	case !t.Hold && was:
		close(p.held[dir])
		p.held[dir] = nil
	}
	p.toxics[dir] = t
}

// holding returns, while dir's toxic holds, a channel closed when it
// stops; nil otherwise.
func (p *Proxy) holding(dir Direction) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[dir]
}

// Toxic returns dir's current toxic.
func (p *Proxy) Toxic(dir Direction) Toxic {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.toxics[dir]
}

// update changes one part of dir's toxic.
func (p *Proxy) update(dir Direction, f func(*Toxic)) {
	p.mu.Lock()
	t := p.toxics[dir]
	f(&t)
	p.setLocked(dir, t)
	p.mu.Unlock()
}

// Clear removes every toxic of both directions and the slow close, and
// forwards what they held.
func (p *Proxy) Clear() {
	p.mu.Lock()
	p.setLocked(Downstream, Toxic{})
	p.setLocked(Upstream, Toxic{})
	p.slowClose = 0
	p.mu.Unlock()
}

// Hold keeps dir's bytes from now on (on is false: forward them, in
// order, and what follows). See Toxic.Hold.
func (p *Proxy) Hold(dir Direction, on bool) {
	p.update(dir, func(t *Toxic) { t.Hold = on })
}

// Latency delays each chunk of dir by d ± jitter.
func (p *Proxy) Latency(dir Direction, d, jitter time.Duration) {
	p.update(dir, func(t *Toxic) { t.Latency, t.Jitter = d, jitter })
}

// Bandwidth caps dir at bytesPerSecond (0 removes the cap).
func (p *Proxy) Bandwidth(dir Direction, bytesPerSecond int) {
	p.update(dir, func(t *Toxic) { t.Rate = bytesPerSecond })
}

// Blackhole drops every byte of dir from now on (on is false: forward
// again). Bytes dropped are lost, not delayed.
func (p *Proxy) Blackhole(dir Direction, on bool) {
	p.update(dir, func(t *Toxic) { t.Blackhole = on })
}

// SliceWrites splits dir's writes into writes of size bytes, each followed
// by a pause of delay.
func (p *Proxy) SliceWrites(dir Direction, size int, delay time.Duration) {
	p.update(dir, func(t *Toxic) { t.Slice, t.SliceDelay = size, delay })
}

// ResetAfter resets each connection after n more bytes of dir.
func (p *Proxy) ResetAfter(dir Direction, n int64) {
	p.update(dir, func(t *Toxic) { t.Cut = &Cut{After: n, Reset: true} })
}

// CloseAfter closes each connection (FIN) after n more bytes of dir.
func (p *Proxy) CloseAfter(dir Direction, n int64) {
	p.update(dir, func(t *Toxic) { t.Cut = &Cut{After: n} })
}

// InjectAt inserts garbage into dir's stream of each connection after at
// more bytes.
func (p *Proxy) InjectAt(dir Direction, at int64, garbage []byte) {
	g := append([]byte(nil), garbage...)
	p.update(dir, func(t *Toxic) { t.Inject = &Inject{At: at, Bytes: g} })
}

// SlowClose delays passing on a close (FIN or error) from one end to the
// other by d; 0 passes it on at once.
func (p *Proxy) SlowClose(d time.Duration) {
	p.mu.Lock()
	p.slowClose = d
	p.mu.Unlock()
}

// snapshot returns what a chunk of dir read now must go through: the
// toxic and its latency with jitter applied.
func (p *Proxy) snapshot(dir Direction) (Toxic, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.toxics[dir]
	d := t.Latency
	if t.Jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(2*t.Jitter)+1)) - t.Jitter
	}
	if t.Spike > 0 && p.rng.Float64() < t.Spike {
		d += t.SpikeBy
	}
	return t, max(d, 0)
}
