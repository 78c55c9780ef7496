package proxy

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"shardproxy/codec"
	"shardproxy/route"
)

// A pool is its dialect's codec.Env: what the commands the proxy answers
// itself show of it. memcached's stats, stats proxy, stats settings and
// stats reset, and Redis's INFO proxy section, take the pool's counters
// from here, under the names memcached gives them; the dialect renders
// them in its protocol.

// Version implements codec.Env.
func (p *pool) Version() string { return p.srv.version }

// Stats implements codec.Env: the counters a memcached "stats" shows.
// The counters "stats reset" resets (resettable) count from the last
// reset.
func (p *pool) Stats() []codec.Stat {
	now := time.Now()
	s := p.srv
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	raw := p.resettable()
	since := func(name string) string { return itoa(p.stats.shown(name, raw[name])) }
	stats := []codec.Stat{
		{Name: "pid", Value: strconv.Itoa(os.Getpid())},
		{Name: "uptime", Value: itoa(int64(now.Sub(s.start).Seconds()))},
		{Name: "time", Value: itoa(now.Unix())},
		{Name: "version", Value: s.version},
		{Name: "curr_connections", Value: itoa(s.currConns.Load())},
		{Name: "total_connections", Value: since("total_connections")},
		{Name: "pool", Value: p.cfg.Name},
		{Name: "client_connections", Value: itoa(p.stats.ClientConnections.Load())},
		{Name: "client_eof", Value: since("client_eof")},
		{Name: "client_err", Value: since("client_err")},
		{Name: "requests", Value: since("requests")},
		{Name: "fragments", Value: since("fragments")},
		{Name: "forward_error", Value: since("forward_error")},
		{Name: "protocol_errors", Value: since("protocol_errors")},
		{Name: "server_ejects", Value: since("server_ejects")},
	}
	if p.lookups != nil {
		gets, hits := p.stats.shown("get_keys", raw["get_keys"]), p.stats.shown("get_hits", raw["get_hits"])
		stats = append(stats,
			codec.Stat{Name: "cmd_get", Value: itoa(gets)},
			codec.Stat{Name: "cmd_set", Value: since("set_cmds")},
			codec.Stat{Name: "get_hits", Value: itoa(hits)},
			codec.Stat{Name: "get_misses", Value: itoa(max(0, gets-hits))})
	}
	for _, st := range p.routerStats() { // a Lua pool's counters and mcp.add_stat's, a cluster's
		stats = append(stats, codec.Stat{Name: st.Name, Value: routerValue(st)})
	}
	for _, st := range p.srv.sourceStats(p.cfg.Name) { // servers_from's dns_* figures
		stats = append(stats, codec.Stat{Name: st.Name, Value: routerValue(st)})
	}
	if sr, ok := p.router.(codec.SectionEnv); ok { // what memcached's proxy adds (proxy_req_active)
		more, _ := sr.Section("")
		stats = append(stats, more...)
	}
	return append(stats, p.fleetStats()...)
}

// resettable returns the counters that "stats reset" resets, by the name
// stats shows them under, as they are now: the totals a memcached resets
// (its connections and commands counted), not the gauges (connections
// open), nor what memcached's proxy keeps (reloads, backend failures, a
// router's and a route file's counters). The stats port and /metrics show
// every counter as it is: theirs only grow.
func (p *pool) resettable() map[string]int64 {
	ejects := p.srv.backends.Totals(p.cfg.Name).All.Ejects
	c := map[string]int64{
		"total_connections": p.srv.totalConns.Load(),
		"client_eof":        p.stats.ClientEOF.Load(),
		"client_err":        p.stats.ClientErr.Load(),
		"requests":          p.stats.Requests.Load(),
		"fragments":         p.stats.Fragments.Load(),
		"forward_error":     p.stats.ForwardError.Load(),
		"protocol_errors":   p.stats.ProtocolErrors.Load(),
		"server_ejects":     ejects,
	}
	p.stats.cmds.Range(func(k, v any) bool {
		c["cmd_"+k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	// stats shows these as cmd_get and cmd_set: keys looked up and
	// storage requests, where stats proxy's are requests by command.
	if p.lookups != nil {
		c["get_keys"] = p.stats.GetCmds.Load()
		c["get_hits"] = p.stats.GetHits.Load()
		c["set_cmds"] = p.stats.SetCmds.Load()
	}
	return c
}

// ResetStats implements codec.ResetEnv (memcached's "stats reset"): the
// resettable counters count from now on. Safe for concurrent use.
func (p *pool) ResetStats() {
	base := p.resettable()
	p.stats.base.Store(&base)
}

// conns is "stats conns" of the pool: its listening socket, numbered 1,
// with memcached's "addr" and "state".
func (p *pool) conns() []codec.Stat {
	addr := p.cfg.Listen.Addr
	if a := p.bound.Load(); a != nil {
		addr = *a
	}
	if p.cfg.Listen.Network == "unix" {
		addr = "unix:" + addr
	} else {
		addr = "tcp:" + addr
	}
	return []codec.Stat{{Name: "1:addr", Value: addr}, {Name: "1:state", Value: "conn_listening"}}
}

// shown returns what stats shows of the resettable counter name, whose
// value is now v: its count since the last reset.
func (ps *poolStats) shown(name string, v int64) int64 {
	if b := ps.base.Load(); b != nil {
		return max(0, v-(*b)[name])
	}
	return v
}

// badBackends answers "stats proxybe" as memcached's proxy does: for
// each name (a route file's label) whose backends are marked bad now,
// "bad_<name>" and how many are.
func (p *pool) badBackends() []codec.Stat {
	var stats []codec.Stat
	bad := map[string]int{}
	for _, b := range p.router.Backends() {
		if !b.Bad() {
			continue
		}
		if bad[b.Name()]++; bad[b.Name()] == 1 {
			stats = append(stats, codec.Stat{Name: "bad_" + b.Name()})
		}
	}
	for i := range stats {
		stats[i].Value = strconv.Itoa(bad[stats[i].Name[len("bad_"):]])
	}
	return stats
}

// Section implements codec.SectionEnv: "proxybe" gives the backends
// marked bad (stats proxybe), "slowlog" the pool's slowlog (stats
// slowlog, slowlog.go), "hotkeys" its hot keys, "proxy" gives memcached proxy's
// counter names (stats proxy, INFO proxy), its cmd_ counters since the
// last "stats reset" and the router's own lines of it; "settings" the
// pool's settings (stats settings);
// any other the router's (codec.SectionEnv: a Lua pool's "proxyfuncs",
// "items", "slabs"), and then "conns" too, the pool's listening socket as
// memcached's proxy lists one (its client connections are not listed).
func (p *pool) Section(name string) ([]codec.Stat, bool) {
	sr, _ := p.router.(codec.SectionEnv)
	switch name {
	case "settings":
		return p.settings(), true
	case "proxybe":
		return p.badBackends(), true
	case "slowlog":
		return p.slowlogSection(), true
	case "hotkeys":
		return p.hotSection(), true
	case "proxy":
	case "":
		return nil, false
	default:
		switch {
		case sr == nil:
			return nil, false
		case name == "conns":
			return p.conns(), true
		}
		return sr.Section(name)
	}
	s := p.srv
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	var total, bad int64
	for _, b := range p.router.Backends() {
		total++
		if b.Bad() {
			bad++
		}
	}
	failed := p.srv.backends.Totals(p.cfg.Name).All.Failures
	stats := []codec.Stat{
		{Name: "proxy_config_reloads", Value: itoa(s.reloads.Load())},
		{Name: "proxy_config_reload_fails", Value: itoa(s.reloadFailures.Load())},
		{Name: "proxy_backend_total", Value: itoa(total)},
		{Name: "proxy_backend_marked_bad", Value: itoa(bad)},
		{Name: "proxy_backend_failed", Value: itoa(failed)},
		{Name: "proxy_request_failed", Value: itoa(p.stats.ForwardError.Load())},
	}
	if sr != nil { // a Lua pool's limits (active_req_limit, ...)
		own, _ := sr.Section(name)
		stats = append(stats, own...)
	}
	var cmds []codec.Stat
	p.stats.cmds.Range(func(k, v any) bool {
		name := "cmd_" + k.(string)
		cmds = append(cmds, codec.Stat{Name: name, Value: itoa(p.stats.shown(name, v.(*atomic.Int64).Load()))})
		return true
	})
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	stats = append(stats, cmds...)
	for _, st := range p.routerStats() { // a route file's mcp.add_stat counters, as memcached lists them here
		if strings.HasPrefix(st.Name, "user_") {
			stats = append(stats, codec.Stat{Name: st.Name, Value: routerValue(st)})
		}
	}
	return stats, true
}

// routerValue is how stats shows a router's counter: a route file's
// mcp.add_stat counters (user_*) as memcached's unsigned ones, which an
// mcp.stat below zero wraps around.
func routerValue(st route.Stat) string {
	if strings.HasPrefix(st.Name, "user_") {
		return strconv.FormatUint(uint64(st.Value), 10)
	}
	return strconv.FormatInt(st.Value, 10)
}
