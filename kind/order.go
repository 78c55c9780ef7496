package kind

import (
	"time"

	"shardproxy/backend"
)

// OrderSettle is how long after its arrival a blocking command waits to
// be written when no later request of any client arrives meanwhile
// (Order, WaitBefore). Two clients' commands that arrive back to back
// are read on two goroutines that one poll of the runtime wakes at once,
// and it often runs the later one's first; the settle lets the earlier
// one be read and ordered first.
const OrderSettle = 3 * time.Millisecond

// turn is one blocking command in its server's order.
type turn struct {
	at      time.Time     // when its bytes arrived
	ready   chan struct{} // closed when it may be written
	done    chan struct{} // closed once it is written (or failed)
	settled bool          // OrderSettle has passed since at, or a later request arrived
	opened  bool          // ready is closed
}

// Order keeps the blocking commands sent to b in the order their bytes
// arrived (at: the kernel's receive time of the read that brought the
// command, or the read's time), as Redis serves blocked clients in the
// order their commands reached it. Each waits to be written until every
// command ordered before it was written (or failed), and until it has
// settled: OrderSettle after its arrival, or as soon as a request that
// arrived after it is about to be routed (WaitBefore). Each takes its
// own dedicated connection, and one that must be opened would otherwise
// let a later one on an open connection reach the server first. A
// command ordered after one already let through goes after it. It
// returns the command's gate (backend.Call.Gate) and its Written.
func (dp *DedicatedPool) Order(b *backend.Backend, at time.Time) (gate <-chan struct{}, written func()) {
	t := &turn{at: at, ready: make(chan struct{}), done: make(chan struct{})}
	dp.mu.Lock()
	set := dp.servers[b]
	if set == nil {
		set = &dedicatedSet{}
		dp.servers[b] = set
	}
	i := len(set.turns)
	for i > 0 && !set.turns[i-1].opened && set.turns[i-1].at.After(at) {
		i--
	}
	set.turns = append(set.turns, nil)
	copy(set.turns[i+1:], set.turns[i:])
	set.turns[i] = t
	dp.ordered.Add(1)
	if !dp.blocked.Load() {
		dp.blocked.Store(true)
	}
	wait := time.Until(at.Add(OrderSettle))
	if wait <= 0 {
		t.settled = true
		set.advance()
	}
	dp.mu.Unlock()
	if wait > 0 {
		time.AfterFunc(wait, func() {
			dp.mu.Lock()
			t.settled = true
			set.advance()
			dp.mu.Unlock()
		})
	}
	return t.ready, func() {
		dp.mu.Lock()
		for i, u := range set.turns {
			if u == t {
				set.turns = append(set.turns[:i], set.turns[i+1:]...)
				dp.ordered.Add(-1)
				close(t.done)
				break
			}
		}
		set.advance()
		dp.mu.Unlock()
	}
}

// HasBlocked reports whether a blocking command was ever ordered: the
// pool's sessions then have the kernel note when their clients' bytes
// arrive, which the pools whose clients never block do not pay for.
func (dp *DedicatedPool) HasBlocked() bool { return dp.blocked.Load() }

// Ordered reports whether a blocking command ordered by Order is not yet
// written: one atomic load, for the session to call WaitBefore only then.
func (dp *DedicatedPool) Ordered() bool { return dp.ordered.Load() > 0 }

// WaitBefore is called before a request read at at (its arrival) is
// routed: it settles the blocking commands read before it, but those of
// the same read (the request's own client's, pipelined before it), and
// waits until they are written (2 s at most), so that the request
// reaches their servers after them, as on Redis (a push that wakes a
// client blocked just before it, a DEL of its key). A blocking command
// read before it arrived before it but in the rare case of two clients'
// reads run in the reverse order of their arrival; its arrival time is
// not compared, as the first read of a new connection may have none of
// the kernel's.
func (dp *DedicatedPool) WaitBefore(at time.Time) {
	var dones []chan struct{}
	dp.mu.Lock()
	for _, set := range dp.servers {
		for _, t := range set.turns {
			if !t.at.Equal(at) {
				t.settled = true
				dones = append(dones, t.done)
			}
		}
		set.advance()
	}
	dp.mu.Unlock()
	if len(dones) == 0 {
		return
	}
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	for _, done := range dones {
		select {
		case <-done:
		case <-timer.C:
			return
		}
	}
}

// advance opens the first turn when it has settled. The caller holds
// dp.mu.
func (set *dedicatedSet) advance() {
	if len(set.turns) == 0 {
		return
	}
	if t := set.turns[0]; t.settled && !t.opened {
		t.opened = true
		close(t.ready)
	}
}
