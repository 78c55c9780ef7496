package main

import (
	"slices"

	"shardproxy/fleet"
	"shardproxy/proxy"
)

// ringTarget is the ring half of fleet.Target over the proxy: the fleet's
// ring versions go to the proxy's ring pools, their servers' local health
// comes back, and the fleet's state is shown with the proxy's.
type ringTarget struct {
	srv *proxy.Server
}

func (t ringTarget) SetRing(pool string, r fleet.Ring) {
	t.srv.SetRing(pool, proxy.Ring{Version: r.Version, Ejected: r.Ejected})
}

// Rings returns what each ring pool runs, its ejected servers sorted as
// the fleet keeps them.
func (t ringTarget) Rings() map[string]fleet.Ring {
	running := t.srv.Rings()
	out := make(map[string]fleet.Ring, len(running))
	for pool, r := range running {
		ej := slices.Clone(r.Ejected)
		slices.Sort(ej)
		if ej == nil {
			ej = []string{}
		}
		out[pool] = fleet.Ring{Version: r.Version, Ejected: ej}
	}
	return out
}

func (t ringTarget) WatchHealth(fn func(fleet.Health)) {
	t.srv.WatchHealth(func(h proxy.ServerHealth) { fn(fleet.Health(h)) })
}

func (t ringTarget) Health() []fleet.Health {
	hs := t.srv.Health()
	out := make([]fleet.Health, len(hs))
	for i, h := range hs {
		out[i] = fleet.Health(h)
	}
	return out
}

func (t ringTarget) SetState(st fleet.State) { t.srv.SetFleetState(proxy.FleetState(st)) }

func (t ringTarget) SetMembers(self string, members []fleet.Member) {
	ms := make([]proxy.FleetMember, len(members))
	for i, m := range members {
		ms[i] = proxy.FleetMember(m)
	}
	t.srv.SetFleetMembers(self, ms)
}
