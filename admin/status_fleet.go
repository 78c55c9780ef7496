package admin

import (
	"slices"
	"strconv"

	"shardproxy/proxy"
)

// fleetView is the status page's line about the fleet the proxy belongs
// to (proxy.FleetState).
type fleetView struct {
	ID             string   `json:"id"`
	Prefix         string   `json:"prefix"`
	Endpoints      []string `json:"endpoints"`
	Connected      bool     `json:"connected"`
	ConfigRevision int64    `json:"config_revision"`
	ConfigChecksum string   `json:"config_checksum"`
	Proxies        int      `json:"proxies"`
	Errors         int64    `json:"errors"`
	Refused        int64    `json:"refused"`
	LastError      string   `json:"last_error,omitempty"`
}

// ringView is a ring pool's ring as the page shows it.
type ringView struct {
	Version int64    `json:"version"`
	Ejected []string `json:"ejected"`
}

// fleetViewOf is st's view, nil without a fleet.
func fleetViewOf(st *proxy.FleetState) *fleetView {
	if st == nil {
		return nil
	}
	return &fleetView{ID: st.ID, Prefix: st.Prefix, Endpoints: st.Endpoints, Connected: st.Connected,
		ConfigRevision: st.ConfigRevision, ConfigChecksum: st.ConfigChecksum, Proxies: st.Proxies,
		Errors: st.Errors, Refused: st.Refused, LastError: st.LastError}
}

// applyRing makes pv show p's ring when p is a ring pool under a fleet:
// its servers leave the distribution only by the fleet's decision, so a
// server is "ejected" while the ring takes it out, and one bad here alone
// is "bad" (its keys fail fast), not ejected.
func applyRing(pv *poolView, p *proxy.PoolStats) {
	if p.Ring == nil {
		return
	}
	pv.Ring = &ringView{Version: p.Ring.Version, Ejected: p.Ring.Ejected}
	pv.Eject = "the fleet's ring (version " + strconv.FormatInt(p.Ring.Version, 10) +
		") decides which servers are ejected; a server bad here alone keeps its keys, which fail fast"
	for i := range pv.Servers {
		sv := &pv.Servers[i]
		switch {
		case slices.Contains(p.Ring.Ejected, sv.Name):
			sv.State = stateEjected
		case sv.State == stateEjected:
			sv.State = stateBad
		}
	}
}
