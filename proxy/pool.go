package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/sharding"

	// Dialects register themselves with codec.
	_ "shardproxy/memcache"
	_ "shardproxy/resp"
)

// pool is one configured pool at run time.
type pool struct {
	cfg      *config.Pool
	src      *config.Config // the configuration the pool comes from
	srv      *Server
	dialect  codec.Dialect
	tls      *tls.Config // what the listener serves; nil: plain
	limits   codec.Options
	shard    *sharding.Pool
	backends []*backend.Backend // in shard.Servers() order
	failover *pool              // eject_policy failover: takes a bad server's keys
	router   router             // a Lua or redis_cluster pool's router; nil for a native pool
	shardCfg sharding.Config    // what shard was built from; a reload reuses an equal one
	routing  atomic.Int64       // sessions routing a request with this pool right now
	log      *slog.Logger

	stats *poolStats // kept across reloads for a pool of the same name
}

// poolStats are a pool's counters, named after twemproxy's pool stats.
type poolStats struct {
	ClientConnections atomic.Int64 // gauge
	ClientEOF         atomic.Int64
	ClientErr         atomic.Int64
	ForwardError      atomic.Int64
	Fragments         atomic.Int64
	Requests          atomic.Int64
	ProtocolErrors    atomic.Int64
	cmds              sync.Map // command name -> *atomic.Int64 (memcached's cmd_*)
	// In flight, counted only when the pool has an active_req_limit or a
	// buffer_memory_limit.
	Active    atomic.Int64 // requests sent to servers, not yet answered
	Buffered  atomic.Int64 // bytes of their requests and replies
	LimitHits atomic.Int64 // requests refused by a limit
}

// command returns the counter of requests of command name.
func (ps *poolStats) command(name string) *atomic.Int64 {
	c, ok := ps.cmds.Load(name)
	if !ok {
		c, _ = ps.cmds.LoadOrStore(name, new(atomic.Int64))
	}
	return c.(*atomic.Int64)
}

// router routes the requests of a pool that does not route natively: a Lua
// pool, or a redis_cluster pool (proxy/cluster.go). Route must call
// c.Complete exactly once, with the bytes the client sees, and must not
// block.
type router interface {
	Route(req *codec.Request, hint uint32, c Completion)
	Close()
}

// Completion receives the reply to a request routed by a router.
type Completion interface {
	// Complete hands over the client's reply; out may be reused after it
	// returns.
	Complete(out []byte)
}

// dialectName maps a pool's protocol to the codec registry name.
func dialectName(pc *config.Pool) string {
	if pc.Redis {
		return "redis"
	}
	return "memcache"
}

// newPool builds the run-time pool for pc. Its backends come from backends,
// which hands out the running generation's backend for the same server and
// options, so a reload keeps sockets and health state.
func newPool(srv *Server, cfg *config.Config, pc *config.Pool, backends backendSource, old *pool) (*pool, error) {
	d, ok := codec.Lookup(dialectName(pc))
	if !ok {
		return nil, fmt.Errorf("proxy: pool %q: protocol %q is not supported by this build", pc.Name, dialectName(pc))
	}
	p := &pool{
		cfg:     pc,
		src:     cfg,
		srv:     srv,
		dialect: d,
		log:     srv.log.With("pool", pc.Name),
		stats:   &poolStats{},
		limits: codec.Options{
			MaxLine:  pc.MaxRequestLine,
			MaxValue: pc.ItemSizeMax,
			Password: pc.RedisAuth,
			Username: pc.RedisAuthUser,
			DB:       pc.RedisDB,
			MetaGets: pc.ServerProtocol == config.ServerProtocolMeta,
		},
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
		p.limits.Deny = []string{"flush_all"}
	}
	if pc.Lua != "" {
		r, err := newLuaRouter(p)
		if err != nil {
			return nil, fmt.Errorf("proxy: pool %q: %w", pc.Name, err)
		}
		p.router = r
		return p, nil
	}
	if pc.RedisCluster {
		r, err := newClusterRouter(p, old, dialTLS)
		if err != nil {
			return nil, fmt.Errorf("proxy: pool %q: %w", pc.Name, err)
		}
		p.router = r
		return p, nil
	}
	servers := make([]sharding.Server, len(pc.Servers))
	byName := make(map[string]config.Server, len(pc.Servers))
	for i, s := range pc.Servers {
		servers[i] = sharding.Server{Name: s.Name, Weight: s.Weight}
		byName[s.Name] = s
	}
	p.shardCfg = sharding.Config{
		Servers:      servers,
		Hash:         pc.Hash,
		HashTag:      pc.HashTag,
		Distribution: pc.Distribution,
		AutoEject:    pc.AutoEjectHosts,
		Seed:         pc.HashSeed,
	}
	var shard *sharding.Pool
	if old != nil && old.shard != nil && reflect.DeepEqual(old.shardCfg, p.shardCfg) {
		shard = old.shard // building a ketama ring is the costly part of a reload
	} else {
		var err error
		if shard, err = sharding.New(p.shardCfg); err != nil {
			return nil, fmt.Errorf("proxy: pool %q: %w", pc.Name, err)
		}
	}
	p.shard = shard
	connectTimeout := pc.ConnectTimeout
	if connectTimeout <= 0 {
		connectTimeout = time.Second
	}
	for _, ss := range shard.Servers() {
		s := byName[ss.Name]
		b := backends.backend(pc.Name, backend.Config{
			Addr:    s.Addr,
			Name:    s.Name,
			Dialect: d,
			Handshake: codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser, DB: pc.RedisDB,
				Meta: p.limits.MetaGets},
			TLS:            dialTLS,
			Conns:          pc.ServerConnections,
			ConnectTimeout: connectTimeout,
			Timeout:        pc.Timeout,
			FailureLimit:   pc.ServerFailureLimit,
			RetryTimeout:   pc.ServerRetryTimeout,
			TCPKeepalive:   pc.TCPKeepalive,
			Preconnect:     pc.Preconnect,
			Logger:         p.log,
			OnStateChange:  srv.backendStateChanged,
		})
		p.backends = append(p.backends, b)
	}
	// Make the distribution's live set match the backends' health: a kept
	// backend may be ejected now, a new one is healthy.
	live := shard.Live()
	for i, b := range p.backends {
		switch bad := b.Bad() && p.ejects(); {
		case bad && live[i]:
			shard.Eject(i)
		case !bad && !live[i]:
			shard.Restore(i)
		}
	}
	return p, nil
}

// ejects reports whether the pool takes bad servers out of its distribution.
func (p *pool) ejects() bool {
	return p.cfg.AutoEjectHosts && p.cfg.EjectPolicy == config.EjectRemap
}

// stateChanged ejects or restores b if this pool uses it and ejects.
func (p *pool) stateChanged(b *backend.Backend, bad bool) {
	if !p.ejects() {
		return
	}
	for i, pb := range p.backends {
		if pb != b {
			continue
		}
		if bad {
			p.shard.Eject(i)
			p.log.Warn("server ejected", "server", b.Name())
		} else {
			p.shard.Restore(i)
			p.log.Info("server restored", "server", b.Name())
		}
	}
}

// pick returns the index (for backend) of the server that takes key. Under
// eject_policy failover, a bad server's keys go to the failover pool, whose
// servers are numbered after this pool's.
func (p *pool) pick(key []byte) (int, error) {
	idx, err := p.shard.Pick(key)
	if err != nil {
		return 0, err
	}
	if p.failover != nil && p.backends[idx].Bad() {
		j, err := p.failover.shard.Pick(key)
		if err != nil {
			return 0, err
		}
		return len(p.backends) + j, nil
	}
	return idx, nil
}

// backend returns server i as numbered by pick.
func (p *pool) backend(i int) *backend.Backend {
	if i < len(p.backends) {
		return p.backends[i]
	}
	return p.failover.backends[i-len(p.backends)]
}

// Version implements codec.Env.
func (p *pool) Version() string { return p.srv.version }

// Stats implements codec.Env: the counters a memcached "stats" shows.
func (p *pool) Stats() []codec.Stat {
	now := time.Now()
	s := p.srv
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	stats := []codec.Stat{
		{Name: "pid", Value: strconv.Itoa(os.Getpid())},
		{Name: "uptime", Value: itoa(int64(now.Sub(s.start).Seconds()))},
		{Name: "time", Value: itoa(now.Unix())},
		{Name: "version", Value: s.version},
		{Name: "curr_connections", Value: itoa(s.currConns.Load())},
		{Name: "total_connections", Value: itoa(s.totalConns.Load())},
		{Name: "pool", Value: p.cfg.Name},
		{Name: "client_connections", Value: itoa(p.stats.ClientConnections.Load())},
		{Name: "client_eof", Value: itoa(p.stats.ClientEOF.Load())},
		{Name: "client_err", Value: itoa(p.stats.ClientErr.Load())},
		{Name: "requests", Value: itoa(p.stats.Requests.Load())},
		{Name: "fragments", Value: itoa(p.stats.Fragments.Load())},
		{Name: "forward_error", Value: itoa(p.stats.ForwardError.Load())},
		{Name: "protocol_errors", Value: itoa(p.stats.ProtocolErrors.Load())},
	}
	var ejects int64
	for _, b := range p.backends {
		ejects += b.Stats().Ejects.Load()
	}
	stats = append(stats, codec.Stat{Name: "server_ejects", Value: itoa(ejects)})
	if r, ok := p.router.(interface{ Stats() []codec.Stat }); ok {
		stats = append(stats, r.Stats()...) // a Lua pool's counters and mcp.add_stat's
	}
	return stats
}

// Section implements codec.SectionEnv: "proxy" gives memcached proxy's
// counter names (stats proxy, INFO proxy).
func (p *pool) Section(name string) ([]codec.Stat, bool) {
	if name != "proxy" {
		return nil, false
	}
	s := p.srv
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	var total, bad, failed int64
	for _, b := range p.backends {
		total++
		if b.Bad() {
			bad++
		}
		failed += b.Stats().Failures.Load()
	}
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
		cmds = append(cmds, codec.Stat{Name: "cmd_" + k.(string), Value: itoa(v.(*atomic.Int64).Load())})
		return true
	})
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	return append(stats, cmds...), true
}
