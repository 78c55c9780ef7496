package lua

import "time"

// How a generator's free list gives back request contexts after a burst,
// as memcached's proxy does (its release build's figures): every return
// while more than half of the generator's contexts are free adds to a
// pressure, every return while fewer are halves it; once the pressure
// passes freePressureMax, and has for freeWait, a returned context is
// dropped instead of kept and the pressure eases by freePressureDrop. A
// burst's contexts so stay for bursts that come back, and go after a
// long enough quiet.
const (
	freePressureMax  = 5000
	freePressureDrop = 200
	freeWait         = 60 * time.Second
)

// slotEase is a generator's side of that: its contexts and pressure.
type slotEase struct {
	total    int       // contexts made and not dropped, free or in use
	pressure int       // returns with more than half free, eased as above
	waiter   time.Time // when the pressure may drop contexts; zero: not set
}

// made counts a context made because none was free: a burst resets the
// pressure.
func (e *slotEase) made() {
	e.total++
	e.pressure, e.waiter = 0, time.Time{}
}

// keep reports whether a context returned to a free list of free
// contexts is kept; when not, the caller drops it and counts it out of
// total. now is called only once the pressure has passed its bound.
func (e *slotEase) keep(free int, now func() time.Time) bool {
	if free <= e.total/2-1 {
		e.pressure >>= 1
		e.waiter = time.Time{}
		return true
	}
	e.pressure++
	if e.pressure <= freePressureMax+1 {
		return true
	}
	e.pressure -= freePressureDrop
	t := now()
	if e.waiter.IsZero() {
		e.waiter = t.Add(freeWait)
	}
	return t.Before(e.waiter)
}
