package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/route"

	// Dialects register themselves with codec.
	_ "shardproxy/memcache"
	_ "shardproxy/resp"
)

// pool is one configured pool at run time: a listener's settings and
// counters, and the router that answers its requests. What kind of pool it
// is (a kind.Kind) matters only when the router is built.
type pool struct {
	cfg      *config.Pool
	src      *config.Config // the configuration the pool comes from
	srv      *Server
	kind     kind.Kind
	dialect  codec.Dialect
	lookups  codec.LookupCounter // the dialect's, when its servers count hits
	tls      *tls.Config         // what the listener serves; nil: plain
	limits   codec.Options
	router   route.Router
	lease    *backend.Lease // the backends the router holds
	routing  atomic.Int64   // sessions routing a request with this pool right now
	inflight atomic.Int64   // requests routed with this pool, not yet written
	log      *slog.Logger

	stats *poolStats // kept across reloads for a pool of the same name
}

// poolStats are a pool's counters, named after twemproxy's pool stats.
type poolStats struct {
	name              string       // the pool's
	ClientConnections atomic.Int64 // gauge
	ClientEOF         atomic.Int64
	ClientErr         atomic.Int64
	ForwardError      atomic.Int64
	Fragments         atomic.Int64
	Requests          atomic.Int64
	ProtocolErrors    atomic.Int64
	cmds              sync.Map // command name -> *atomic.Int64 (memcached's cmd_*)
	// Lookups as memcached counts them (codec.LookupCounter): keys looked
	// up, those found, storage requests; counted as replies are written.
	GetCmds atomic.Int64
	GetHits atomic.Int64
	SetCmds atomic.Int64
	// In flight, counted only when the pool has an active_req_limit or a
	// buffer_memory_limit.
	Active    atomic.Int64 // requests sent to servers, not yet answered
	Buffered  atomic.Int64 // bytes of their requests and replies
	LimitHits atomic.Int64 // requests refused by a limit

	// router keeps the router's counters whole across reloads.
	router kind.Counters

	// base holds the counters "stats reset" reset, as they were then:
	// the memcache stats command shows them less these (see shown).
	base atomic.Pointer[map[string]int64]
}

// command returns the counter of requests of command name.
func (ps *poolStats) command(name string) *atomic.Int64 {
	c, ok := ps.cmds.Load(name)
	if !ok {
		c, _ = ps.cmds.LoadOrStore(name, new(atomic.Int64))
	}
	return c.(*atomic.Int64)
}

// dialectName maps a pool's protocol to the codec registry name.
func dialectName(pc *config.Pool) string {
	if pc.Redis {
		return "redis"
	}
	return "memcache"
}

// newPool builds the run-time pool for pc: its listener settings, then its
// router, by the pool's kind. Its backends come from lease, which hands out
// the running generation's backend for the same server and options, so a
// reload keeps sockets and health.
func newPool(b *builder, cfg *config.Config, pc *config.Pool, lease *backend.Lease, old *pool) (*pool, error) {
	srv := b.s
	d, ok := codec.Lookup(dialectName(pc))
	if !ok {
		return nil, fmt.Errorf("proxy: pool %q: protocol %q is not supported by this build", pc.Name, dialectName(pc))
	}
	kd, ok := kind.Lookup(pc.Kind())
	if !ok {
		return nil, fmt.Errorf("proxy: pool %q: kind %q is not supported by this build", pc.Name, pc.Kind())
	}
	p := &pool{
		cfg:     pc,
		src:     cfg,
		srv:     srv,
		kind:    kd,
		dialect: d,
		lease:   lease,
		log:     srv.log.With("pool", pc.Name),
		stats:   &poolStats{name: pc.Name},
		limits: codec.Options{
			MaxLine:  pc.MaxRequestLine,
			MaxValue: pc.ItemSizeMax,
			Password: pc.RedisAuth,
			Username: pc.RedisAuthUser,
			DB:       pc.RedisDB,
			MetaGets: pc.ServerProtocol == config.ServerProtocolMeta,
		},
	}
	p.lookups, _ = d.(codec.LookupCounter)
	if old != nil {
		p.stats = old.stats // counters are cumulative across reloads
	} else if ps := srv.removedStats(pc.Name); ps != nil && !b.check {
		p.stats = ps // a pool a reload removed comes back: it counts on
	}
	var err error
	if p.tls, err = listenTLS(cfg, pc); err != nil {
		return nil, fmt.Errorf("proxy: pool %q: %w", pc.Name, err)
	}
	dialTLS, err := serverTLS(cfg, pc)
	if err != nil {
		return nil, fmt.Errorf("proxy: pool %q: %w", pc.Name, err)
	}
	if !pc.AllowFlushAll {
		p.limits.Deny = []string{"flush_all"} // FLUSHDB and FLUSHALL on a Redis pool
	}
	if pc.Redis && !pc.AllowRedisFlushAll {
		p.limits.Deny = append(p.limits.Deny, "flushall")
	}
	env := b.env(p, dialTLS)
	if old != nil && old.kind == p.kind {
		env.Old = old.router
	}
	if p.router, err = p.kind.Build(env); err != nil {
		return nil, fmt.Errorf("proxy: pool %q: %w", pc.Name, err)
	}
	return p, nil
}

// env is what the build of p's router is given (kind.Env): p's
// configuration, dialect and limits, and the builder's and server's hooks.
func (b *builder) env(p *pool, dialTLS *tls.Config) *kind.Env {
	return &kind.Env{
		Pool:          p.cfg,
		Source:        p.src,
		Dialect:       p.dialect,
		Limits:        &p.limits,
		Log:           p.log,
		Lease:         p.lease,
		DialTLS:       dialTLS,
		Check:         b.check,
		Counters:      &p.stats.router,
		Fragments:     &p.stats.Fragments,
		ForwardErrors: &p.stats.ForwardError,
		OnStateChange: b.s.backendStateChanged,
		OnMeta:        b.s.backendMetaChanged,
		Watch:         func(f func(*backend.Backend, bool)) { b.watchers = append(b.watchers, f) },
		Link:          func(f func(map[string]route.Router)) { b.links = append(b.links, f) },
	}
}

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
		stats = append(stats, codec.Stat{Name: st.Name, Value: itoa(st.Value)})
	}
	return stats
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

// shown returns what stats shows of the resettable counter name, whose
// value is now v: its count since the last reset.
func (ps *poolStats) shown(name string, v int64) int64 {
	if b := ps.base.Load(); b != nil {
		return max(0, v-(*b)[name])
	}
	return v
}

// Section implements codec.SectionEnv: "proxy" gives memcached proxy's
// counter names (stats proxy, INFO proxy), its cmd_ counters since the
// last "stats reset"; "settings" the pool's settings (stats settings).
func (p *pool) Section(name string) ([]codec.Stat, bool) {
	switch name {
	case "settings":
		return p.settings(), true
	case "proxy":
	default:
		return nil, false
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
			stats = append(stats, codec.Stat{Name: st.Name, Value: itoa(st.Value)})
		}
	}
	return stats, true
}
