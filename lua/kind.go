package lua

import (
	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/memcache"
	"shardproxy/route"
	"shardproxy/store"
)

// init registers the Lua kind with kind and its rules with config.
func init() {
	kind.Register(config.KindLua, poolKind{})
	config.RegisterKind(configRules)
}

// poolKind is the kind of the pools a route file routes (lua: file).
type poolKind struct{}

var _ kind.Kind = poolKind{}

// Build implements kind.Kind (newPoolRouter).
func (poolKind) Build(k *kind.Env) (route.Router, error) { return newPoolRouter(k) }

// Describe implements kind.Kind: the route file.
func (poolKind) Describe(pc *config.Pool, _ route.Router) []any { return []any{"lua", pc.Lua} }

// Settings implements kind.Kind: the route file.
func (poolKind) Settings(pc *config.Pool, _ route.Router) []codec.Stat {
	return []codec.Stat{{Name: "lua", Value: pc.Lua}}
}

// poolRouter routes a Lua pool through its route file (a Router): the
// pool's router, as the proxy sees it.
type poolRouter struct {
	r     *Router
	cache *internalCache // a memcache pool's own cache; nil for Redis
	rc    *kind.Counters // the pool's, which counts r until it closes
}

var (
	_ route.Router        = poolRouter{}
	_ route.Watchable     = poolRouter{}
	_ codec.SectionEnv    = poolRouter{}
	_ route.ReloadWatcher = poolRouter{}
	_ route.BufferLimiter = poolRouter{}
	_ kind.CounterSource  = (*Router)(nil)
)

// Route implements route.Router.
func (l poolRouter) Route(x *route.Exchange) {
	if x.Over && hasValue(x.Req.Wire) {
		l.r.requests.Add(1)
		l.r.reject(&x.Req, x, "out of memory")
		return
	}
	l.r.RouteTagged(&x.Req, x.Hint, x.Tag, x, x.Batch)
}

// OverBuffer implements route.BufferLimiter: whether the requests in
// flight are over mcp.buffer_memory_limit now.
func (l poolRouter) OverBuffer() bool { return l.r.overBuffer != nil && l.r.overBuffer() }

// Stats implements route.Router: lua_requests, lua_failures, lua_timeouts,
// lua_memory_stops, lua_active, the script's mcp.add_stat counters
// (user_*) and the internal cache's (internal_*).
func (l poolRouter) Stats() []route.Stat {
	st := l.r.Counters()
	if l.cache != nil {
		st = append(st, l.cache.Counters()...)
	}
	return st
}

// Section implements codec.SectionEnv: memcached's "stats proxyfuncs" and
// its proxy_req_active (Router.Section).
func (l poolRouter) Section(name string) ([]codec.Stat, bool) { return l.r.Section(name) }

// Reloaded implements route.ReloadWatcher.
func (l poolRouter) Reloaded() { l.r.Reloaded() }

// ReloadFailed implements route.ReloadWatcher.
func (l poolRouter) ReloadFailed(err error) { l.r.ReloadFailed(err) }

// Backends implements route.Router.
func (l poolRouter) Backends() []*backend.Backend { return l.r.Backends() }

// Close implements route.Router.
func (l poolRouter) Close() {
	l.r.Close()
	l.rc.Retire(l.r)
	l.cache.release()
}

// internalCache is a Lua memcache pool's own cache (Config.Internal),
// shared by the routers of the pool's successive generations while its
// size stays the same: a reload keeps what it holds, as memcached keeps
// its storage across a reload of its proxy's routes. The last router to
// close closes it.
type internalCache struct {
	s   *store.Store
	mib int // lua_internal_cache
	kind.Holds
}

// cacheFor returns the cache of a pool of lua_internal_cache mib: old's,
// if it has one of that size, else a new one, counted by rc.
// Its deletions are published to hub, the pool's (which a reload keeps).
func cacheFor(old route.Router, mib, itemSizeMax int, rc *kind.Counters, hub *route.Hub) *internalCache {
	if o, ok := old.(poolRouter); ok && o.cache != nil && o.cache.mib == mib {
		o.cache.Hold()
		return o.cache
	}
	c := &internalCache{mib: mib}
	c.s = store.New(store.Config{MaxBytes: int64(mib) << 20, ItemSizeMax: itemSizeMax,
		OnDelete: func(key, cmd string, size int) { watchDeletion(hub, key, cmd, size) }})
	c.Start(rc, c)
	return c
}

// release drops a router's hold on c.
func (c *internalCache) release() {
	if c != nil {
		c.Drop(c, c.s.Close)
	}
}

// Counters implements kind.CounterSource: the store's figures, internal_*.
func (c *internalCache) Counters() []route.Stat {
	return appendCacheStats(nil, "internal_", c.s.Stats())
}

// appendCacheStats appends a store's figures, their names prefixed.
func appendCacheStats(st []route.Stat, prefix string, s store.Stats) []route.Stat {
	return append(st,
		route.Stat{Name: prefix + "items", Help: "items in the cache", Kind: route.Gauge, Value: s.Items},
		route.Stat{Name: prefix + "bytes", Help: "bytes the cache's limit counts (keys, values, per-item overhead)", Kind: route.Gauge, Value: s.Bytes},
		route.Stat{Name: prefix + "limit_bytes", Help: "the cache's memory limit", Kind: route.Gauge, Value: s.Limit},
		route.Stat{Name: prefix + "hits", Help: "cache lookups that found a live item", Value: int64(s.Hits)},
		route.Stat{Name: prefix + "misses", Help: "cache lookups that found none", Value: int64(s.Misses)},
		route.Stat{Name: prefix + "evictions", Help: "live items removed to make room", Value: int64(s.Evictions)},
		route.Stat{Name: prefix + "expirations", Help: "expired items removed", Value: int64(s.Expirations)},
		route.Stat{Name: prefix + "too_large", Help: "writes refused for exceeding item_size_max", Value: int64(s.TooLarge)})
}

// Watch implements route.Watchable: memcached's watch proxyreqs,
// proxyevents and proxyuser.
func (l poolRouter) Watch(streams int) (*route.Watcher, error) { return l.r.Watch(streams) }

// newPoolRouter builds the router of a Lua pool from its route file.
//
// The pool's YAML sets the defaults of the backends the script makes,
// where the file sets them at all: timeout (the read timeout),
// connect_timeout (which, absent, follows timeout), server_retry_timeout,
// server_failure_limit, server_connections and tcpkeepalive. A memcache
// pool dials and validates ("version") every backend its file declares at
// start, as memcached's proxy does, and keeps them connected by its
// failure rule (backend.Config.Reconnect) unless the pool sets
// health_check_interval; preconnect: false leaves them to their first
// request (a Redis pool's default) and the native pools' rule.
// Everything else starts from memcached's proxy defaults, and the script's mcp.backend_* calls and backend options
// override both. lua_timeout and lua_max_alloc are the router's MaxRun and
// MaxAlloc. The script's backends come from the pool's lease, so a
// reload keeps the ones the new file declares alike.
//
// A memcache Lua pool speaks as memcached's proxy does, where its route
// files come from: the pool's clients, and the route file's mcp.request,
// are parsed with its words for protocol errors (codec.Options.ProxyErrors;
// a V1 file's clients get memcached 1.6.22's where they differ:
// codec.Options.ProxyV1) and its forms of quiet and noreply requests on
// the wire (codec.Options.ProxyWire). Its clients' gets are parsed as
// they come whatever server_protocol says; meta and auto send as mg only the
// one-key gets the route forwards untouched
// (Config.MetaRewrite): meta to every backend, which must answer "mn"
// when validated, auto to the backends whose socket's server answered it.
func newPoolRouter(k *kind.Env) (route.Router, error) {
	pc := k.Pool
	k.Limits.ProxyErrors, k.Limits.ProxyWire = !pc.Redis, !pc.Redis
	k.Limits.MetaGets = false
	k.Limits.RESP2Only = pc.Redis // routes build requests and read replies in RESP2
	hs, metaRewrite := poolHandshake(pc)
	// Connected at start, as memcached's proxy connects, the backends
	// keep connected by its rule, unless the pool sets health checks.
	preconnect := pc.Preconnect || !pc.Redis && !pc.IsSet("preconnect")
	var hub *route.Hub // the running router's: its watchers stay
	var prev *Router
	if old, ok := k.Old.(poolRouter); ok {
		hub, prev = old.r.Hub(), old.r
	}
	var cache *internalCache
	var internal *store.Store
	if !pc.Redis {
		if hub == nil {
			hub = &route.Hub{} // the router's, which the cache tells of deletions
		}
		cache = cacheFor(k.Old, pc.LuaInternalCache, pc.ItemSizeMax, k.Counters, hub)
		internal = cache.s
	}
	r, err := New(Config{
		Hub:         hub,
		Previous:    prev,
		Path:        k.Source.Path(pc.Lua), // relative to the config file's directory
		More:        paths(k, pc.LuaMore),
		Dirs:        paths(k, pc.LuaDirs),
		Dialect:     k.Dialect,
		Redis:       pc.Redis,
		Options:     *k.Limits,
		Handshake:   hs,
		MetaRewrite: metaRewrite,
		Defaults:    poolDefaults(pc),
		Sections:    k.Sections,
		StartArg:    pc.LuaArg,
		Servers:     luaServers(pc.Servers),
		// the file it names, for dofile(mcp.start_arg), as the lua path
		StartArgFile: k.Source.Path(pc.LuaArg),
		MaxRun:       pc.LuaTimeout,
		MaxAlloc:     int64(pc.LuaMaxAlloc) << 20,
		Preconnect:   preconnect && !k.Check,
		Reconnect:    preconnect && !pc.IsSet("health_check_interval"),
		Logger:       k.Log,
		Backends:     k.Lease,
		// The pool's health checks, as its backends' in every kind.
		HealthInterval: pc.HealthCheckInterval,
		HealthTimeout:  pc.HealthCheckTimeout,
		Internal:       internal,
		ScheduleReload: k.ScheduleReload,
	})
	if err != nil {
		cache.release()
		return nil, err
	}
	k.Limits.ProxyV1 = k.Limits.ProxyErrors && r.V1()
	rc := k.Counters
	rc.Add(r) // a *Router is a kind.CounterSource
	return poolRouter{r: r, cache: cache, rc: rc}, nil
}

// poolHandshake is how the pool's backends are validated, and which gets
// go to them as mg (server_protocol meta or auto; see newPoolRouter).
func poolHandshake(pc *config.Pool) (codec.HandshakeOptions, func(*codec.Request) bool) {
	hs := codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser, DB: pc.RedisDB}
	if pc.Redis || pc.ServerProtocol == config.ServerProtocolText {
		return hs, nil
	}
	hs.Meta = pc.ServerProtocol == config.ServerProtocolMeta
	hs.MetaProbe = !hs.Meta
	return hs, memcache.MetaGet
}

// poolDefaults are the backend settings the pool's YAML gives the route
// file's backends; what it leaves unset is memcached proxy's default.
func poolDefaults(pc *config.Pool) Defaults {
	d := Defaults{
		ReadTimeout:  pc.Timeout,
		TCPKeepalive: pc.TCPKeepalive,
	}
	if pc.IsSet("connect_timeout") || pc.IsSet("timeout") {
		d.ConnectTimeout = pc.ConnectTimeout
	}
	if pc.IsSet("server_retry_timeout") {
		d.RetryTimeout = pc.ServerRetryTimeout
	}
	if pc.IsSet("server_failure_limit") {
		d.FailureLimit = pc.ServerFailureLimit
	}
	if pc.IsSet("server_connections") {
		d.Conns = pc.ServerConnections
	}
	return d
}

// paths are names relative to the config file's directory.
func paths(k *kind.Env, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = k.Source.Path(n)
	}
	return out
}

// luaServers are a pool's servers (servers_from's answer) for
// mcp.servers().
func luaServers(servers []config.Server) []Server {
	var out []Server
	for _, s := range servers {
		out = append(out, Server{Name: s.Name, Host: s.Host, Port: s.Port})
	}
	return out
}
