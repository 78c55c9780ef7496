package main

import (
	"log/slog"

	"shardproxy/dnspool"
	"shardproxy/proxy"
)

// newDNS returns the watchers of the servers_from pools; a change of a
// pool's set is one pending ask on changed (one is enough: the re-apply
// takes every pool's latest set).
func newDNS(log *slog.Logger, changed chan<- struct{}) *dnspool.Group {
	return dnspool.New(dnspool.Config{Logger: log, OnChange: func(string) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
}

// dnsStats are the proxy's SourceStats for the pools of g: the figures of
// a servers_from pool as shardproxy_dns_* and the stats command's dns_*.
func dnsStats(g *dnspool.Group) proxy.SourceStats {
	return func(pool string) []proxy.RouterStat {
		for _, st := range g.Stats() {
			if st.Pool == pool {
				return dnsFigures(st)
			}
		}
		return nil
	}
}

func dnsFigures(st dnspool.Stats) []proxy.RouterStat {
	var last int64
	if !st.LastChange.IsZero() {
		last = st.LastChange.Unix()
	}
	c, g := proxy.RouterCounter, proxy.RouterGauge
	return []proxy.RouterStat{
		{Name: "dns_resolutions", Kind: c, Value: st.Resolutions, Help: "servers_from: DNS answers asked for."},
		{Name: "dns_failures", Kind: c, Value: st.Failures, Help: "servers_from: answers that failed or were empty; the servers were kept."},
		{Name: "dns_held", Kind: c, Value: st.Held, Help: "servers_from: answers held until they repeat (over max_change or max_servers)."},
		{Name: "dns_changes", Kind: c, Value: st.Changes, Help: "servers_from: server sets applied, the first one included."},
		{Name: "dns_servers", Kind: g, Value: int64(st.Servers), Help: "servers_from: servers in the set in use (0 before the first answer)."},
		{Name: "dns_last_change_seconds", Kind: g, Value: last, Help: "servers_from: when the set in use was applied, in seconds since the epoch (0: never)."},
		{Name: "dns_failing", Kind: g, Value: b2i(st.Failing), Help: "servers_from: 1 while the last resolution failed."},
		{Name: "dns_holding", Kind: g, Value: b2i(st.Holding), Help: "servers_from: 1 while an answer is held, waiting to repeat."},
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// redns applies the source's configuration again with the watchers'
// latest sets.
func (op *operator) redns() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.apply(op.last, "dns")
}
