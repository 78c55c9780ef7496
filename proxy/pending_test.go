package proxy

import "testing"

// TestSessionPendingStock: a written batch's pendings go back to their
// session, up to pendingStock, and a batch of one to the pool; the reader takes them all at once, reuses them reset, and
// keeps at most pendingStock of those it did not use. Every request of the
// integration tests runs through this reuse; this test pins the bounds,
// which keep a session that once pipelined deeply cheap when it goes quiet.
func TestSessionPendingStock(t *testing.T) {
	s := &session{}
	written := make([]*pending, 3*pendingStock)
	for i := range written {
		p := getPending()
		p.sess, p.Req.Wire = s, append(p.Req.Wire, "END\r\n"...)
		p.ready.Store(true)
		p.reset()
		written[i] = p
	}
	alone := getPending()
	alone.reset()
	s.w.mu.Lock()
	s.stock([]*pending{alone})
	s.w.mu.Unlock()
	if len(s.w.freed) != 0 || s.w.stocked.Load() {
		t.Fatalf("the session kept a pending written alone: %d kept", len(s.w.freed))
	}
	s.w.mu.Lock()
	s.stock(written)
	s.w.mu.Unlock()
	if len(s.w.freed) != pendingStock {
		t.Fatalf("the session kept %d written pendings; want pendingStock (%d)", len(s.w.freed), pendingStock)
	}

	p := s.newPending()
	if p != written[pendingStock-1] {
		t.Errorf("newPending did not reuse the session's last written pending")
	}
	if p.ready.Load() || len(p.Req.Wire) != 0 || len(p.Out()) != 0 || p.sess != nil {
		t.Errorf("a reused pending is not reset: ready %v, wire %q, out %q, sess %p", p.ready.Load(), p.Req.Wire, p.Out(), p.sess)
	}
	if len(s.free) != pendingStock-1 || len(s.w.freed) != 0 {
		t.Errorf("after one newPending: reader holds %d, writer %d; want %d and 0",
			len(s.free), len(s.w.freed), pendingStock-1)
	}

	s.freePending(p)
	s.freePending(getPending())
	if len(s.free) != pendingStock {
		t.Errorf("the reader keeps %d unused pendings; want at most pendingStock (%d)", len(s.free), pendingStock)
	}
	for range pendingStock {
		s.newPending()
	}
	if p := s.newPending(); p == nil || p.ready.Load() {
		t.Errorf("with no stock left, newPending must come from the pool, reset: %v", p)
	}

	s.w.mu.Lock()
	s.stock(written[:2])
	s.w.mu.Unlock()
	s.dropStock()
	if len(s.free) != 0 || len(s.w.freed) != 0 || s.w.stocked.Load() {
		t.Errorf("dropStock left %d and %d pendings on the session", len(s.free), len(s.w.freed))
	}
}
