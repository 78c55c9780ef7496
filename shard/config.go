package shard

import (
	"fmt"

	"shardproxy/config"
)

// configRules are the sharded kind's rules over a pool's keys (config.KindRules),
// registered from init with the kind: the kind of every pool no other
// kind claims, twemproxy's only kind.
var configRules = config.KindRules{
	Kind:      config.KindSharded,
	Validate:  validateConfig,
	Provision: provisionNearCache, // newPool holds a native pool's other defaults
}

// validateConfig checks that hash_seed seeds something, that server_protocol:
// meta and delete_spool are on a memcache pool, refuses the redis_cluster
// and Lua keys, and checks the near cache, Sentinel and replica keys.
func validateConfig(c *config.PoolCheck) {
	c.CheckHashSeed()
	c.RefuseMetaOnRedis()
	validateNearCache(c)
	if c.Has("delete_spool") && c.Pool().Redis && !c.Bad("redis") {
		c.Fail("delete_spool", "is only valid for a memcache pool: a Redis pool's deletes are not spooled")
	}
	c.RefuseClusterKeys()
	c.RefuseLuaKeys()
	validateSentinel(c)
	validateReplicas(c)
}

// validateNearCache checks a native pool's near cache keys: a memcache
// pool only, and near_cache_ttl and near_cache_fill only with a near
// cache to apply to.
func validateNearCache(c *config.PoolCheck) {
	p := c.Pool()
	if c.Has("near_cache") && p.NearCache > 0 && p.Redis && !c.Bad("redis") {
		c.Fail("near_cache", "is only valid for a memcache pool")
		return
	}
	if p.NearCache == 0 && !c.Bad("near_cache") {
		c.Refuse([]string{"near_cache_ttl", "near_cache_fill"}, "",
			"needs near_cache (the cache's size in MiB)")
	}
}

// provisionNearCache fills near_cache_ttl and near_cache_fill for a pool
// with a near cache; a pool without one keeps them zero.
func provisionNearCache(p *config.Pool) {
	if p.NearCache == 0 {
		return
	}
	if !p.IsSet("near_cache_ttl") {
		p.NearCacheTTL = config.DefaultNearCacheTTL
	}
	if !p.IsSet("near_cache_fill") {
		p.NearCacheFill = config.DefaultNearCacheFill
	}
}

// validateSentinel checks a native pool's sentinel keys: sentinels needs a
// redis pool, and no key may move a shard's keys (Sentinel fails the shard
// over instead); the auth keys need sentinels.
func validateSentinel(c *config.PoolCheck) {
	p := c.Pool()
	if !c.Has("sentinels") {
		c.Refuse([]string{"sentinel_auth", "sentinel_auth_user"}, "", "needs sentinels")
		return
	}
	if !p.Redis && !c.Bad("redis") {
		c.Fail("sentinels", "is only valid for a redis pool (redis: true)")
	}
	if c.Has("servers_from") {
		c.Fail("servers_from", "does not apply to a pool with sentinels: its servers lines name Sentinel masters")
	}
	if c.Has("auto_eject_hosts") && p.AutoEjectHosts {
		c.Fail("auto_eject_hosts", "does not apply to a pool with sentinels: a shard's keys never move, "+
			"Sentinel promotes a replica and the proxy follows")
	}
	if c.Has("sentinel_auth_user") && p.SentinelAuth == "" && !c.Bad("sentinel_auth") && !c.Bad("sentinel_auth_user") {
		c.Fail("sentinel_auth_user", "needs sentinel_auth, the user's password")
	}
}

// validateReplicas checks a sharded pool's replica keys: they need a
// redis pool; read_from other than master needs replicas to read from
// (listed, or learnt from the sentinels); every replica names one shard,
// once, and is not one of the servers.
func validateReplicas(c *config.PoolCheck) {
	p := c.Pool()
	if !p.Redis {
		if !c.Bad("redis") {
			c.Refuse([]string{"read_from", "replicas"}, "", "is only valid for a redis pool (redis: true)")
		}
		return
	}
	if c.Has("read_from") && !c.Bad("read_from") && p.ReadFrom != config.ReadFromMaster &&
		!c.Has("replicas") && !c.Has("sentinels") {
		c.Fail("read_from", "needs replicas (or sentinels, which name them) to read from")
	}
	if c.Bad("servers") {
		return
	}
	seen := map[string]int{}
	for i, r := range p.Replicas {
		shard, ok := shardNamed(p, r.Shard)
		switch {
		case !ok:
			c.FailAt(r.Line, "replicas", fmt.Sprintf("replica %s names no shard %q; want a servers line's name or address", r.Addr, r.Shard))
		case seen[r.Addr] != 0:
			c.FailAt(r.Line, "replicas", fmt.Sprintf("duplicate replica %s (first at line %d)", r.Addr, seen[r.Addr]))
		case isServer(p, r.Addr):
			c.FailAt(r.Line, "replicas", fmt.Sprintf("replica %s is one of the pool's servers", r.Addr))
		default:
			seen[r.Addr] = r.Line
			p.Replicas[i].Shard = shard
		}
	}
}

// shardNamed returns the name of p's server that ref names: its name, or
// else its address ("host:port", or "host:port:weight" as its line has it).
func shardNamed(p *config.Pool, ref string) (string, bool) {
	for _, s := range p.Servers {
		if s.Name == ref {
			return s.Name, true
		}
	}
	for _, s := range p.Servers {
		if s.Master == "" && (ref == s.Addr || ref == s.Addr+fmt.Sprintf(":%d", s.Weight)) {
			return s.Name, true
		}
	}
	return "", false
}

// isServer reports whether addr is one of p's servers lines' address or
// name.
func isServer(p *config.Pool, addr string) bool {
	for _, s := range p.Servers {
		if s.Addr == addr || s.Name == addr {
			return true
		}
	}
	return false
}
