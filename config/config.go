package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of the pool keys, applied by Parse when a key is absent (Pool.IsSet
// tells an absent key from one set to its default). The twemproxy ones are
// those of src/nc_conf.h. Each is written here only: the kinds of pool and
// Marshal refer to these names.
const (
	DefaultHash               = "fnv1a_64"
	DefaultDistribution       = "ketama"
	DefaultBacklog            = 512
	DefaultServerConnections  = 1
	DefaultServerRetryTimeout = 30 * time.Second
	// DefaultHealthCheckInterval is how often a pool probes its bad
	// servers and checks its idle server sockets.
	DefaultHealthCheckInterval = time.Second
	// DefaultHealthCheckTimeout bounds one probe.
	DefaultHealthCheckTimeout = time.Second
	DefaultServerFailureLimit = 2
	// DefaultBlockingConnections is how many dedicated connections (Redis
	// blocking commands and transactions) a Redis pool opens to each
	// server at most.
	DefaultBlockingConnections = 64

	// DefaultItemSizeMax is memcached's own default item size limit (-I 1m).
	DefaultItemSizeMax = 1 << 20
	// DefaultRedisItemSizeMax is a Redis pool's ItemSizeMax: Redis's proto-max-bulk-len.
	DefaultRedisItemSizeMax = 512 << 20
	// DefaultMaxRequestLine is long enough for a multi-get of about 250 keys
	// of the longest memcached key (250 bytes).
	DefaultMaxRequestLine = 64 << 10
	// DefaultConnectTimeout is the connect timeout of a pool that sets
	// neither connect_timeout nor timeout. It equals
	// backend.DefaultConnectTimeout, which config may not import (config
	// imports no other shardproxy package); a test pins the two together.
	DefaultConnectTimeout = time.Second
	// DefaultClusterRefresh is how often a redis_cluster pool reads the
	// cluster's slot map when nothing asks for it sooner.
	DefaultClusterRefresh = 5 * time.Second
	// DefaultLuaTimeout is how long a Lua pool's handler may run between
	// two waits for a backend before it is stopped (key lua_timeout). It
	// equals lua.DefaultMaxRun, which config may not import.
	DefaultLuaTimeout = 100 * time.Millisecond
	// DefaultLuaMaxAlloc is how many MiB one run of a Lua pool's route
	// code may allocate (key lua_max_alloc). It equals lua.DefaultMaxAlloc.
	DefaultLuaMaxAlloc = 256
	// DefaultLuaInternalCache is the MiB of a Lua pool's own cache
	// (key lua_internal_cache): memcached's default -m, which sizes the
	// storage its proxy's mcp.internal reaches.
	DefaultLuaInternalCache = 64
	// DefaultFlushAll lets clients send flush_all.
	DefaultFlushAll = true
	// DefaultEjectPolicy is twemproxy's behaviour: an ejected server's keys
	// move to the live servers.
	DefaultEjectPolicy = EjectRemap
	// DefaultServerProtocol sends one-key gets as meta gets to the
	// servers that answer mn, and everything as written to the others. A
	// Lua pool's default is ServerProtocolText: what its route sends.
	DefaultServerProtocol = ServerProtocolAuto
	// DefaultNearCacheTTL is how long a value a pool's near cache took
	// from a server's reply is served at most (key near_cache_ttl).
	DefaultNearCacheTTL = 5 * time.Second
	// DefaultNearCacheFill fills a near cache from the replies to get.
	DefaultNearCacheFill = NearCacheFillGet
	// DefaultReadFrom sends a Redis pool's reads to the masters.
	DefaultReadFrom = ReadFromMaster
	// DefaultVersion is what a memcache pool answers to "version" until a
	// server has told its own (key default_version): the memcached release
	// whose replies the proxy's memcache dialect matches.
	DefaultVersion = "1.6.18"
	// DefaultSlowlogThreshold is the total time from which a pool's
	// request is kept in its slowlog (key slowlog_threshold), Redis's
	// slowlog-log-slower-than.
	DefaultSlowlogThreshold = 10 * time.Millisecond
	// DefaultSlowlogMaxLen is how many slow requests a pool's slowlog
	// keeps (key slowlog_max_len), Redis's slowlog-max-len.
	DefaultSlowlogMaxLen = 128
)

// MaxServerConnections bounds server_connections. twemproxy opens its
// connections as it needs them; shardproxy sets up every socket slot when
// it builds the pool, so the number is memory at start and at each reload
// (2^31 slots would be hundreds of gigabytes).
const MaxServerConnections = 4096

// Values of Pool.ReadFrom: where a redis_cluster pool or a sharded redis
// pool sends read-only commands.
const (
	ReadFromMaster        = "master"
	ReadFromPreferReplica = "prefer_replica"
	ReadFromReplica       = "replica"
)

// Values of Pool.ServerProtocol: how a memcache pool speaks to its servers.
const (
	ServerProtocolText = "text"
	ServerProtocolMeta = "meta"
	ServerProtocolAuto = "auto"
)

// Inline is the Source of a Config parsed from bytes without a file name.
const Inline = "<inline>"

// Config is a whole nutcracker.yml: its pools, each listening on its own
// address.
type Config struct {
	// Source is the file the configuration was read from, or Inline, or
	// another source's name (a fleet's "etcd:PREFIX/config@REV").
	Source string
	// Dir, when set, is the directory relative paths in the configuration
	// resolve against instead of Source's: a configuration that is not a
	// file (a fleet's, from etcd) sets it to the proxy's working directory.
	Dir string
	// Pools are sorted by name the way twemproxy sorts them: shorter names
	// first, names of equal length by their bytes. Names are unique.
	Pools []*Pool
	// Admin is the top-level "shardproxy:" section, a shardproxy extension
	// (twemproxy would read it as a pool and reject it).
	Admin Admin
	// Fleet is the top-level "fleet:" section (nil: none): the etcd cluster
	// the configuration comes from. With it, Pools may be empty.
	Fleet *Fleet
}

// AdminSection is the reserved top-level key of the Admin section; no pool
// may be called so.
const AdminSection = "shardproxy"

// Admin configures the operator endpoints. Each address may change on
// reload. The zero value serves none of them from the file: the command
// line's -s and -a then set the stats address.
type Admin struct {
	// StatsListen is where twemproxy's stats JSON is served (key
	// stats_listen, "host:port"); when empty, the command line's -a:-s.
	StatsListen string
	// HTTPListen is where the HTTP admin endpoints (/metrics, /config,
	// /backends, /version, /reload) are served (key admin_listen); "" means
	// the command line's --admin address.
	HTTPListen string
	// Token, when set, must be sent by HTTP admin clients as
	// "Authorization: Bearer <token>" (key admin_token).
	Token string
	// Traces is where a sample of the requests goes as OpenTelemetry
	// spans (keys trace_*); off when its Endpoint is "".
	Traces Traces
}

// Traces configures the export of requests as OpenTelemetry spans over
// OTLP/HTTP (package tracing).
type Traces struct {
	// Endpoint is the OTLP/HTTP receiver (key trace_endpoint): a URL
	// ("http://collector:4318"; /v1/traces is added to a URL with no
	// path) or host:port; "" turns tracing off.
	Endpoint string
	// Sample is the share of requests traced (key trace_sample, 0 to 1;
	// default DefaultTraceSample).
	Sample float64
	// SlowOff leaves out the requests a pool's slowlog keeps, which are
	// otherwise traced whatever Sample says (key trace_slow: false).
	SlowOff bool
	// Service is the spans' service.name (key trace_service; default
	// "shardproxy").
	Service string
}

// DefaultTraceSample is trace_sample's default: one request in a
// thousand.
const DefaultTraceSample = 0.001

// Pool is one top-level entry of nutcracker.yml: a listening address and the
// servers that keys arriving there are sharded over.
//
// Parse fills in every default, so a parsed Pool needs no further defaulting,
// and records which keys the file set (IsSet). For a Pool built by hand, the
// zero value of a field means what the field's comment says.
type Pool struct {
	// Name is the pool's top-level key; it is also the pool's key in the stats
	// JSON.
	Name string
	// Line is the line of the pool's name in the source, for messages.
	Line int
	// Listen is where clients connect (key listen, required).
	Listen Listen

	// Hash is the key hash function (key hash): one of one_at_a_time, md5,
	// crc16, crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh,
	// murmur, jenkins (twemproxy's), or xxhash, murmur3, xxh3 (shardproxy
	// extensions). "" means the default, fnv1a_64.
	Hash string
	// HashTag is "" (hash the whole key) or exactly two bytes, the first
	// opening and the second closing the part of the key that is hashed, as
	// in "{}" (key hash_tag).
	HashTag string
	// Distribution picks a server for a key hash (key distribution): ketama,
	// modula, random (twemproxy's), or jump, ring (shardproxy extensions).
	// "" means the default, ketama.
	Distribution string
	// Timeout is how long a request may wait for its server's reply (key
	// timeout, in milliseconds). 0 means wait forever: the key is absent, or
	// set to 0 or -1.
	Timeout time.Duration
	// Backlog is the listen(2) backlog (key backlog). 0 means the default,
	// 512. Go's net package always asks the kernel for its maximum
	// (somaxconn), so the value is kept for compatibility only.
	Backlog int
	// ClientConnections is the key client_connections, 0 meaning unlimited.
	// twemproxy parses it and then ignores it; the value is kept here so the
	// proxy can choose to enforce it.
	ClientConnections int
	// Redis is true for a Redis pool and false (the default) for a memcached
	// pool (key redis).
	Redis bool
	// RedisAuth is the password clients must AUTH with and that the proxy
	// sends to every server on connect (key redis_auth); "" means none. Only a
	// Redis pool may set it.
	RedisAuth string
	// RedisDB is the database selected on every server connection (key
	// redis_db, >= 0); 0 sends no SELECT. A memcached pool ignores it.
	RedisDB int
	// Preconnect opens the server connections at start (key preconnect,
	// default false; a memcache pool with a lua route file connects at
	// start unless the key says false, as memcached's proxy does).
	Preconnect bool
	// AutoEjectHosts takes a server out of the distribution after
	// ServerFailureLimit consecutive failures, for ServerRetryTimeout (key
	// auto_eject_hosts, default false).
	AutoEjectHosts bool
	// ServerConnections is the number of connections to each server (key
	// server_connections, 1 to MaxServerConnections). 0 means the default,
	// 1.
	ServerConnections int
	// ServerRetryTimeout is how long an ejected server stays out (key
	// server_retry_timeout, in milliseconds, default 30s). Parse keeps an
	// explicit 0; for a Pool built by hand 0 means the default.
	ServerRetryTimeout time.Duration
	// HealthCheckInterval is how often the pool probes a server marked bad
	// (memcached version, Redis PING) and checks its idle server sockets
	// (key health_check_interval, in milliseconds, default 1s; 0 turns
	// the checks off, and a bad server then comes back on a client's
	// request after ServerRetryTimeout, as in twemproxy).
	HealthCheckInterval time.Duration
	// HealthCheckTimeout bounds one probe (key health_check_timeout, in
	// milliseconds, default 1s).
	HealthCheckTimeout time.Duration
	// ServerFailureLimit is the number of consecutive failures that eject a
	// server (key server_failure_limit, default 2). Parse keeps an explicit
	// 0; for a Pool built by hand 0 means the default.
	ServerFailureLimit int
	// TCPKeepalive sets SO_KEEPALIVE on server connections (key tcpkeepalive,
	// default false).
	TCPKeepalive bool
	// Reuseport sets SO_REUSEPORT on the listening socket (key reuseport,
	// default false).
	Reuseport bool
	// Servers are the pool's servers in file order (key servers, required,
	// not empty). twemproxy numbers servers in the order of their names, not
	// of the file; SortedServers returns that order.
	Servers []Server

	// ItemSizeMax is the largest value, in bytes, a pool accepts from a
	// client (key item_size_max, a shardproxy extension; 1024 to 1 GiB): a
	// memcached value, a Redis bulk string. 0 means the default: 1 MiB
	// (memcached's -I) for memcached pools, 512 MiB (Redis's
	// proto-max-bulk-len) for Redis pools.
	ItemSizeMax int
	// MaxRequestLine is the longest request line, in bytes, read whole (key
	// max_request_line, a shardproxy extension; 2048 to 64 MiB): a Redis
	// inline command; a memcache get line, longer ones being cut into parts
	// of at most this many bytes as they stream in. 0 means the default,
	// 64 KiB.
	MaxRequestLine int
	// AllowFlushAll lets clients send flush_all through this pool (key
	// flush_all, a shardproxy extension). Parse sets it to true when the key
	// is absent; for a Pool built by hand the zero value, false, forbids it.
	AllowFlushAll bool
	// AllowRedisFlushAll lets clients of a Redis pool send FLUSHALL (key
	// redis_flushall, a shardproxy extension; Redis pools only; default
	// false). FLUSHALL empties every database of every server, those other
	// pools (redis_db) use too, so it takes this key as well as flush_all;
	// FLUSHDB, which empties the pool's own database, takes flush_all
	// alone.
	AllowRedisFlushAll bool
	// AllowRedisConfig lets clients of a Redis pool send CONFIG GET, SET,
	// RESETSTAT and REWRITE, which go to every server (key redis_config,
	// a shardproxy extension; sharded and Redis Cluster pools; default
	// false: clients may not reconfigure the servers unless the operator
	// says so). CONFIG SET of a setting the proxy depends on (requirepass,
	// port, tls-*, maxclients, ...) is refused even then.
	AllowRedisConfig bool
	// RedisClusterView shows a sharded Redis pool's proxies to
	// cluster-aware clients as a Redis Cluster (key redis_cluster_view, a
	// shardproxy extension; default false): the proxy answers CLUSTER
	// SLOTS, NODES, ... with itself, or with the fleet's proxies of the
	// pool, each serving a share of the slots.
	RedisClusterView bool
	// RedisScripts says where a Redis pool's scripts run (key
	// redis_scripts, a shardproxy extension; sharded and Redis Cluster
	// pools): RedisScriptsShared (the default) sends EVAL, EVALSHA and
	// FCALL on the connection the pool shares among its clients, in
	// pipelines; RedisScriptsDedicated sends each on a connection of its
	// own, as a blocking command goes, so that a long script holds that
	// connection only: the other clients' commands reach the server (and
	// get its -BUSY), and SCRIPT KILL can end the script.
	RedisScripts string
	// ConnectTimeout bounds one connect to a server (key connect_timeout, in
	// milliseconds, > 0, a shardproxy extension). When the key is absent,
	// Parse uses Timeout if the pool has one (twemproxy's timeout covers the
	// connect too) and DefaultConnectTimeout (1s) otherwise, rather than
	// waiting for the kernel to give up. For a Pool built by hand 0 means that
	// same rule.
	ConnectTimeout time.Duration
	// HashSeed seeds the seedable hashes (xxhash, murmur3, xxh3) and the
	// random distribution (key hash_seed, a shardproxy extension, decimal or
	// 0x-prefixed hex, default 0). twemproxy's hashes take no seed, so Parse
	// rejects a hash_seed that would have no effect.
	HashSeed uint64
	// EjectPolicy says what happens to the keys of a server that
	// auto_eject_hosts ejects (key eject_policy, a shardproxy extension):
	// EjectRemap (the default, twemproxy's behaviour) rebuilds the
	// distribution over the live servers; EjectFailFast keeps the
	// distribution, so the ejected server's keys get an error at once until
	// it returns and no key ever moves (twemproxy issue #213); EjectFailover
	// keeps the distribution and sends the ejected server's keys to the pool
	// FailoverPool (twemproxy issue #604). Without auto_eject_hosts a failing
	// server's keys always fail fast and never move.
	EjectPolicy string
	// FailoverPool names the pool that takes an ejected server's keys under
	// EjectFailover (key failover_pool, a shardproxy extension). It must be
	// another pool of the same protocol, and only this one level is tried.
	FailoverPool string
	// Route makes the pool a route pool (key route, a shardproxy
	// extension): it has no servers of its own and answers through the
	// pools it names (migrate, warm_up, shadow, failover; see
	// docs/migrations.md). Nil for every other pool.
	Route *Route
	// ActiveReqLimit caps the requests the pool has in flight to its
	// servers (key active_req_limit, a shardproxy extension named after
	// memcached proxy's mcp.active_req_limit); over it a request is answered
	// at once with "active request limit reached". 0 means no limit.
	ActiveReqLimit int
	// BufferMemoryLimit caps the bytes of requests and replies the pool
	// holds in flight, in KiB (key buffer_memory_limit, after memcached
	// proxy's mcp.buffer_memory_limit); over it a request is answered at once
	// with "buffer memory limit reached". 0 means no limit.
	BufferMemoryLimit int
	// MaxKeys caps the keys of one multi-key request (key max_keys, a
	// shardproxy extension); a request with more is refused. 0 means only the
	// request line (memcached) or multibulk (Redis) limits apply.
	MaxKeys int
	// BlockingConnections caps the connections to each server that a
	// Redis pool dedicates to one client at a time: one per blocking
	// command waiting (BLPOP, XREAD BLOCK, ...) and one per client in a
	// transaction (WATCH, MULTI). Over it such a command is refused (key
	// blocking_connections, a shardproxy extension, 1 to 65536; default
	// DefaultBlockingConnections). Only a Redis pool that is not routed by
	// Lua may set it.
	BlockingConnections int
	// Lua is the route file of a pool routed by Lua (key lua, a shardproxy
	// extension): a script in memcached's proxy API that defines
	// mcp_config_pools and mcp_config_routes and so its own backends. A
	// relative path is relative to the config file's directory (see
	// Config.Path). A Lua pool has no servers key.
	Lua string
	// LuaMore are the route files after Lua when the key lua is a list
	// (memcached's proxy_config=a.lua:b.lua): each runs, in order, in the
	// state Lua ran in, so one may define mcp_config_pools and the next
	// mcp_config_routes. Paths are relative as Lua's.
	LuaMore []string
	// ListenTags are further listeners of a Lua pool, each with a tag
	// (key listen_tags, a mapping of tag to address; memcached's
	// -l tag_NAME_:addr): requests that come on one are handled by the
	// route file's handlers attached with its tag (mcp.attach's third
	// argument), else by the untagged ones. Only a Lua pool may set it.
	ListenTags []TaggedListen
	// LuaDirs are directories, besides the route file's own, whose files
	// the route file may load with dofile, loadfile and require (key
	// lua_dirs, one or a list; relative paths are relative to the config
	// file's directory). memcached's proxy reads any path; shardproxy
	// reads only the route file's directory, the lua_arg file and these.
	// Only a Lua pool may set it.
	LuaDirs []string
	// LuaArg is what the route file reads as mcp.start_arg (key lua_arg,
	// memcached's proxy_arg): "" (the default) gives false, a string
	// without ':' the string, and "a:b_2" the table {a = true, b = "2"}.
	// Only a Lua pool may set it.
	LuaArg string
	// LuaTimeout bounds each uninterrupted run of a Lua pool's route code
	// (key lua_timeout, in milliseconds, at least 1): a handler from its
	// start or a resume to its next wait for a backend, a function
	// generator's call, a cron. A run over it is stopped and its request
	// answered "SERVER_ERROR lua timeout". Parse sets DefaultLuaTimeout
	// (100ms) for a Lua pool and 0 for any other. Only a Lua pool may set
	// it.
	LuaTimeout time.Duration
	// LuaMaxAlloc bounds what each run of a Lua pool's route code (as
	// LuaTimeout counts runs) may allocate, in MiB (key lua_max_alloc, at
	// least 1): a run over it is stopped and its request answered
	// "SERVER_ERROR lua memory limit". Parse sets DefaultLuaMaxAlloc (256)
	// for a Lua pool and 0 for any other. Only a Lua pool may set it.
	LuaMaxAlloc int
	// LuaInternalCache is the memory limit, in MiB, of a Lua memcache
	// pool's own cache (key lua_internal_cache, at least 1): the store
	// mcp.internal and mcp.internal_handler reach, which also answers the
	// commands no handler is attached for, as memcached's storage does
	// under its proxy. Its items are at most ItemSizeMax. Parse sets
	// DefaultLuaInternalCache (64) for a Lua pool and 0 for any other.
	// Only a Lua pool may set it.
	LuaInternalCache int
	// RedisCluster makes a Redis pool front a Redis Cluster (key
	// redis_cluster, a shardproxy extension; needs redis: true). Its
	// servers are seed nodes, of which any one live node is enough to read
	// the slot map (weights and names are not used); keys go to the node
	// serving their slot (CRC16 of the key or its {hash tag}), so hash,
	// hash_tag, distribution, hash_seed, auto_eject_hosts and a redis_db
	// other than 0 are refused. redis_auth authenticates to every node.
	RedisCluster bool
	// ReadFrom says where a redis_cluster pool or a sharded redis pool
	// sends read-only commands (key read_from): ReadFromMaster (the
	// default), ReadFromPreferReplica (a healthy replica of the slot's
	// master or of the key's shard, else the master) or ReadFromReplica
	// (replicas only). A sharded pool's replicas are Replicas, or those
	// its Sentinels name. Parse sets ReadFromMaster for a cluster pool and
	// leaves "" (which means master) for a sharded pool without the key;
	// a Lua or memcache pool may not set it.
	ReadFrom string
	// Replicas are the replicas of a sharded redis pool's shards (key
	// replicas, a list of "host:port[:weight] shard" lines, a shardproxy
	// extension), which serve reads under ReadFrom. A pool with
	// sentinels learns the replicas of each shard that has none listed
	// from the Sentinels. Only a sharded redis pool may set it.
	Replicas []Replica
	// ClusterRefresh is how often a redis_cluster pool reads the slot map
	// when no MOVED reply or node failure asks for it sooner (key
	// cluster_refresh, in milliseconds, at least 100). Parse sets
	// DefaultClusterRefresh (5s) for a cluster pool and 0 for any other
	// pool, which may not set it.
	ClusterRefresh time.Duration

	// Sentinels are the "host:port" addresses of the Redis Sentinels that
	// a sharded redis pool asks for its masters (key sentinels, a list; a
	// shardproxy extension). When set, each servers line names a Sentinel
	// master in place of an address (Server.Master) and the proxy follows
	// its failovers; see docs/sentinel.md.
	Sentinels []string
	// SentinelAuth is the password the proxy sends the Sentinels with AUTH
	// (key sentinel_auth; the Sentinels' requirepass); "" sends none.
	SentinelAuth string
	// SentinelAuthUser is the ACL user that goes with SentinelAuth (key
	// sentinel_auth_user; needs sentinel_auth); "" is the default user.
	SentinelAuthUser string
	// ServersFrom, when not nil, is the DNS name the pool takes its
	// servers from (key servers_from, see ServersFrom); Servers are then
	// the set used until the first answer, or none.
	ServersFrom *ServersFrom
	// DeleteSpool, when not nil, keeps the deletes of a native memcache
	// pool that could not reach their server, to send them before the
	// server serves again (key delete_spool, see DeleteSpool).
	DeleteSpool *DeleteSpool

	// RedisAuthUser is the Redis ACL user that goes with RedisAuth (key
	// redis_auth_user, a shardproxy extension; needs redis_auth): clients
	// must send AUTH user password (or HELLO 2 AUTH user password) and the
	// proxy sends the same to every server. "" means Redis's default user,
	// for which clients may send AUTH password alone.
	RedisAuthUser string

	// ServerProtocol is how a memcache pool speaks to its servers (key
	// server_protocol, a shardproxy extension): ServerProtocolText
	// forwards every request as the client wrote it; ServerProtocolMeta
	// sends a one-key get or gets as a meta get (mg) and gives the client
	// memcached's text reply, which lets memcached 1.6 answer a batch of
	// gets with one send instead of one each. The servers must speak the
	// meta protocol (memcached 1.6 or later): a server that does not
	// answer "mn" is marked bad. ServerProtocolAuto (the default of a
	// native pool) asks each new socket's server "mn" and sends meta gets
	// on the sockets whose server answered it, text on the others. On a
	// memcache pool with lua the default is text, what the route sends,
	// as memcached's proxy does; meta and auto apply only to the one-key
	// gets a route forwards untouched, without reading the reply
	// (lua.Config.MetaRewrite), and the route still sees the client's get.
	// A redis pool may not set meta (it ignores the key); a failover_pool
	// must speak the same.
	ServerProtocol string

	// DefaultVersion is what a memcache pool answers to "version" while no
	// server of the pool has told its version (key default_version, a
	// shardproxy extension; a version as memcached prints it, such as
	// 1.6.18). Clients read the version to decide which of the server's
	// features to use, so the pool answers the lowest version its servers
	// told when their sockets were validated, and this one before any has.
	// Parse sets DefaultVersion (1.6.18); for a Pool built by hand ""
	// means that default. Only a memcache pool may set it.
	DefaultVersion string

	// SlowlogThreshold is the time from reading a request to handing its
	// reply to the client's socket from which the request is kept in the
	// pool's slowlog (key slowlog_threshold, in milliseconds, at least 1,
	// default 10 ms). SlowlogMaxLen is how many the slowlog keeps, newest
	// first (key slowlog_max_len, 0 to MaxSlowlogLen, default 128; 0
	// turns the slowlog off). Every kind of pool has one; for a Pool
	// built by hand 0 and 0 mean none.
	SlowlogThreshold time.Duration
	SlowlogMaxLen    int

	// HotKeys is how many of its most requested keys over the last 10
	// seconds the pool reports (key hot_keys, 0 to MaxHotKeys; 0, the
	// default, counts none: counting costs a lock and a sketch update
	// per request).
	HotKeys int

	// NearCache is the size in MiB of a native memcache pool's near
	// cache (key near_cache, a shardproxy extension, 0 to MaxNearCache;
	// 0, the default, means none): an in-process cache that answers a
	// one-key get itself when it holds the key, and otherwise takes the
	// value from the server's reply (NearCacheFill). Every write,
	// delete, touch and flush_all the pool forwards removes the key (or
	// everything) from it when it is sent and again when its reply
	// arrives, before the client has the reply. It cannot see writes
	// that bypass the proxy: NearCacheTTL bounds how long it may serve
	// a value such a write replaced. A redis, redis_cluster or Lua pool
	// may not set it.
	NearCache int
	// NearCacheTTL caps how long a value filled into the near cache is
	// served (key near_cache_ttl, in whole seconds, 1 to
	// MaxNearCacheTTL). Parse sets DefaultNearCacheTTL (5s) for a pool
	// with a near cache and leaves 0 for any other, which may not set it.
	NearCacheTTL time.Duration
	// NearCacheFill says which replies fill the near cache (key
	// near_cache_fill): NearCacheFillGet (the default), NearCacheFillGets
	// or NearCacheFillGetGets, written "get", "gets", "get gets" or as a
	// list. A gets is always sent to the server, whose CAS it needs;
	// filling from it only serves later gets. Parse sets
	// DefaultNearCacheFill for a pool with a near cache and leaves "" for
	// any other, which may not set it.
	NearCacheFill string
	// NearCacheHot keeps only the pool's hot keys in its near cache (key
	// near_cache_hot, a shardproxy extension; needs hot_keys): a get
	// fills the near cache when its key is among the hot_keys most
	// requested now, so the cache serves the keys that overload a
	// server, with the same coherence rules and TTL cap.
	NearCacheHot bool

	// The TLS keys (shardproxy extensions) hold file paths; a relative path
	// is relative to the config file's directory (see Config.Path). The
	// files are read when the proxy builds the pool, so a missing or bad
	// file fails the start or the reload, naming the file.

	// TLSCert and TLSKey are the PEM certificate (chain) and private key the
	// listener serves TLS with (keys tls_cert and tls_key, both or neither).
	// Empty: the listener is plain.
	TLSCert, TLSKey string
	// TLSClientCA is a PEM file of CA certificates (key tls_client_ca, needs
	// tls_cert): clients must present a certificate signed by one of them.
	// Empty: client certificates are neither asked for nor checked.
	TLSClientCA string
	// ServerTLS makes every connection to the pool's servers TLS (key
	// server_tls, default false).
	ServerTLS bool
	// ServerTLSCA is a PEM file of the CA certificates that verify the
	// servers (key server_tls_ca, needs server_tls); empty means the
	// system's roots.
	ServerTLSCA string
	// ServerTLSCert and ServerTLSKey are the certificate and key the proxy
	// presents to servers that ask for one, for mutual TLS (keys
	// server_tls_cert and server_tls_key, both or neither; need server_tls).
	ServerTLSCert, ServerTLSKey string
	// ServerTLSServerName is the name sent as SNI and verified in the
	// servers' certificates (key server_tls_server_name, needs server_tls);
	// empty means each server's host.
	ServerTLSServerName string
	// ServerTLSSkipVerify accepts any server certificate (key
	// server_tls_skip_verify, default false, needs server_tls). It gives up
	// the protection TLS offers against a man in the middle: for tests only.
	ServerTLSSkipVerify bool

	// set holds the keys of a Pool from Parse, whatever their values; nil
	// for a Pool built in Go (see IsSet). It is shared by copies and never
	// changed after Parse.
	set map[string]bool
}

// Path resolves a path written in the config: relative paths are relative
// to Dir when set, else to the directory of the config file.
func (c *Config) Path(p string) string {
	switch {
	case p == "" || filepath.IsAbs(p):
		return p
	case c.Dir != "":
		return filepath.Join(c.Dir, p)
	case c.Source == Inline || c.Source == "":
		return p
	}
	return filepath.Join(filepath.Dir(c.Source), p)
}

// Eject policies (Pool.EjectPolicy).
const (
	EjectRemap    = "remap"
	EjectFailFast = "fail_fast"
	EjectFailover = "failover"
)

// Listen is the address a pool accepts clients on.
type Listen struct {
	// Network is "tcp" or "unix".
	Network string
	// Addr is "host:port" (IPv6 hosts in brackets; an empty host means every
	// address) or the socket's path.
	Addr string
	// Perm is the unix socket's permission bits; 0 leaves them as the umask
	// makes them. Always 0 for tcp.
	Perm os.FileMode
}

// TaggedListen is one of a Lua pool's tagged listeners (Pool.ListenTags).
type TaggedListen struct {
	// Tag is 1 to 8 characters.
	Tag    string
	Listen Listen
}

// Server is one line of a pool's servers list.
type Server struct {
	// Network is "tcp" or "unix" (a shardproxy addition to the model, so that
	// users need not look at Port or Addr to tell), or "sentinel" in a pool
	// with sentinels, whose lines name masters (Master) and no address.
	Network string
	// Master is the Sentinel master name of a pool with sentinels (line
	// "master:weight [name]"), "" otherwise; Addr, Host and Port are then
	// empty: the Sentinels give the address.
	Master string
	// Addr is the address to dial: "host:port" (IPv6 hosts in brackets) or
	// the socket's path.
	Addr string
	// Host is the host as written, without IPv6 brackets, or the socket's
	// path. It is resolved only when the proxy dials.
	Host string
	// Port is the TCP port, 0 for a unix socket.
	Port int
	// Weight is the server's weight (> 0), used by ketama and modula.
	Weight int
	// Name is twemproxy's node name, the input of ketama's points and the
	// server's key in the stats JSON: the explicit name after the space if
	// the line has one; else, in a pool with sentinels, the master name;
	// else the host alone when the port is 11211
	// (libmemcached compatibility); else "host:port" as written. A unix
	// socket without a name is named "path:", with a trailing colon, as in
	// twemproxy.
	Name string
	// Line is the line of the server in the source, for messages.
	Line int
}

// Pool returns the pool called name, or nil.
func (c *Config) Pool(name string) *Pool {
	for _, p := range c.Pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// SortedServers returns a copy of p.Servers in twemproxy's order: by Name,
// shorter names first, names of equal length by their bytes. That order, not
// the file's, gives servers their index for modula and random and their order
// in the stats JSON.
func (p *Pool) SortedServers() []Server {
	s := slices.Clone(p.Servers)
	slices.SortStableFunc(s, func(a, b Server) int { return compareNames(a.Name, b.Name) })
	return s
}

// compareNames orders names the way twemproxy's string_compare does: by
// length, then by bytes.
func compareNames(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
