package backend

import (
	"math/rand"
	"testing"
)

// TestSockQueue pushes and pops calls at random against a plain slice:
// the order holds, no storage slot outside the window keeps a call, and
// once the queue has been as long as it gets, batches allocate nothing.
func TestSockQueue(t *testing.T) {
	calls := make([]*Call, 64)
	for i := range calls {
		calls[i] = &Call{}
	}
	var s sock
	var want []*Call
	rng := rand.New(rand.NewSource(1))
	check := func() {
		t.Helper()
		if len(s.inflight) != len(want) {
			t.Fatalf("queue holds %d calls, want %d", len(s.inflight), len(want))
		}
		for i := range want {
			if s.inflight[i] != want[i] {
				t.Fatalf("call %d out of order", i)
			}
		}
		held := 0
		for _, c := range s.fifo[:cap(s.fifo)] {
			if c != nil {
				held++
			}
		}
		if held != len(want) {
			t.Fatalf("storage holds %d calls, the queue %d", held, len(want))
		}
	}
	for range 20000 {
		if rng.Intn(2) == 0 && len(want) < 48 {
			n := 1 + rng.Intn(16)
			k := rng.Intn(len(calls) - n)
			s.queue(calls[k : k+n])
			want = append(want, calls[k:k+n]...)
		} else {
			for n := rng.Intn(8); n > 0 && len(want) > 0; n-- {
				s.pop()
				want = want[1:]
			}
		}
		check()
	}
	allocs := testing.AllocsPerRun(1000, func() {
		s.queue(calls[:7])
		for range 7 {
			s.pop()
		}
	})
	if allocs != 0 {
		t.Errorf("a batch through a used queue allocates %.1f times", allocs)
	}
}
