package fleet

import (
	"slices"

	"shardproxy/config"
)

// Target is what an Agent drives: the proxy. Its methods are called from
// the Agent's goroutine (Apply and Refuse also from Reread's caller, never
// at once) and must not block for long.
type Target interface {
	// Apply swaps the proxy to cfg, a version read from etcd, through the
	// proxy's reload path, and returns the running configuration's
	// checksum. An error means cfg was refused (counted by the Target) and
	// the running configuration keeps serving.
	Apply(cfg *config.Config) (checksum string, err error)
	// Refuse counts a version that could not even be parsed; source names
	// it (etcd, prefix and revision).
	Refuse(source string, err error)
	// SetRing applies a ring version to the ring pool of that name, now
	// and across reloads; a name the proxy lacks is ignored.
	SetRing(pool string, r Ring)
	// Rings returns what each ring pool runs now, one entry per ring pool.
	Rings() map[string]Ring
	// WatchHealth makes fn be called on each change of a ring pool's
	// server's local health; fn does not block.
	WatchHealth(fn func(Health))
	// Health returns every server of every ring pool now.
	Health() []Health
	// SetState shows the fleet's state (stats, /metrics, the status page).
	SetState(State)
	// SetMembers gives the fleet's live proxies, each with the address
	// clients reach each of its pools at (a Redis pool's cluster view),
	// whenever they change; self is this proxy's id.
	SetMembers(self string, members []Member)
}

// Member is a live proxy of the fleet: its id, and the address clients
// reach each of its pools at, by pool name.
type Member struct {
	ID    string
	Pools map[string]string
}

// Ring is a ring pool's ejected servers at a fleet version.
type Ring struct {
	Version int64    // 0: no fleet decision yet
	Ejected []string // server names out of the pool's distribution, sorted
}

// Equal reports whether r and o eject the same servers at the same version.
func (r Ring) Equal(o Ring) bool {
	return r.Version == o.Version && slices.Equal(r.Ejected, o.Ejected)
}

// Health is what this proxy sees of one server of a ring pool.
type Health struct {
	Pool, Server, Addr string
	Bad                bool
	Err                string
}

// State is the fleet as this proxy sees it.
type State struct {
	ID, Prefix     string
	Endpoints      []string
	Connected      bool
	ConfigRevision int64  // of the applied configuration; 0: none from etcd
	ConfigChecksum string // of the applied configuration
	Proxies        int    // live proxies registered
	Errors         int64  // failed etcd requests and lost sessions
	Refused        int64  // configuration versions refused
	LastError      string
}
