package combine

import (
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/route"
)

// plan is where a migration's phase (or a warm-up) sends each class of
// request between its two pools, a (from, or warm) and b (to, or cold).
type plan struct {
	readB      bool // reads and other requests go to b
	getFromB   bool // a one-key get reads b, then a on a miss, and fills b
	primaryB   bool // a write is answered by b; a is the other pool
	otherGets  bool // the other pool hears of writes at all
	otherSets  bool // a set goes to the other pool as it is (else a delete)
	otherFlush bool // a flush goes to the other pool too
}

// plans are the phases' plans; warm_up's is warmUpPlan. from_only, the
// phase a migration starts and aborts in, still deletes written keys in
// to: an abort must leave no value there that a write replaced in from,
// or the next warm phase would read it.
var plans = map[string]plan{
	config.PhaseFromOnly:  {otherGets: true, otherFlush: true},
	config.PhaseDualWrite: {otherGets: true, otherSets: true, otherFlush: true},
	config.PhaseWarm:      {getFromB: true, otherGets: true, otherSets: true, otherFlush: true},
	config.PhaseToOnly:    {readB: true, primaryB: true, otherGets: true, otherFlush: true},
}

// warmUpPlan: the cold pool answers everything; a one-key get that
// misses reads the warm pool and fills the cold; the warm pool gets a
// delete of every key written, so that it never fills back a value
// older than a write.
var warmUpPlan = plan{readB: true, getFromB: true, primaryB: true, otherGets: true, otherFlush: true}

// migrate is the router of a migration or a warm-up.
type migrate struct {
	name     string // "migrate" or "warm_up", for messages
	a, b     route.Router
	aName    string
	bName    string
	plan     atomic.Pointer[plan] // the phase's now (it moves by the clock with at:)
	phase    atomic.Int64         // its number in config's order (route_phase)
	timers   []*time.Timer
	redis    bool
	d        codec.Dialect
	guard    *guard
	parsers  sync.Pool
	now      func() time.Time
	counters migrateCounters
}

// migrateCounters count every way a request takes through a migrate
// router.
type migrateCounters struct {
	readsA, readsB, fallbacks, fallbackHits, fills, fillsRefused, fillsNotStored, fillFailures,
	writes, otherFailures, writeFailures atomic.Int64
}

// Counters implements kind.CounterSource.
func (m *migrate) Counters() []route.Stat {
	c := &m.counters
	return []route.Stat{
		{Name: "route_reads_a", Help: "Reads answered by the first pool (migrate: from; warm_up: warm).", Value: c.readsA.Load()},
		{Name: "route_reads_b", Help: "Reads answered by the second pool (migrate: to; warm_up: cold).", Value: c.readsB.Load()},
		{Name: "route_fallbacks", Help: "One-key gets the second pool missed (or failed), read from the first.", Value: c.fallbacks.Load()},
		{Name: "route_fallback_hits", Help: "Fallbacks the first pool answered with a value.", Value: c.fallbackHits.Load()},
		{Name: "route_fills", Help: "Values a fallback read added to the second pool.", Value: c.fills.Load()},
		{Name: "route_fills_refused", Help: "Fills not sent because a write of their key was routed since the get.", Value: c.fillsRefused.Load()},
		{Name: "route_fills_not_stored", Help: "Fills the second pool did not store (it held the key already).", Value: c.fillsNotStored.Load()},
		{Name: "route_fill_failures", Help: "Fills the second pool failed.", Value: c.fillFailures.Load()},
		{Name: "route_writes", Help: "Writes, deletes and flushes routed.", Value: c.writes.Load()},
		{Name: "route_other_failures", Help: "Writes the other pool failed (a set is then deleted there).", Value: c.otherFailures.Load()},
		{Name: "route_write_failures", Help: "Writes answered with an error because the other pool could not be written nor its key deleted.", Value: c.writeFailures.Load()},
		{Name: "route_phase", Help: "The migration's phase now: 0 from_only, 1 dual_write, 2 warm, 3 to_only (a warm-up: 2).", Kind: route.Gauge, Value: m.phase.Load()},
	}
}

// newMigrate returns the router of a migration or warm-up between a and
// b, keeping old's guard when old moved keys between the same pools.
func newMigrate(name string, a, b route.Router, aName, bName string, p plan, env *envLite, old *migrate) *migrate {
	m := &migrate{name: name, a: a, b: b, aName: aName, bName: bName, redis: env.redis, d: env.d, now: time.Now}
	m.plan.Store(&p)
	m.phase.Store(int64(phaseNumber(config.PhaseWarm)))
	if old != nil && old.aName == aName && old.bName == bName {
		m.guard = old.guard
	} else {
		m.guard = newGuard()
	}
	limits := env.limits
	m.parsers.New = func() any { return env.d.NewRequestParser(limits) }
	return m
}

// placer is a pool's router that says which backend a request's keys
// live on: the sharded kind's (kind.Dedicator's Place).
type placer interface {
	Place(req *codec.Request, hint uint32) (*backend.Backend, int, []byte)
}

// movedKeys returns the keys of keys that the two pools place on
// different servers: a pool grown from 4 servers to 6 shares its 4 with
// the new ring, and a key that stays on its server must not get the
// other pool's delete after the write (it would delete the write). When
// a pool cannot say where a key lives, the key counts as moved.
func (m *migrate) movedKeys(keys [][]byte) [][]byte {
	pa, okA := m.a.(placer)
	pb, okB := m.b.(placer)
	if !okA || !okB {
		return keys
	}
	var moved [][]byte
	req := codec.Request{Keys: make([][]byte, 1)}
	for _, k := range keys {
		req.Keys[0] = k
		ba, _, refA := pa.Place(&req, 0)
		bb, _, refB := pb.Place(&req, 0)
		if refA != nil || refB != nil || ba.Addr() != bb.Addr() {
			moved = append(moved, k)
		}
	}
	return moved
}

// keyHint is the hint of a request of one key: every request of the key
// takes the same socket of its server, so a fill and the writes around it
// reach the server in the order they were sent.
func keyHint(x *route.Exchange) uint32 {
	if len(x.Req.Keys) != 1 {
		return x.Hint
	}
	h := fnv.New32a()
	h.Write(x.Req.Keys[0])
	return h.Sum32()
}

// follow moves m to each phase of mc.At at its time; a phase already
// begun is m's now. Close stops the timers; a check builds none.
func (m *migrate) follow(mc *config.Migrate, check bool) {
	now := m.now()
	p := plans[mc.PhaseNow(now)]
	m.plan.Store(&p)
	m.phase.Store(int64(phaseNumber(mc.PhaseNow(now))))
	if check {
		return
	}
	for _, a := range mc.At {
		if d := a.At.Sub(now); d > 0 {
			p, n := plans[a.Phase], phaseNumber(a.Phase)
			m.timers = append(m.timers, time.AfterFunc(d, func() {
				m.plan.Store(&p)
				m.phase.Store(int64(n))
			}))
		}
	}
}

// phaseNumber is the number route_phase shows for phase.
func phaseNumber(phase string) int {
	for i, p := range []string{config.PhaseFromOnly, config.PhaseDualWrite, config.PhaseWarm, config.PhaseToOnly} {
		if p == phase {
			return i
		}
	}
	return -1
}

// Route implements route.Router.
func (m *migrate) Route(x *route.Exchange) {
	c := classify(&x.Req, m.redis)
	p := m.plan.Load()
	switch {
	case c == get1 && p.getFromB:
		m.routeWarmGet(x)
	case c == other || c == read || c == get1:
		x.Hint = keyHint(x)
		if p.readB {
			m.counters.readsB.Add(1)
			m.b.Route(x)
		} else {
			m.counters.readsA.Add(1)
			m.a.Route(x)
		}
	default:
		m.routeWrite(x, c, p)
	}
}

// sides returns the pool that answers writes under p and the other one.
func (m *migrate) sides(p *plan) (primary, secondary route.Router) {
	if p.primaryB {
		return m.b, m.a
	}
	return m.a, m.b
}

// parse makes s's request the first request of wire.
func (m *migrate) parse(s *route.Sub, wire []byte) error {
	p := m.parsers.Get().(codec.RequestParser)
	err := s.X.Parse(p, wire)
	m.parsers.Put(p)
	return err
}

// Stats implements route.Router.
func (m *migrate) Stats() []route.Stat { return m.Counters() }

// Backends implements route.Router: a route pool has no servers of its
// own; its pools show theirs.
func (m *migrate) Backends() []*backend.Backend { return nil }

// Close implements route.Router: the phases' timers stop; the pools it
// routes to are theirs to close.
func (m *migrate) Close() {
	for _, t := range m.timers {
		t.Stop()
	}
}

// answerError answers x with a server error naming msg, or nothing for
// a request without reply.
func answerError(x *route.Exchange, d codec.Dialect, msg string) {
	out := x.Out()
	if x.Req.Mode != codec.ModeNoreply {
		out = d.AppendError(out, codec.ErrServer, msg)
	}
	x.Answer(out)
}
