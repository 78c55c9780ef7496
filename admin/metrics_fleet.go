package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"shardproxy/proxy"
)

// fleetDescs are the metrics of the fleet a proxy belongs to and of its
// ring pools' rings, exported only with a fleet (proxy.Stats.Fleet) and
// for ring pools (proxy.PoolStats.Ring).
type fleetDescs struct {
	info, connected, revision, proxies, errors, refused *prometheus.Desc
	ringVersion, ringEjected                            *prometheus.Desc
}

func newFleetDescs(d func(name, help string, labels ...string) *prometheus.Desc) fleetDescs {
	return fleetDescs{
		info:        d("fleet_info", "Always 1 while the proxy belongs to a fleet; the labels tell its id and etcd prefix.", "id", "prefix"),
		connected:   d("fleet_connected", "1 while the proxy reaches the fleet's etcd, else 0."),
		revision:    d("fleet_config_revision", "The etcd revision of the configuration the proxy applied."),
		proxies:     d("fleet_proxies", "Live proxies registered in the fleet."),
		errors:      d("fleet_errors_total", "Failed requests to the fleet's etcd."),
		refused:     d("fleet_refused_total", "Configurations from etcd the proxy refused (invalid)."),
		ringVersion: d("ring_version", "The version of the fleet's ring the pool runs; 0 before the fleet's first decision.", "pool"),
		ringEjected: d("ring_ejected", "Servers the fleet's ring takes out of the pool's distribution.", "pool"),
	}
}

func (f fleetDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{f.info, f.connected, f.revision, f.proxies, f.errors, f.refused, f.ringVersion, f.ringEjected} {
		ch <- d
	}
}

// collect exports st's fleet state.
func (f fleetDescs) collect(m emitter, st *proxy.FleetState) {
	if st == nil {
		return
	}
	m.gauge(f.info, 1, st.ID, st.Prefix)
	m.gauge(f.connected, float64(b2i(st.Connected)))
	m.gauge(f.revision, float64(st.ConfigRevision))
	m.gauge(f.proxies, float64(st.Proxies))
	m.counter(f.errors, st.Errors)
	m.counter(f.refused, st.Refused)
}

// collectRing exports p's ring, when p is a ring pool.
func (f fleetDescs) collectRing(m emitter, p proxy.PoolStats) {
	if p.Ring == nil {
		return
	}
	m.gauge(f.ringVersion, float64(p.Ring.Version), p.Name)
	m.gauge(f.ringEjected, float64(len(p.Ring.Ejected)), p.Name)
}
