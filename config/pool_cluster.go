package config

import (
	"fmt"
	"time"
)

// clusterKeys are the keys of a redis_cluster pool. The other kinds refuse
// cluster_refresh (refuseClusterKeys) and read redis_cluster: false as any
// pool does. A cluster pool's read_from is in replicaKeys, which a sharded
// redis pool shares.
var clusterKeys = map[string]poolKey{
	"redis_cluster":   boolKey(func(p *Pool) *bool { return &p.RedisCluster }, false),
	"cluster_refresh": msKey(func(p *Pool) *time.Duration { return &p.ClusterRefresh }, 100, DefaultClusterRefresh, 0).onlyIf(isCluster),
}

// clusterOnly are the keys only a redis_cluster pool may set.
var clusterOnly = []string{"cluster_refresh"}

// clusterRefused are the keys a redis_cluster pool refuses: the cluster's
// slot map, not the proxy, decides where keys go.
var clusterRefused = []string{"hash", "hash_tag", "distribution", "hash_seed"}

// clusterKind is a Redis pool in front of a Redis Cluster (redis_cluster:
// true): its servers are seeds, and the cluster's slot map places keys.
type clusterKind struct{}

var _ kind = clusterKind{}

// validate checks the keys a cluster pool needs, refuses those of a native
// or Lua pool, and checks that the seeds are host:port.
func (clusterKind) validate(pp *poolParser) {
	p := pp.p
	if !p.Redis && !pp.bad["redis"] {
		pp.fail(pp.keys["redis_cluster"], "redis_cluster", "needs redis: true")
	}
	pp.refuseClusterPlacement()
	if l, ok := pp.keys["redis_db"]; ok && p.RedisDB != 0 {
		pp.fail(l, "redis_db", "a Redis Cluster has database 0 only")
	}
	if l, ok := pp.keys["lua"]; ok {
		pp.fail(l, "lua", "a redis_cluster pool cannot be routed by Lua")
	}
	pp.refuseLuaKeys()
	pp.refuseSentinelKeys()
	if l, ok := pp.keys["replicas"]; ok {
		pp.fail(l, "replicas", "does not apply to a redis_cluster pool: the slot map names each master's replicas")
	}
	for _, s := range p.Servers {
		if s.Network != "tcp" {
			pp.fail(s.Line, "servers", fmt.Sprintf("%q: a cluster seed must be host:port", s.Name))
		}
	}
	pp.refuseMetaOnRedis()
	pp.refuseNearKeys("is only valid for a native memcache pool")
}

// refuseClusterPlacement refuses the keys by which the proxy would place
// keys or move them off a failing server: the cluster does both.
func (pp *poolParser) refuseClusterPlacement() {
	for _, key := range clusterRefused {
		if l, ok := pp.keys[key]; ok {
			pp.fail(l, key, "does not apply to a redis_cluster pool: a key goes to the node serving its slot "+
				"(CRC16 of the key or of its {hash tag}), as the cluster's slot map says")
		}
	}
	if l, ok := pp.keys["auto_eject_hosts"]; ok && pp.p.AutoEjectHosts {
		pp.fail(l, "auto_eject_hosts", "does not apply to a redis_cluster pool: the cluster fails over by itself")
	}
}

// provision fills read_from and cluster_refresh, which only a cluster pool
// has.
func (clusterKind) provision(p *Pool) {
	if !p.IsSet("read_from") {
		p.ReadFrom = DefaultReadFrom
	}
	if !p.IsSet("cluster_refresh") {
		p.ClusterRefresh = DefaultClusterRefresh
	}
}

// refuseClusterKeys refuses, in a pool of another kind, the keys only a
// redis_cluster pool may set.
func (pp *poolParser) refuseClusterKeys() {
	pp.refuseKeys(clusterOnly, "redis_cluster", "is only valid for a redis_cluster pool (redis_cluster: true)")
}
