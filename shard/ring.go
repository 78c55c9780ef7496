package shard

import (
	"slices"
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/kind"
)

// A ring pool under a fleet (kind.Env.FleetRing) takes its live set from
// the fleet's ring, never from its backends' health: a server ejected on
// one proxy's view alone would put its keys elsewhere on that proxy only,
// and the proxies would disagree about where a key lives. A server that is
// bad here but not out of the ring keeps its keys; their requests fail
// fast as a bad backend's do (backend: markedbad), and the fleet hears of
// it through the proxy's health reports.

var (
	_ kind.RingFollower = (*router)(nil)
	_ kind.RingFollower = (*nearRouter)(nil)
)

// ringPool reports whether pc's distribution may follow a fleet's ring:
// its servers leave it when bad (auto_eject_hosts, eject_policy remap)
// and are the pool's own, not Sentinel's.
func ringPool(pc *config.Pool) bool {
	return pc.AutoEjectHosts && pc.EjectPolicy == config.EjectRemap && len(pc.Sentinels) == 0
}

// ringState is what a router following a ring keeps of it.
type ringState struct {
	mu  sync.Mutex // serialises SetRing
	now atomic.Pointer[kind.Ring]
}

// followRing makes r follow k's ring when k's pool is a ring pool under
// a fleet: its distribution (a new one, or the running router's, kept)
// takes the ring's live set before the router serves.
func (r *router) followRing(k *kind.Env) {
	if !k.FleetRing || !ringPool(k.Pool) {
		return
	}
	r.ring = new(ringState)
	r.applyRing(k.Ring)
}

// Ring implements kind.RingFollower.
func (r *router) Ring() (kind.Ring, bool) {
	if r.ring == nil {
		return kind.Ring{}, false
	}
	return *r.ring.now.Load(), true
}

// SetRing implements kind.RingFollower.
func (r *router) SetRing(ring kind.Ring) {
	if r.ring == nil {
		return
	}
	r.ring.mu.Lock()
	defer r.ring.mu.Unlock()
	was := *r.ring.now.Load()
	now := r.applyRing(ring)
	if now.Version != was.Version || !slices.Equal(now.Ejected, was.Ejected) {
		r.log.Info("ring applied", "version", now.Version, "ejected", now.Ejected, "previous_version", was.Version)
	}
}

// RingServers implements kind.RingFollower: the pool's backends, in the
// distribution's order.
func (r *router) RingServers() []*backend.Backend {
	if r.ring == nil {
		return nil
	}
	return r.backends()
}

// applyRing makes ring's the distribution's live set and returns the ring
// as applied: its Ejected the pool's servers among them, sorted.
func (r *router) applyRing(ring kind.Ring) kind.Ring {
	servers := r.shard.Servers()
	live := make([]bool, len(servers))
	applied := kind.Ring{Version: ring.Version}
	for i, s := range servers {
		live[i] = !slices.Contains(ring.Ejected, s.Name)
		if !live[i] {
			applied.Ejected = append(applied.Ejected, s.Name)
		}
	}
	slices.Sort(applied.Ejected)
	r.shard.SetLive(live)
	r.ring.now.Store(&applied)
	return applied
}

// Ring implements kind.RingFollower: the pool's router's.
func (r *nearRouter) Ring() (kind.Ring, bool) { return r.inner.Ring() }

// SetRing implements kind.RingFollower: the pool's router's.
func (r *nearRouter) SetRing(ring kind.Ring) { r.inner.SetRing(ring) }

// RingServers implements kind.RingFollower: the pool's router's.
func (r *nearRouter) RingServers() []*backend.Backend { return r.inner.RingServers() }
