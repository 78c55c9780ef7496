package proxy

import (
	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/lua"
	"shardproxy/route"
)

// luaRouter routes a Lua pool through its route file (lua.Router).
type luaRouter struct{ r *lua.Router }

var (
	_ route.Router    = luaRouter{}
	_ route.Watchable = luaRouter{}
)

// Route implements route.Router.
func (l luaRouter) Route(x *route.Exchange) { l.r.RouteBatch(&x.Req, x.Hint, x, x.Batch) }

// Stats implements route.Router: lua_requests, lua_failures, lua_timeouts,
// lua_memory_stops, lua_active and the script's mcp.add_stat counters
// (user_*).
func (l luaRouter) Stats() []route.Stat { return l.r.Counters() }

// Backends implements route.Router.
func (l luaRouter) Backends() []*backend.Backend { return l.r.Backends() }

// Close implements route.Router.
func (l luaRouter) Close() { l.r.Close() }

// Watch implements route.Watchable: memcached's watch proxyreqs,
// proxyevents and proxyuser.
func (l luaRouter) Watch(streams int) (*route.Watcher, error) { return l.r.Watch(streams) }

// newLuaRouter builds the router of a Lua pool from its route file.
//
// The pool's YAML sets the defaults of the backends the script makes,
// where the file sets them at all: timeout (the read timeout),
// connect_timeout (which, absent, follows timeout), server_retry_timeout,
// server_failure_limit, server_connections and tcpkeepalive. A memcache
// pool dials and validates ("version") every backend its file declares at
// start, as memcached's proxy does, and keeps dialling one that fails;
// preconnect: false leaves them to their first request (a Redis pool's
// default). Everything else starts from memcached's
// proxy defaults, and the script's mcp.backend_* calls and backend options
// override both. lua_timeout and lua_max_alloc are the router's MaxRun and
// MaxAlloc. The script's backends come from the pool's lease, so a
// reload keeps the ones the new file declares alike.
//
// A memcache Lua pool speaks as memcached's proxy does, where its route
// files come from: the pool's clients, and the route file's mcp.request,
// are parsed with its words for protocol errors (codec.Options.ProxyErrors)
// and its forms of quiet and noreply requests on the wire
// (codec.Options.ProxyWire).
func newLuaRouter(k *kindEnv) (route.Router, error) {
	pc := k.p.cfg
	k.p.limits.ProxyErrors, k.p.limits.ProxyWire = !pc.Redis, !pc.Redis
	d := lua.Defaults{
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
	var hub *route.Hub // the running router's: its watchers stay
	if old, ok := k.old.(luaRouter); ok {
		hub = old.r.Hub()
	}
	r, err := lua.New(lua.Config{
		Hub:       hub,
		Path:      k.p.src.Path(pc.Lua), // relative to the config file's directory
		Dialect:   k.p.dialect,
		Redis:     pc.Redis,
		Options:   k.p.limits,
		Handshake: codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser, DB: pc.RedisDB},
		Defaults:  d,
		StartArg:  pc.LuaArg,
		// the file it names, for dofile(mcp.start_arg), as the lua path
		StartArgFile: k.p.src.Path(pc.LuaArg),
		MaxRun:       pc.LuaTimeout,
		MaxAlloc:     int64(pc.LuaMaxAlloc) << 20,
		Preconnect:   (pc.Preconnect || !pc.Redis && !pc.IsSet("preconnect")) && !k.b.check,
		Logger:       k.p.log,
		Backends:     k.lease,
	})
	if err != nil {
		return nil, err
	}
	return luaRouter{r}, nil
}
