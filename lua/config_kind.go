package lua

import "shardproxy/config"

// configRules are the Lua kind's rules over a pool's keys (config.KindRules),
// registered from init with the kind: a pool routed by a Lua script in
// memcached's proxy API (a lua key), whose route file defines its
// backends and how requests reach them.
var configRules = config.KindRules{
	Kind:      config.KindLua,
	Claims:    func(p *config.Pool) bool { return p.Lua != "" || p.IsSet("lua") },
	Order:     config.OrderLua,
	Validate:  validateConfig,
	Provision: provisionConfig,
}

// validateConfig refuses what the route file decides or cannot do yet
// (servers_from it allows: the route file reads the answer with
// mcp.servers()):
// meta requests, TLS to the backends, the redis_cluster keys. A Lua pool
// ignores hash, hash_tag and distribution, as it always has, but refuses a
// hash_seed without effect as a native pool does.
func validateConfig(c *config.PoolCheck) {
	p := c.Pool()
	c.CheckHashSeed()
	c.RefuseMetaOnRedis()
	c.RefuseClusterKeys()
	c.RefuseReplicaKeys()
	c.RefuseSentinelKeys()
	c.RefuseNearKeys("is only valid for a native memcache pool (servers, no lua); " +
		"a route file answers from the proxy's cache with mcp.internal")
	if c.Has("server_tls") && p.ServerTLS && p.Lua != "" {
		c.Fail("server_tls", "a Lua pool's backends come from its route file, which cannot use TLS yet")
	}
}

// provisionConfig fills server_protocol, lua_timeout, lua_max_alloc and
// lua_internal_cache; the route file holds a Lua pool's other defaults.
func provisionConfig(p *config.Pool) {
	if !p.IsSet("server_protocol") {
		p.ServerProtocol = config.ServerProtocolText // what the route sends, as memcached's proxy does
	}
	if !p.IsSet("lua_timeout") {
		p.LuaTimeout = config.DefaultLuaTimeout
	}
	if !p.IsSet("lua_max_alloc") {
		p.LuaMaxAlloc = config.DefaultLuaMaxAlloc
	}
	if !p.IsSet("lua_internal_cache") {
		p.LuaInternalCache = config.DefaultLuaInternalCache
	}
}
