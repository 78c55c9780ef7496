package combine

import (
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/route"
)

// failover sends a request to the inner router and, when it fails, to
// another pool: routelib's route_failover with two children. A failure
// is an error reply (SERVER_ERROR, CLIENT_ERROR, a Redis error), a
// backend that failed or timed out, or the router's own refusal (no
// server, marked bad); with on: error_or_miss a miss is one too, as
// routelib's miss = true. When the other pool fails as well, the client
// gets the first pool's miss if it had one, else the other pool's error
// (routelib returns the miss it kept, else the last result).
//
// Requests without keys (stats, version, INFO) go to the inner router
// alone.
type failover struct {
	inner  route.Router
	to     route.Router
	d      codec.Dialect
	redis  bool
	onMiss bool

	failovers, failed atomic.Int64
}

func newFailover(inner, to route.Router, fc *config.RouteFailover, d codec.Dialect, redis bool) *failover {
	return &failover{inner: inner, to: to, d: d, redis: redis, onMiss: fc.On == config.FailoverOnErrorOrMiss}
}

// Route implements route.Router.
func (f *failover) Route(x *route.Exchange) {
	if classify(&x.Req, f.redis) == other {
		f.inner.Route(x)
		return
	}
	s := route.GetSub(f.firstDone, x)
	s.X.CopyRequest(&x.Req)
	s.Send(f.inner, x.Hint, x.Batch)
}

// firstDone: a success is answered; a failure goes to the other pool.
func (f *failover) firstDone(s *route.Sub) {
	x := s.Arg.(*route.Exchange)
	kind, failed := s.X.Outcome()
	if !failed && (kind != codec.ReplyMiss || !f.onMiss) {
		f.answer(x, s)
		return
	}
	f.failovers.Add(1)
	s2 := route.GetSub(f.secondDone, s)
	s2.X.CopyRequest(&s.X.Req)
	s2.Send(f.to, x.Hint, nil)
}

// secondDone answers the other pool's reply, or the first pool's miss
// when the other failed too.
func (f *failover) secondDone(s2 *route.Sub) {
	s := s2.Arg.(*route.Sub)
	x := s.Arg.(*route.Exchange)
	_, failed := s2.X.Outcome()
	if failed {
		f.failed.Add(1)
		if _, firstFailed := s.X.Outcome(); !firstFailed {
			s2.Put()
			f.answer(x, s)
			return
		}
	}
	s.Put()
	f.answer(x, s2)
}

// answer answers x with s's reply and gives s back.
func (f *failover) answer(x *route.Exchange, s *route.Sub) {
	out, _ := s.X.AppendReply(nil, f.d)
	s.Put()
	x.Complete(out)
}

// Counters implements kind.CounterSource.
func (f *failover) Counters() []route.Stat {
	return []route.Stat{
		{Name: "failovers", Help: "Requests the first pool failed (or missed, with on: error_or_miss), sent to the failover pool.", Value: f.failovers.Load()},
		{Name: "failover_failures", Help: "Failovers the failover pool failed too.", Value: f.failed.Load()},
	}
}

// Stats implements route.Router.
func (f *failover) Stats() []route.Stat { return append(f.Counters(), f.inner.Stats()...) }

// Backends implements route.Router.
func (f *failover) Backends() []*backend.Backend { return nil }

// Close implements route.Router.
func (f *failover) Close() { f.inner.Close() }
