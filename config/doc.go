// Package config reads twemproxy (nutcracker) YAML configurations into a
// validated model: a Config with one Pool per top-level key, each with its
// Listen address and its Servers.
//
// A nutcracker.yml that twemproxy accepts is accepted here unchanged and means
// the same thing: the same keys, the same defaults, the same server line
// format ("host:port:weight [name]" or "/path/to/socket:weight [name]") and
// the same node names, which the ketama distribution hashes and the stats
// endpoint shows. Where twemproxy has a validation rule this package applies
// it; where twemproxy accepts something it cannot use (garbage after a unix
// socket's permission, an empty server host, a key given twice) this package
// rejects it. A few keys are shardproxy extensions (item_size_max,
// max_request_line, flush_all, redis_flushall, redis_config, connect_timeout, hash_seed, the hashes xxhash,
// murmur3 and xxh3, the distributions jump and ring, and redis_cluster with
// read_from and cluster_refresh for pools that front a Redis Cluster,
// replicas and read_from for sharded redis pools (pool_replica.go), and
// lua, lua_arg, lua_timeout and lua_max_alloc for pools routed by a Lua file);
// twemproxy would refuse a file that uses them.
//
// A pool is one of three kinds, chosen once from its keys: a native sharded
// pool (a servers list sharded by hash and distribution, twemproxy's only
// kind), a redis_cluster pool, or a Lua pool (a lua route file). Keys every
// pool reads are checked in pool_common.go; each kind's file owns its keys,
// their defaults, and what it does with the keys of the other kinds. Parse
// records which keys the file set, whatever their values (Pool.IsSet), so
// that a key set to its default value can be told from an absent one.
//
// Every error names the file, the line, the pool and the key it is about, for
// example:
//
//	config: conf/nutcracker.yml:12: pool "alpha": hash: unknown hash "foo"
//
// Parse reports up to ten problems at once, joined with errors.Join; each one
// is an *Error.
//
// What config must not do: it does no network I/O (listen and server hosts
// are not resolved here; that happens when the proxy binds or dials), it never
// logs, and it imports only the standard library and gopkg.in/yaml.v3, not
// other shardproxy packages.
//
// Concurrency: Load and Parse are safe for concurrent use. A returned Config
// belongs to the caller; nothing in this package keeps or changes it, so once
// it is shared it should be treated as read-only. Parse does not retain data.
package config
