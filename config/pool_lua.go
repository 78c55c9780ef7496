package config

import "time"

// luaKeys are the keys of a Lua pool: its route file, which defines the
// backends (so a Lua pool has no servers; validateBackends), and the
// argument the file reads as mcp.start_arg.
var luaKeys = map[string]poolKey{
	"lua": stringKey(func(p *Pool) *string { return &p.Lua },
		nonEmpty("must be the path of a Lua route file"), ""),
	// lua_arg is the route file's mcp.start_arg: any non-empty string,
	// read as its text (lua_arg: 5 is "5").
	"lua_arg": stringKey(func(p *Pool) *string { return &p.LuaArg },
		nonEmpty("must be a non-empty string (leave the key out for mcp.start_arg false)"), ""),
	// lua_timeout bounds each run of route code, in milliseconds.
	"lua_timeout": msKey(func(p *Pool) *time.Duration { return &p.LuaTimeout }, 1, DefaultLuaTimeout, 0),
	// lua_max_alloc bounds what each run of route code allocates, in MiB.
	"lua_max_alloc": intKey(func(p *Pool) *int { return &p.LuaMaxAlloc }, 1, 1<<20, DefaultLuaMaxAlloc, 0),
	// lua_internal_cache is the memory of the proxy's own cache
	// (mcp.internal), in MiB.
	"lua_internal_cache": intKey(func(p *Pool) *int { return &p.LuaInternalCache }, 1, 1<<20, DefaultLuaInternalCache, 0),
}

// luaOnly are the keys only a Lua pool may set.
var luaOnly = []string{"lua_arg", "lua_timeout", "lua_max_alloc", "lua_internal_cache"}

// luaKind is a pool routed by a Lua script in memcached's proxy API (a lua
// key), whose route file defines its backends and how requests reach them.
type luaKind struct{}

var _ kind = luaKind{}

// validate refuses what the route file decides or cannot do yet: meta
// requests, TLS to the backends, the redis_cluster keys. A Lua pool ignores
// hash, hash_tag and distribution, as it always has, but refuses a
// hash_seed without effect as a native pool does.
func (luaKind) validate(pp *poolParser) {
	p := pp.p
	pp.validateHashSeed()
	pp.refuseMetaOnRedis()
	pp.refuseClusterKeys()
	pp.refuseReplicaKeys()
	pp.refuseSentinelKeys()
	pp.refuseNearKeys("is only valid for a native memcache pool (servers, no lua); " +
		"a route file answers from the proxy's cache with mcp.internal")
	if line, ok := pp.keys["server_tls"]; ok && p.ServerTLS && p.Lua != "" {
		pp.fail(line, "server_tls", "a Lua pool's backends come from its route file, which cannot use TLS yet")
	}
}

// provision fills lua_timeout, lua_max_alloc and lua_internal_cache; the
// route file holds a
// Lua pool's other defaults.
func (luaKind) provision(p *Pool) {
	if !p.IsSet("server_protocol") {
		p.ServerProtocol = ServerProtocolText // what the route sends, as memcached's proxy does
	}
	if !p.IsSet("lua_timeout") {
		p.LuaTimeout = DefaultLuaTimeout
	}
	if !p.IsSet("lua_max_alloc") {
		p.LuaMaxAlloc = DefaultLuaMaxAlloc
	}
	if !p.IsSet("lua_internal_cache") {
		p.LuaInternalCache = DefaultLuaInternalCache
	}
}

// refuseLuaKeys refuses the keys of luaOnly on a pool that has no route
// file to read them.
func (pp *poolParser) refuseLuaKeys() {
	pp.refuseKeys(luaOnly, "", "is only valid for a Lua pool (lua: FILE)")
}
