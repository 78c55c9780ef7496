package kind

import (
	"time"

	"shardproxy/backend"
)

// OrderSettle is how long after its arrival a blocking command waits
// before it is written to its server (Order). Two clients' commands that
// arrive back to back may be routed in either order: the proxy reads
// each client on its own goroutine, and the runtime may run the later
// one's first. Within the settle they are put back in the order the
// kernel received them.
const OrderSettle = 3 * time.Millisecond

// turn is one blocking command in its server's order.
type turn struct {
	at      time.Time     // when its bytes arrived
	ready   chan struct{} // closed when it may be written
	settled bool          // OrderSettle has passed since at
	opened  bool          // ready is closed
}

// Order keeps the blocking commands sent to b in the order their bytes
// arrived (at: the kernel's receive time of the read that brought the
// command, or the read's time), as Redis serves blocked clients in the
// order their commands reached it. Each waits to be written until
// OrderSettle has passed since it arrived and every command ordered
// before it was written (or failed). Each takes its own dedicated
// connection, and one that must be opened would otherwise let a later
// one on an open connection reach the server first. A command routed
// later than the settle of one already let through goes after it. It
// returns the command's gate (backend.Call.Gate) and its Written.
func (dp *DedicatedPool) Order(b *backend.Backend, at time.Time) (gate <-chan struct{}, written func()) {
	t := &turn{at: at, ready: make(chan struct{})}
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
				break
			}
		}
		set.advance()
		dp.mu.Unlock()
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
