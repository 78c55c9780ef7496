package kind

import "shardproxy/backend"

// Ring is a fleet's decision about a ring pool's distribution: which of
// its servers are out of it, at which version. A ring pool is a sharded
// pool with auto_eject_hosts and eject_policy remap, without sentinels;
// under a fleet (Env.FleetRing) its distribution's live set is the ring's
// and never follows its own backends' health.
type Ring struct {
	// Version is the fleet's number of the decision; 0: no decision yet
	// (every server live).
	Version int64
	// Ejected are the names (config.Server.Name) of the servers out of
	// the distribution. A name the pool lacks is ignored.
	Ejected []string
}

// RingFollower is a router whose distribution can follow a fleet's ring:
// the sharded kind's. The proxy calls it when the fleet decides a new
// ring for the pool; a reload's router starts from Env.Ring instead, so
// there is no moment with another live set.
type RingFollower interface {
	// Ring returns the ring the router runs now, its Ejected the names
	// the pool has, sorted; false when the pool is no ring pool or
	// follows no fleet.
	Ring() (Ring, bool)
	// SetRing makes r the distribution's live set at once (one rebuild)
	// and logs it when it changed. It does nothing when Ring reports
	// false. Safe for concurrent use with Route.
	SetRing(r Ring)
	// RingServers returns the backends of the ring's servers (each
	// named as its server), whose health the fleet hears of; nil when
	// Ring reports false. The slice must not be modified.
	RingServers() []*backend.Backend
}
