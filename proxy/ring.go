package proxy

import (
	"slices"
	"strconv"
	"sync"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/kind"
)

// What a fleet drives of a Server (Options.FleetRing): the ring of each
// ring pool, the local health of their servers that the fleet's rule
// counts, and the fleet's state shown in stats. A ring pool is a sharded
// pool with auto_eject_hosts and eject_policy remap, without sentinels
// (memcache or Redis); under FleetRing its distribution's live set is the
// fleet's ring, never its own backends' health.

// Ring is a fleet's decision about a ring pool's distribution: its
// Version (0: no decision yet) and the names of the servers Ejected from
// it (config.Server.Name).
type Ring = kind.Ring

// ServerHealth is one ring pool server's health as this proxy sees it.
type ServerHealth struct {
	// Pool and Server name the server (config.Server.Name), Addr is
	// where its backend dials.
	Pool, Server, Addr string
	// Bad is true while the server's backend is marked bad here (its
	// requests fail fast).
	Bad bool
	// Err is the cause of the backend's last failure ("connecting",
	// "timeout", ...) while Bad; "" otherwise.
	Err string
}

// FleetState is what the fleet a Server belongs to tells of itself, shown
// in stats, /metrics and the status page (SetFleetState).
type FleetState struct {
	ID, Prefix string
	Endpoints  []string
	Connected  bool
	// ConfigRevision and ConfigChecksum are those of the applied
	// configuration.
	ConfigRevision int64
	ConfigChecksum string
	Proxies        int // live proxies registered
	Errors         int64
	Refused        int64
	LastError      string
}

// SetRing makes r the ring of the pool called pool: applied now to the
// running pool of that name (when it is a ring pool under
// Options.FleetRing), and the ring the pool of that name starts with in
// every later generation, so a reload keeps it. Servers r names that the
// pool lacks are ignored. Safe for concurrent use; it waits for a reload
// under way.
func (s *Server) SetRing(pool string, r Ring) {
	r.Ejected = slices.Clone(r.Ejected)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rings[pool] = r
	if p := s.pool(pool); p != nil {
		if f, ok := p.router.(kind.RingFollower); ok {
			f.SetRing(r)
		}
	}
}

// Rings returns the ring each ring pool runs now, by pool name: its
// Ejected are the pool's servers among those the ring named, sorted.
// Empty without Options.FleetRing.
func (s *Server) Rings() map[string]Ring {
	rings := map[string]Ring{}
	for _, p := range s.currentPools() {
		if f, ok := p.router.(kind.RingFollower); ok {
			if r, ok := f.Ring(); ok {
				rings[p.cfg.Name] = r
			}
		}
	}
	return rings
}

// Health returns the health now of every server of every ring pool, in
// the pools' order and each pool's distribution order. Empty without
// Options.FleetRing.
func (s *Server) Health() []ServerHealth {
	var hs []ServerHealth
	for _, p := range s.currentPools() {
		for _, b := range ringServers(p) {
			hs = append(hs, healthOf(p.cfg.Name, b, b.Bad()))
		}
	}
	return hs
}

// WatchHealth calls fn on each change of a ring pool's server's health
// (Health), first for each server bad now. fn is called one change at a
// time, in order, from the goroutine that saw it (a backend's): it must
// not block nor call WatchHealth. A server a reload removed, or whose
// backend it replaced, is told as it is then (a removed one: not bad).
func (s *Server) WatchHealth(fn func(ServerHealth)) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	s.health.watchers = append(s.health.watchers, fn)
	for _, h := range s.health.bad {
		fn(h)
	}
}

// SetFleetState records st, the fleet's state, for stats, /metrics and
// the status page. Safe for concurrent use.
func (s *Server) SetFleetState(st FleetState) {
	st.Endpoints = slices.Clone(st.Endpoints)
	s.fleet.Store(&st)
}

// Fleet returns the fleet's state as last set, and false when no fleet
// set it.
func (s *Server) Fleet() (FleetState, bool) {
	if st := s.fleet.Load(); st != nil {
		return *st, true
	}
	return FleetState{}, false
}

// ringServers returns p's ring servers' backends, or nil when p is no
// ring pool under a fleet.
func ringServers(p *pool) []*backend.Backend {
	if f, ok := p.router.(kind.RingFollower); ok {
		return f.RingServers()
	}
	return nil
}

// healthOf is b's health, bad or not, as a server of pool.
func healthOf(pool string, b *backend.Backend, bad bool) ServerHealth {
	h := ServerHealth{Pool: pool, Server: b.Name(), Addr: b.Addr(), Bad: bad}
	if bad {
		h.Err = b.State().LastCause
	}
	return h
}

// serverKey names a ring pool's server: pool and server name.
type serverKey struct{ pool, server string }

// healthBook tells WatchHealth's watchers of each change: it keeps the
// servers last told bad, so a backend state change, or a reload, is told
// once and only when it changes what the watchers know.
type healthBook struct {
	mu       sync.Mutex
	watchers []func(ServerHealth)
	bad      map[serverKey]ServerHealth // told bad, not told good since
}

// tell tells the watchers of h if it changes what they were told.
// Called with hb.mu held.
func (hb *healthBook) tell(h ServerHealth) {
	k := serverKey{h.Pool, h.Server}
	if _, was := hb.bad[k]; was == h.Bad {
		return
	}
	if h.Bad {
		if hb.bad == nil {
			hb.bad = map[serverKey]ServerHealth{}
		}
		hb.bad[k] = h
	} else {
		delete(hb.bad, k)
	}
	for _, fn := range hb.watchers {
		fn(h)
	}
}

// backendChanged tells of b's state when b is a ring server of the
// running generation (a backend of a generation not running yet is told
// by sync once it runs). The state is read under hb.mu rather than taken
// from the callback: two changes in quick succession call back on two
// goroutines in either order, and the last to tell must tell the state
// that holds.
func (hb *healthBook) backendChanged(gen *generation, b *backend.Backend) {
	for _, p := range gen.pools {
		if slices.Contains(ringServers(p), b) {
			hb.mu.Lock()
			hb.tell(healthOf(p.cfg.Name, b, b.Bad()))
			hb.mu.Unlock()
			return
		}
	}
}

// sync tells of every change between what the watchers know and the
// health of gen's ring servers now: after a reload, a server removed
// (told not bad) or with a new backend.
func (hb *healthBook) sync(gen *generation) {
	hb.mu.Lock() // before reading the states, as backendChanged
	defer hb.mu.Unlock()
	now := map[serverKey]ServerHealth{}
	for _, p := range gen.pools {
		for _, b := range ringServers(p) {
			h := healthOf(p.cfg.Name, b, b.Bad())
			now[serverKey{h.Pool, h.Server}] = h
		}
	}
	for k, h := range hb.bad {
		if _, ok := now[k]; !ok {
			hb.tell(ServerHealth{Pool: k.pool, Server: k.server, Addr: h.Addr})
		}
	}
	for _, h := range now {
		hb.tell(h)
	}
}

// ring returns what p runs of its fleet's ring, or nil when p is no ring
// pool under a fleet.
func (p *pool) ring() *Ring {
	if f, ok := p.router.(kind.RingFollower); ok {
		if r, ok := f.Ring(); ok {
			return &r
		}
	}
	return nil
}

// fleetStats are the lines "stats" (and Redis's INFO proxy) shows of the
// fleet and of p's ring: none without a fleet.
func (p *pool) fleetStats() []codec.Stat {
	var stats []codec.Stat
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	if st := p.srv.fleet.Load(); st != nil {
		stats = append(stats,
			codec.Stat{Name: "fleet_id", Value: st.ID},
			codec.Stat{Name: "fleet_prefix", Value: st.Prefix},
			codec.Stat{Name: "fleet_connected", Value: itoa(b2i(st.Connected))},
			codec.Stat{Name: "fleet_config_revision", Value: itoa(st.ConfigRevision)},
			codec.Stat{Name: "fleet_config_checksum", Value: st.ConfigChecksum},
			codec.Stat{Name: "fleet_proxies", Value: strconv.Itoa(st.Proxies)},
			codec.Stat{Name: "fleet_errors", Value: itoa(st.Errors)},
			codec.Stat{Name: "fleet_refused", Value: itoa(st.Refused)})
	}
	if r := p.ring(); r != nil {
		stats = append(stats,
			codec.Stat{Name: "ring_version", Value: itoa(r.Version)},
			codec.Stat{Name: "ring_ejected", Value: strconv.Itoa(len(r.Ejected))})
	}
	return stats
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
