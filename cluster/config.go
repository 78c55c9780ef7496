package cluster

import (
	"fmt"

	"shardproxy/config"
)

// configRules are the redis_cluster kind's rules over a pool's keys
// (config.KindRules), registered from init with the kind: a Redis pool in
// front of a Redis Cluster (redis_cluster: true), whose servers are seeds
// and whose slot map places keys.
var configRules = config.KindRules{
	Kind:      config.KindCluster,
	Claims:    func(p *config.Pool) bool { return p.RedisCluster },
	Order:     config.OrderCluster,
	Validate:  validateConfig,
	Provision: provisionConfig,
}

// refusedKeys are the keys a redis_cluster pool refuses: the cluster's
// slot map, not the proxy, decides where keys go.
var refusedKeys = []string{"hash", "hash_tag", "distribution", "hash_seed"}

// validateConfig checks the keys a cluster pool needs, refuses those of a native
// or Lua pool, and checks that the seeds are host:port.
func validateConfig(c *config.PoolCheck) {
	p := c.Pool()
	if !p.Redis && !c.Bad("redis") {
		c.Fail("redis_cluster", "needs redis: true")
	}
	refusePlacement(c)
	if c.Has("redis_db") && p.RedisDB != 0 {
		c.Fail("redis_db", "a Redis Cluster has database 0 only")
	}
	if c.Has("lua") {
		c.Fail("lua", "a redis_cluster pool cannot be routed by Lua")
	}
	c.RefuseLuaKeys()
	c.RefuseSentinelKeys()
	c.RefuseServersFrom("is only valid for a sharded pool; a redis_cluster pool learns its nodes from the slot map")
	if c.Has("replicas") {
		c.Fail("replicas", "does not apply to a redis_cluster pool: the slot map names each master's replicas")
	}
	for _, s := range p.Servers {
		if s.Network != "tcp" {
			c.FailAt(s.Line, "servers", fmt.Sprintf("%q: a cluster seed must be host:port", s.Name))
		}
	}
	c.RefuseMetaOnRedis()
	c.RefuseNearKeys("is only valid for a native memcache pool")
}

// refusePlacement refuses the keys by which the proxy would place keys or
// move them off a failing server: the cluster does both.
func refusePlacement(c *config.PoolCheck) {
	for _, key := range refusedKeys {
		if c.Has(key) {
			c.Fail(key, "does not apply to a redis_cluster pool: a key goes to the node serving its slot "+
				"(CRC16 of the key or of its {hash tag}), as the cluster's slot map says")
		}
	}
	if c.Has("auto_eject_hosts") && c.Pool().AutoEjectHosts {
		c.Fail("auto_eject_hosts", "does not apply to a redis_cluster pool: the cluster fails over by itself")
	}
}

// provisionConfig fills read_from and cluster_refresh, which only a cluster pool
// has.
func provisionConfig(p *config.Pool) {
	if !p.IsSet("read_from") {
		p.ReadFrom = config.DefaultReadFrom
	}
	if !p.IsSet("cluster_refresh") {
		p.ClusterRefresh = config.DefaultClusterRefresh
	}
}
