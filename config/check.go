package config

import (
	"fmt"
	"slices"
)

// PoolCheck is one parsed pool as a kind's rules see it (KindRules.Validate):
// the pool as read, the lines of its keys, which values were rejected, and
// where the kind reports what it refuses. It is valid only during the
// Validate call it is given to.
type PoolCheck struct {
	pp *poolParser
}

// Pool returns the pool being checked: every key is read, over the
// defaults a pool starts with; the defaults that depend on other keys or
// on the kind are not filled yet. Validate may complete what it checks (a
// replica's shard by name).
func (c *PoolCheck) Pool() *Pool { return c.pp.p }

// Has reports whether the pool has key, whatever its value.
func (c *PoolCheck) Has(key string) bool { return c.pp.has(key) }

// Bad reports whether key's value was rejected already: a rule that
// depends on it stays silent rather than report a consequence.
func (c *PoolCheck) Bad(key string) bool { return c.pp.bad[key] }

// Fail reports a problem with key at the key's line (0 when the pool has
// no such key) and marks its value rejected.
func (c *PoolCheck) Fail(key, msg string) { c.pp.fail(c.pp.keys[key], key, msg) }

// FailAt reports a problem with key at line, such as the line of one item
// of a list, and marks its value rejected.
func (c *PoolCheck) FailAt(line int, key, msg string) { c.pp.fail(line, key, msg) }

// Refuse refuses each of keys the pool sets (and has not already refused)
// with why, unless the key that would allow them, allowedBy, was itself
// refused ("" for none).
func (c *PoolCheck) Refuse(keys []string, allowedBy, why string) {
	c.pp.refuseKeys(keys, allowedBy, why)
}

// The refusals and checks several kinds share.

// CheckHashSeed refuses a hash_seed that neither the hash nor the
// distribution reads: twemproxy's hashes take no seed.
func (c *PoolCheck) CheckHashSeed() {
	pp, p := c.pp, c.pp.p
	line, ok := pp.keys["hash_seed"]
	if !ok || p.HashSeed == 0 || pp.bad["hash"] || pp.bad["distribution"] ||
		slices.Contains(seededHashes, p.Hash) || p.Distribution == "random" {
		return
	}
	pp.fail(line, "hash_seed", fmt.Sprintf("has no effect with hash %s and distribution %s; "+
		"it seeds the hashes xxhash, murmur3, xxh3 and the distribution random", p.Hash, p.Distribution))
}

// RefuseMetaOnRedis refuses server_protocol: meta on a redis pool, of any
// kind: meta is memcached's protocol.
func (c *PoolCheck) RefuseMetaOnRedis() {
	pp := c.pp
	line, ok := pp.keys["server_protocol"]
	if !ok || pp.p.ServerProtocol != ServerProtocolMeta || !pp.p.Redis || pp.bad["redis"] {
		return
	}
	pp.fail(line, "server_protocol", "meta is only valid for a memcache pool")
}

// RefuseClusterKeys refuses, in a pool of another kind, the keys only a
// redis_cluster pool may set.
func (c *PoolCheck) RefuseClusterKeys() {
	c.Refuse(clusterOnly, "redis_cluster", "is only valid for a redis_cluster pool (redis_cluster: true)")
}

// RefuseLuaKeys refuses the keys only a Lua pool reads on a pool that has
// no route file to read them.
func (c *PoolCheck) RefuseLuaKeys() {
	c.Refuse(luaOnly, "", "is only valid for a Lua pool (lua: FILE)")
}

// RefuseSentinelKeys refuses, in a pool of another kind, the keys only a
// sharded redis pool may set.
func (c *PoolCheck) RefuseSentinelKeys() {
	c.Refuse(sentinelOnly, "", "is only valid for a sharded redis pool (servers, no redis_cluster, no lua)")
}

// RefuseReplicaKeys refuses both replica keys in a pool routed by Lua.
func (c *PoolCheck) RefuseReplicaKeys() {
	c.Refuse(replicaOnly, "", "is only valid for a sharded redis pool or a redis_cluster pool; "+
		"a route file picks its own backends")
}

// RefuseNearKeys refuses the near cache keys in a pool that is not a
// native memcache pool: why says what answers its gets instead. It
// refuses delete_spool too, which only the sharded kind's routes see.
func (c *PoolCheck) RefuseNearKeys(why string) {
	c.Refuse(nearOnly, "", why)
	c.Refuse([]string{"delete_spool"}, "", "is only valid for a sharded pool (servers, no lua, no redis_cluster)")
}
