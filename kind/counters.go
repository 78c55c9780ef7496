package kind

import (
	"sync"
	"sync/atomic"

	"shardproxy/route"
)

// A pool's router counters live in objects a reload may replace: every
// reload builds a new cluster.Cluster and a new lua.Router, and a changed
// near_cache or lua_internal_cache size a new cache. Reported as they
// are, those counters would start again from zero at a reload, which
// Prometheus reads as a reset. Counters keeps them whole: each
// object that counts (a CounterSource) is added when it is made and
// retired when it closes, its final counts then added to a base, and a
// counter's value is the base plus what every live source counts now. A
// source that outlives the router that made it (the old generation still
// drains after the swap; a cache shared by two generations) is counted
// once, for as long as it lives.
//
// The backends' counters are kept whole the same way by the server's
// backend.Registry (Totals).

// maxCarriedNames bounds the counter names a pool's Counters keeps
// the final counts of. Past it, names no live source counts are dropped
// (a route file's mcp.add_stat names can change at every reload); one
// that comes back starts again from zero.
const maxCarriedNames = 1024

// CounterSource is an object that counts for a pool's router. Its
// counters (route.Counter) never decrease; its gauges are ignored.
type CounterSource interface {
	Counters() []route.Stat
}

// Counters are a pool's router counters across reloads; the proxy keeps
// one per pool name and hands it to every build of the pool
// (Env.Counters). Safe for concurrent use; the zero value is ready.
type Counters struct {
	mu   sync.Mutex
	base map[string]int64 // the final counts of retired sources
	live map[CounterSource]struct{}
}

// Add counts s from now on. A nil *Counters ignores it.
func (rc *Counters) Add(s CounterSource) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.live == nil {
		rc.live = map[CounterSource]struct{}{}
	}
	rc.live[s] = struct{}{}
}

// Retire keeps s's final counts; s counts no more.
func (rc *Counters) Retire(s CounterSource) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.live[s]; !ok {
		return
	}
	delete(rc.live, s)
	if rc.base == nil {
		rc.base = map[string]int64{}
	}
	for _, st := range s.Counters() {
		if st.Kind == route.Counter {
			rc.base[st.Name] += st.Value
		}
	}
	if len(rc.base) > maxCarriedNames {
		rc.trimLocked()
	}
}

// trimLocked drops names no live source counts until at most
// maxCarriedNames are kept.
func (rc *Counters) trimLocked() {
	counted := map[string]bool{}
	for s := range rc.live {
		for _, st := range s.Counters() {
			counted[st.Name] = true
		}
	}
	for name := range rc.base {
		if len(rc.base) <= maxCarriedNames {
			return
		}
		if !counted[name] {
			delete(rc.base, name)
		}
	}
}

// Apply returns st (a router's Stats) with every counter's value replaced
// by its value across reloads: the retired sources' and the live ones'.
// Gauges stay as st has them: they describe the router now.
func (rc *Counters) Apply(st []route.Stat) []route.Stat {
	if rc == nil || len(st) == 0 {
		return st
	}
	rc.mu.Lock()
	sum := make(map[string]int64, len(rc.base))
	for name, v := range rc.base {
		sum[name] = v
	}
	for s := range rc.live {
		for _, c := range s.Counters() {
			if c.Kind == route.Counter {
				sum[c.Name] += c.Value
			}
		}
	}
	rc.mu.Unlock()
	out := make([]route.Stat, len(st))
	for i, s := range st {
		if v, ok := sum[s.Name]; ok && s.Kind == route.Counter {
			s.Value = v
		}
		out[i] = s
	}
	return out
}

// Holds is embedded by the caches a reload may hand on to the next
// router of a pool (a Lua pool's internal cache, a sharded pool's near
// cache): how many routers hold the cache, and the pool's counters, which
// count it until the last lets go.
type Holds struct {
	refs atomic.Int32
	rc   *Counters
}

// Start makes its caller the one holder of s, whose holds h are, and has
// rc count s.
func (h *Holds) Start(rc *Counters, s CounterSource) {
	h.refs.Store(1)
	h.rc = rc
	rc.Add(s)
}

// Hold takes one more hold.
func (h *Holds) Hold() { h.refs.Add(1) }

// Drop gives back a hold of s; the last calls close and retires s.
func (h *Holds) Drop(s CounterSource, close func()) {
	if h.refs.Add(-1) == 0 {
		close()
		h.rc.Retire(s)
	}
}
