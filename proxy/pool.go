package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/observe"
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
	lease    *backend.Lease         // the backends the router holds
	routing  atomic.Int64           // sessions routing a request with this pool right now
	inflight atomic.Int64           // requests routed with this pool, not yet written
	paused   atomic.Int64           // a CLIENT PAUSE's end, Unix ns; 0: none (pause.go)
	order    *kind.DedicatedPool    // the router's dedicated connections (kind.Dedicator), whose blocking commands a request waits for (kind.DedicatedPool.WaitBefore) and whose scripts PING reaches; nil: none
	bound    atomic.Pointer[string] // the listener's address, once it serves
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

	// obs are the pool's slowlog and its commands' latency (observe.go).
	obs observe.Pool

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
	if !b.check {
		if old == nil || old.cfg.SlowlogThreshold != pc.SlowlogThreshold || old.cfg.SlowlogMaxLen != pc.SlowlogMaxLen {
			// A reload that leaves the pool's slowlog keys as they were
			// keeps what CONFIG SET set since (resp: slowlog-*).
			p.stats.obs.Slowlog.Configure(pc.SlowlogThreshold, pc.SlowlogMaxLen)
		}
		p.stats.obs.ConfigureHot(pc.HotKeys)
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
	if dd, ok := p.router.(kind.Dedicator); ok {
		p.order = dd.Dedicated()
	}
	return p, nil
}

// env is what the build of p's router is given (kind.Env): p's
// configuration, dialect and limits, and the builder's and server's hooks.
func (b *builder) env(p *pool, dialTLS *tls.Config) *kind.Env {
	return &kind.Env{
		Pool:           p.cfg,
		Source:         p.src,
		Dialect:        p.dialect,
		Limits:         &p.limits,
		Log:            p.log,
		Lease:          p.lease,
		DialTLS:        dialTLS,
		Check:          b.check,
		Counters:       &p.stats.router,
		Fragments:      &p.stats.Fragments,
		ForwardErrors:  &p.stats.ForwardError,
		OnStateChange:  b.s.backendStateChanged,
		OnMeta:         b.s.backendMetaChanged,
		Hot:            p.stats.obs.IsHot,
		Watch:          func(f func(*backend.Backend, bool)) { b.watchers = append(b.watchers, f) },
		Link:           func(f func(map[string]route.Router)) { b.links = append(b.links, f) },
		ScheduleReload: b.s.scheduleReload,
		Sections:       p,
		FleetRing:      b.s.fleetRing,
		Ring:           b.s.rings[p.cfg.Name],
	}
}
