package combine

import (
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/route"
)

// shadow copies a fraction of the requests it routes to another pool and
// forgets the replies: the client is answered by the inner router alone.
// The copies are sent at once (never in the client's batch), at most
// queue of them in flight; a copy over the bound is dropped and counted.
// A dead shadow pool fails its copies at once (its backends are marked
// bad) and a hung one holds at most queue copies until its timeout: the
// client's requests wait for neither. Once breakAfter copies in a row
// have failed, the shadow is taken for down: one copy in probeEvery is
// still sent, and the rest are not made (skipped, counted) until a copy
// succeeds, so a dead or hung shadow costs the primary almost nothing.
type shadow struct {
	inner    route.Router
	to       route.Router
	redis    bool
	reads    bool
	writes   bool
	fraction float64
	queue    int64

	n                     atomic.Uint64 // requests seen, for the fraction
	inflight              atomic.Int64
	sent, dropped, failed atomic.Int64
	streak                atomic.Int64  // copies failed in a row
	probes                atomic.Uint64 // copies wanted while down, for probeEvery
	skipped               atomic.Int64
}

// The shadow's breaker: down after breakAfter failed copies in a row, one
// copy in probeEvery tries it while down.
const (
	breakAfter = 64
	probeEvery = 64
)

func newShadow(inner, to route.Router, sc *config.Shadow, redis bool) *shadow {
	return &shadow{
		inner: inner, to: to, redis: redis, fraction: sc.Fraction, queue: int64(sc.Queue),
		reads:  sc.Requests != config.ShadowWrites,
		writes: sc.Requests != config.ShadowReads,
	}
}

// Route implements route.Router: the copy first (it holds its own bytes),
// then the request itself.
func (s *shadow) Route(x *route.Exchange) {
	if s.wants(classify(&x.Req, s.redis)) && s.sample() {
		s.copy(x)
	}
	s.inner.Route(x)
}

func (s *shadow) wants(c class) bool {
	switch c {
	case read, get1:
		return s.reads
	case write, set, flush:
		return s.writes
	}
	return false
}

// sample takes the fraction of requests evenly: the n-th is copied when
// n*fraction passes a whole number.
func (s *shadow) sample() bool {
	if s.fraction >= 1 {
		return true
	}
	n := s.n.Add(1)
	return uint64(float64(n)*s.fraction) != uint64(float64(n-1)*s.fraction)
}

func (s *shadow) copy(x *route.Exchange) {
	if s.streak.Load() >= breakAfter && s.probes.Add(1)%probeEvery != 0 {
		s.skipped.Add(1)
		return
	}
	if s.inflight.Add(1) > s.queue {
		s.inflight.Add(-1)
		s.dropped.Add(1)
		return
	}
	s.sent.Add(1)
	sub := route.GetSub(s.done, nil)
	sub.X.CopyRequest(&x.Req)
	sub.Send(s.to, x.Hint, nil)
}

func (s *shadow) done(sub *route.Sub) {
	if _, failed := sub.X.Outcome(); failed {
		s.failed.Add(1)
		s.streak.Add(1)
	} else {
		s.streak.Store(0)
	}
	sub.Put()
	s.inflight.Add(-1)
}

// Counters implements kind.CounterSource.
func (s *shadow) Counters() []route.Stat {
	return []route.Stat{
		{Name: "shadow_sent", Help: "Requests copied to the shadow pool.", Value: s.sent.Load()},
		{Name: "shadow_dropped", Help: "Copies dropped because the shadow queue was full.", Value: s.dropped.Load()},
		{Name: "shadow_failed", Help: "Copies the shadow pool failed (error, timeout, down).", Value: s.failed.Load()},
		{Name: "shadow_skipped", Help: "Copies not made while the shadow pool failed every copy (one in 64 still tries it).", Value: s.skipped.Load()},
		{Name: "shadow_queued", Help: "Copies in flight to the shadow pool now.", Kind: route.Gauge, Value: s.inflight.Load()},
	}
}

// Stats implements route.Router.
func (s *shadow) Stats() []route.Stat { return append(s.Counters(), s.inner.Stats()...) }

// Backends implements route.Router.
func (s *shadow) Backends() []*backend.Backend { return nil }

// Close implements route.Router.
func (s *shadow) Close() { s.inner.Close() }
