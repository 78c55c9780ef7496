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
// A pool is of one kind, chosen once from its keys: a native sharded pool
// (a servers list sharded by hash and distribution, twemproxy's only kind),
// a redis_cluster pool, or a Lua pool (a lua route file). config owns the
// keys, the YAML schema: a pool mapping is one namespace, each key in the
// table of the file that owns it (pool_common.go, pool_native.go,
// pool_cluster.go, pool_lua.go ...), read into the one Pool struct, and
// the rules every pool follows (pool_common.go, security.go). A kind's
// rules are its package's: which pools it claims, what it requires and
// refuses of their keys, and the defaults only it fills (KindRules, which
// the shard, cluster and lua packages register from init with
// RegisterKind; a PoolCheck is what their rules see of a pool). A program
// that parses configurations links the kinds it accepts, as the proxy
// does (proxy/kinds.go); Parse refuses a pool of a kind no linked package
// registered. Parse records which keys the file set, whatever their
// values (Pool.IsSet), so that a key set to its default value can be told
// from an absent one.
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
// Concurrency: RegisterKind runs at init; Load, Parse and Pool.Kind are
// safe for concurrent use. A returned Config
// belongs to the caller; nothing in this package keeps or changes it, so once
// it is shared it should be treated as read-only. Parse does not retain data.
package config
