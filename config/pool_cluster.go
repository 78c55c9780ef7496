package config

import "time"

// clusterKeys are the keys of a redis_cluster pool. The other kinds refuse
// cluster_refresh (PoolCheck.RefuseClusterKeys) and read redis_cluster: false as any
// pool does. A cluster pool's read_from is in replicaKeys, which a sharded
// redis pool shares.
var clusterKeys = map[string]poolKey{
	"redis_cluster":   boolKey(func(p *Pool) *bool { return &p.RedisCluster }, false),
	"cluster_refresh": msKey(func(p *Pool) *time.Duration { return &p.ClusterRefresh }, 100, DefaultClusterRefresh, 0).onlyIf(isCluster),
}

// clusterOnly are the keys only a redis_cluster pool may set.
var clusterOnly = []string{"cluster_refresh"}
