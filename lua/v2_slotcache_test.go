package lua

import (
	"testing"
	"time"
)

// TestSlotEase checks memcached's easing of a generator's free list: a
// burst's contexts are all kept, kept through freePressureMax quiet
// returns and then for freeWait more, then dropped one per
// freePressureDrop returns; a new burst starts over.
func TestSlotEase(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	var e slotEase
	free := 0
	// put returns one context to the free list, as putRctx does.
	put := func() bool {
		if e.keep(free, now) {
			free++
			return true
		}
		e.total--
		return false
	}
	take := func() {
		if free == 0 {
			e.made()
			return
		}
		free--
	}
	for range 100 { // a burst: 100 at once
		take()
	}
	for i := range 100 {
		if !put() {
			t.Fatalf("burst: return %d dropped", i)
		}
	}
	quiet := func(n int) (dropped int) { // one request at a time
		for range n {
			take()
			if !put() {
				dropped++
			}
		}
		return dropped
	}
	if d := quiet(freePressureMax); d != 0 {
		t.Fatalf("%d dropped within the first %d quiet returns", d, freePressureMax)
	}
	if d := quiet(1000); d != 0 || e.total != 100 {
		t.Fatalf("before freeWait: %d dropped, %d contexts", d, e.total)
	}
	clock = clock.Add(freeWait)
	// past the wait, each crossing of the bound drops one and eases the
	// pressure by freePressureDrop: one drop per freePressureDrop returns
	for i := range 3 {
		if d := quiet(freePressureDrop); d != 1 || e.total != 99-i {
			t.Fatalf("after freeWait, round %d: %d dropped, %d contexts, want 1, %d", i, d, e.total, 99-i)
		}
	}
	quiet(200 * freePressureDrop)
	if e.total > 1 {
		t.Errorf("after a long quiet: %d contexts, want at most 1", e.total)
	}
	for range 10 { // a new burst starts over
		take()
	}
	if e.pressure != 0 || !e.waiter.IsZero() {
		t.Errorf("a context made: pressure %d, waiter %v, want both reset", e.pressure, e.waiter)
	}
}
