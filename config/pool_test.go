package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// IsSet of a parsed pool says whether the file has the key, whatever its
// value, while the field always holds the value in use.
func TestIsSetParsed(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		key   string
		set   bool
		value func(p *Pool) any
		want  any
	}{
		{"absent", pool(""), "server_retry_timeout", false,
			func(p *Pool) any { return p.ServerRetryTimeout }, DefaultServerRetryTimeout},
		{"set to its default", pool("  server_retry_timeout: 30000\n"), "server_retry_timeout", true,
			func(p *Pool) any { return p.ServerRetryTimeout }, DefaultServerRetryTimeout},
		{"set to another value", pool("  server_retry_timeout: 5\n"), "server_retry_timeout", true,
			func(p *Pool) any { return p.ServerRetryTimeout }, 5 * time.Millisecond},
		{"explicit zero", pool("  server_failure_limit: 0\n"), "server_failure_limit", true,
			func(p *Pool) any { return p.ServerFailureLimit }, 0},
		{"connect_timeout absent follows timeout", pool("  timeout: 400\n"), "connect_timeout", false,
			func(p *Pool) any { return p.ConnectTimeout }, 400 * time.Millisecond},
		{"connect_timeout absent, no timeout", pool(""), "connect_timeout", false,
			func(p *Pool) any { return p.ConnectTimeout }, DefaultConnectTimeout},
		{"connect_timeout set to its default", pool("  connect_timeout: 1000\n"), "connect_timeout", true,
			func(p *Pool) any { return p.ConnectTimeout }, DefaultConnectTimeout},
		{"timeout -1", pool("  timeout: -1\n"), "timeout", true,
			func(p *Pool) any { return p.Timeout }, time.Duration(0)},
		{"hash set to its default", pool("  hash: fnv1a_64\n"), "hash", true,
			func(p *Pool) any { return p.Hash }, DefaultHash},
		{"false bool", pool("  redis: false\n"), "redis", true,
			func(p *Pool) any { return p.Redis }, false},
		{"flush_all absent", pool(""), "flush_all", false,
			func(p *Pool) any { return p.AllowFlushAll }, DefaultFlushAll},
		{"redis item size absent", pool("  redis: true\n"), "item_size_max", false,
			func(p *Pool) any { return p.ItemSizeMax }, DefaultRedisItemSizeMax},
		{"cluster read_from absent", clusterPool(""), "read_from", false,
			func(p *Pool) any { return p.ReadFrom }, DefaultReadFrom},
		{"cluster read_from set to its default", clusterPool("  read_from: master\n"), "read_from", true,
			func(p *Pool) any { return p.ReadFrom }, DefaultReadFrom},
		{"cluster_refresh absent", clusterPool(""), "cluster_refresh", false,
			func(p *Pool) any { return p.ClusterRefresh }, DefaultClusterRefresh},
		{"lua pool has lua", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n", "lua", true,
			func(p *Pool) any { return p.Lua }, "r.lua"},
		{"lua list", "alpha:\n  listen: 127.0.0.1:1\n  lua:\n    - a.lua\n    - b.lua\n    - c.lua\n", "lua", true,
			func(p *Pool) any { return p.Lua + " " + strings.Join(p.LuaMore, " ") }, "a.lua b.lua c.lua"},
		{"listen_tags", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  listen_tags:\n    b: 127.0.0.1:2\n    cccc: 127.0.0.1:3\n", "listen_tags", true,
			func(p *Pool) any { return fmt.Sprint(p.ListenTags) }, "[{b {tcp 127.0.0.1:2 ----------}} {cccc {tcp 127.0.0.1:3 ----------}}]"},
		{"lua_dirs one", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_dirs: /tmp\n", "lua_dirs", true,
			func(p *Pool) any { return strings.Join(p.LuaDirs, " ") }, "/tmp"},
		{"lua_dirs list", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_dirs:\n    - /tmp\n    - modes\n", "lua_dirs", true,
			func(p *Pool) any { return strings.Join(p.LuaDirs, " ") }, "/tmp modes"},
		{"lua_arg absent", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n", "lua_arg", false,
			func(p *Pool) any { return p.LuaArg }, ""},
		{"lua_arg", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_arg: a:b_2\n", "lua_arg", true,
			func(p *Pool) any { return p.LuaArg }, "a:b_2"},
		{"lua_arg a number is its text", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_arg: 5\n", "lua_arg", true,
			func(p *Pool) any { return p.LuaArg }, "5"},
		{"lua_timeout absent", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n", "lua_timeout", false,
			func(p *Pool) any { return p.LuaTimeout }, DefaultLuaTimeout},
		{"lua_timeout", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_timeout: 1500\n", "lua_timeout", true,
			func(p *Pool) any { return p.LuaTimeout }, 1500 * time.Millisecond},
		{"lua_max_alloc absent", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n", "lua_max_alloc", false,
			func(p *Pool) any { return p.LuaMaxAlloc }, DefaultLuaMaxAlloc},
		{"lua_max_alloc", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_max_alloc: 32\n", "lua_max_alloc", true,
			func(p *Pool) any { return p.LuaMaxAlloc }, 32},
		{"lua_internal_cache absent", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n", "lua_internal_cache", false,
			func(p *Pool) any { return p.LuaInternalCache }, DefaultLuaInternalCache},
		{"lua_internal_cache", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  lua_internal_cache: 8\n", "lua_internal_cache", true,
			func(p *Pool) any { return p.LuaInternalCache }, 8},
		{"native pool has no lua_timeout", pool(""), "lua_timeout", false,
			func(p *Pool) any { return p.LuaTimeout }, time.Duration(0)},
		{"lua pool has no servers", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n", "servers", false,
			func(p *Pool) any { return len(p.Servers) }, 0},
		{"security key", pool("  server_tls: true\n  server_tls_skip_verify: false\n"), "server_tls_skip_verify", true,
			func(p *Pool) any { return p.ServerTLSSkipVerify }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.text).Pools[0]
			if got := p.IsSet(tt.key); got != tt.set {
				t.Errorf("IsSet(%q) = %v, want %v", tt.key, got, tt.set)
			}
			if got := tt.value(p); got != tt.want {
				t.Errorf("%s = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

// A copy of a parsed pool answers as the file did, whatever the copy holds.
func TestIsSetCopy(t *testing.T) {
	p := mustParse(t, pool("  timeout: 0\n")).Pools[0]
	q := *p
	q.Timeout, q.Backlog = time.Second, 0
	if !q.IsSet("timeout") || q.IsSet("backlog") || !q.IsSet("listen") {
		t.Errorf("copy: timeout %v backlog %v listen %v", q.IsSet("timeout"), q.IsSet("backlog"), q.IsSet("listen"))
	}
}

// builtKeys sets, in a Pool built in Go, the field of each key to something
// other than its zero value.
var builtKeys = map[string]func(p *Pool){
	"servers_from":          func(p *Pool) { p.ServersFrom = &ServersFrom{DNS: "x"} },
	"delete_spool":          func(p *Pool) { p.DeleteSpool = &DeleteSpool{Path: "x"} },
	"listen":                func(p *Pool) { p.Listen = Listen{Network: "tcp", Addr: ":1"} },
	"timeout":               func(p *Pool) { p.Timeout = time.Second },
	"backlog":               func(p *Pool) { p.Backlog = 1 },
	"client_connections":    func(p *Pool) { p.ClientConnections = 1 },
	"redis":                 func(p *Pool) { p.Redis = true },
	"redis_auth":            func(p *Pool) { p.RedisAuth = "pw" },
	"redis_db":              func(p *Pool) { p.RedisDB = 1 },
	"preconnect":            func(p *Pool) { p.Preconnect = true },
	"auto_eject_hosts":      func(p *Pool) { p.AutoEjectHosts = true },
	"server_connections":    func(p *Pool) { p.ServerConnections = 1 },
	"server_retry_timeout":  func(p *Pool) { p.ServerRetryTimeout = time.Second },
	"health_check_interval": func(p *Pool) { p.HealthCheckInterval = 2 * time.Second },
	"health_check_timeout":  func(p *Pool) { p.HealthCheckTimeout = 2 * time.Second },
	"server_failure_limit":  func(p *Pool) { p.ServerFailureLimit = 1 },
	"tcpkeepalive":          func(p *Pool) { p.TCPKeepalive = true },
	"reuseport":             func(p *Pool) { p.Reuseport = true },
	"servers":               func(p *Pool) { p.Servers = []Server{{Addr: "h:1"}} },
	"item_size_max":         func(p *Pool) { p.ItemSizeMax = 1 },
	"max_request_line":      func(p *Pool) { p.MaxRequestLine = 1 },
	"flush_all":             func(p *Pool) { p.AllowFlushAll = true },
	"redis_flushall":        func(p *Pool) { p.AllowRedisFlushAll = true },
	"redis_config":          func(p *Pool) { p.AllowRedisConfig = true },
	"redis_cluster_view":    func(p *Pool) { p.RedisClusterView = true },
	"redis_scripts":         func(p *Pool) { p.RedisScripts = RedisScriptsDedicated },
	"connect_timeout":       func(p *Pool) { p.ConnectTimeout = time.Second },
	"eject_policy":          func(p *Pool) { p.EjectPolicy = EjectFailFast },
	"failover_pool":         func(p *Pool) { p.FailoverPool = "b" },
	"active_req_limit":      func(p *Pool) { p.ActiveReqLimit = 1 },
	"buffer_memory_limit":   func(p *Pool) { p.BufferMemoryLimit = 1 },
	"max_keys":              func(p *Pool) { p.MaxKeys = 1 },
	"default_version":       func(p *Pool) { p.DefaultVersion = "1.4.0" },
	"slowlog_threshold":     func(p *Pool) { p.SlowlogThreshold = time.Second },
	"slowlog_max_len":       func(p *Pool) { p.SlowlogMaxLen = 1 },
	"hot_keys":              func(p *Pool) { p.HotKeys = 1 },
	"blocking_connections":  func(p *Pool) { p.BlockingConnections = 1 },

	"hash":            func(p *Pool) { p.Hash = "md5" },
	"hash_tag":        func(p *Pool) { p.HashTag = "{}" },
	"distribution":    func(p *Pool) { p.Distribution = "modula" },
	"hash_seed":       func(p *Pool) { p.HashSeed = 1 },
	"server_protocol": func(p *Pool) { p.ServerProtocol = ServerProtocolMeta },
	"near_cache":      func(p *Pool) { p.NearCache = 1 },
	"near_cache_ttl":  func(p *Pool) { p.NearCacheTTL = time.Second },
	"near_cache_fill": func(p *Pool) { p.NearCacheFill = NearCacheFillGetGets },
	"near_cache_hot":  func(p *Pool) { p.NearCacheHot = true },

	"redis_cluster":   func(p *Pool) { p.RedisCluster = true },
	"read_from":       func(p *Pool) { p.ReadFrom = ReadFromReplica },
	"replicas":        func(p *Pool) { p.Replicas = []Replica{{Addr: "127.0.0.1:1"}} },
	"cluster_refresh": func(p *Pool) { p.ClusterRefresh = time.Second },

	"lua":                func(p *Pool) { p.Lua = "r.lua" },
	"lua_arg":            func(p *Pool) { p.LuaArg = "hello" },
	"lua_dirs":           func(p *Pool) { p.LuaDirs = []string{"/etc/routes"} },
	"listen_tags":        func(p *Pool) { p.ListenTags = []TaggedListen{{Tag: "b", Listen: Listen{Network: "tcp", Addr: ":2"}}} },
	"lua_timeout":        func(p *Pool) { p.LuaTimeout = time.Second },
	"lua_max_alloc":      func(p *Pool) { p.LuaMaxAlloc = 64 },
	"lua_internal_cache": func(p *Pool) { p.LuaInternalCache = 8 },

	"redis_auth_user":        func(p *Pool) { p.RedisAuthUser = "u" },
	"tls_cert":               func(p *Pool) { p.TLSCert = "c" },
	"tls_key":                func(p *Pool) { p.TLSKey = "k" },
	"tls_client_ca":          func(p *Pool) { p.TLSClientCA = "ca" },
	"server_tls":             func(p *Pool) { p.ServerTLS = true },
	"server_tls_ca":          func(p *Pool) { p.ServerTLSCA = "ca" },
	"server_tls_cert":        func(p *Pool) { p.ServerTLSCert = "c" },
	"server_tls_key":         func(p *Pool) { p.ServerTLSKey = "k" },
	"server_tls_server_name": func(p *Pool) { p.ServerTLSServerName = "n" },
	"server_tls_skip_verify": func(p *Pool) { p.ServerTLSSkipVerify = true },
	"sentinels":              func(p *Pool) { p.Sentinels = []string{"s:1"} },
	"sentinel_auth":          func(p *Pool) { p.SentinelAuth = "a" },
	"sentinel_auth_user":     func(p *Pool) { p.SentinelAuthUser = "u" },
	"route":                  func(p *Pool) { p.Route = &Route{Pool: "p"} },
}

// In a Pool built in Go a key is set when its field is not zero, and each
// key looks at its own field only.
func TestIsSetBuilt(t *testing.T) {
	for key := range poolKeys {
		if builtKeys[key] == nil {
			t.Errorf("pool key %s has no row in builtKeys", key)
		}
	}
	for key, set := range builtKeys {
		t.Run(key, func(t *testing.T) {
			if (&Pool{}).IsSet(key) {
				t.Errorf("a zero Pool sets %s", key)
			}
			p := &Pool{}
			set(p)
			for other := range poolKeys {
				if got := p.IsSet(other); got != (other == key) {
					t.Errorf("after setting %s, IsSet(%s) = %v", key, other, got)
				}
			}
		})
	}
}

func TestIsSetUnknownKey(t *testing.T) {
	for _, p := range []*Pool{{}, mustParse(t, pool("")).Pools[0]} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), `"server_retry_timout"`) {
					t.Errorf("IsSet of a misspelt key: recovered %v, want a panic naming it", r)
				}
			}()
			p.IsSet("server_retry_timout")
		}()
	}
}

// Each kind of pool checks its own keys and those of the other kinds, with
// the messages it always had; "" means the pool is valid.
func TestPoolKinds(t *testing.T) {
	const at = `config: testdata/x.yml:`
	luaPool := func(extra string) string { return "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n" + extra }
	tests := []struct {
		name, text, want string
	}{
		{"native", pool("  hash: murmur3\n  hash_seed: 9\n  server_protocol: meta\n  redis_cluster: false\n"), ""},
		{"native read_from", pool("  read_from: replica\n"),
			at + `3: pool "alpha": read_from: is only valid for a redis pool (redis: true)`},
		{"native hash_seed without effect", pool("  hash_seed: 1\n"),
			at + `3: pool "alpha": hash_seed: has no effect with hash fnv1a_64 and distribution ketama; it seeds the hashes xxhash, murmur3, xxh3 and the distribution random`},
		{"native redis meta", pool("  redis: true\n  server_protocol: meta\n"),
			at + `4: pool "alpha": server_protocol: meta is only valid for a memcache pool`},

		{"cluster", clusterPool("  read_from: replica\n  redis_db: 0\n  auto_eject_hosts: false\n  server_protocol: text\n"), ""},
		{"cluster distribution", clusterPool("  distribution: ketama\n"),
			at + `5: pool "alpha": distribution: does not apply to a redis_cluster pool: a key goes to the node serving its slot (CRC16 of the key or of its {hash tag}), as the cluster's slot map says`},
		{"cluster meta", clusterPool("  server_protocol: meta\n"),
			at + `5: pool "alpha": server_protocol: meta is only valid for a memcache pool`},
		{"cluster lua", "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_cluster: true\n  lua: r.lua\n",
			at + `5: pool "alpha": lua: a redis_cluster pool cannot be routed by Lua`},
		{"cluster lua and servers", clusterPool("  lua: r.lua\n"),
			at + `5: pool "alpha": lua: a Lua pool defines its backends in its route file; remove servers`},

		{"lua ignores the hashing keys", luaPool("  hash: md5\n  hash_tag: \"{}\"\n  distribution: modula\n  server_protocol: text\n"), ""},
		{"lua with ejection", luaPool("  auto_eject_hosts: true\n  eject_policy: fail_fast\n"), ""},
		{"lua hash_seed without effect", luaPool("  hash_seed: 1\n"),
			at + `4: pool "alpha": hash_seed: has no effect with hash fnv1a_64 and distribution ketama; it seeds the hashes xxhash, murmur3, xxh3 and the distribution random`},
		{"lua meta", luaPool("  server_protocol: meta\n"), ""},
		{"lua empty", "alpha:\n  listen: 127.0.0.1:1\n  lua: \"\"\n",
			at + `3: pool "alpha": lua: must be the path of a Lua route file, or a list of them`},
		{"lua_dirs a mapping", luaPool("  lua_dirs:\n    a: b\n"),
			at + `5: pool "alpha": lua_dirs: must be a directory, or a list of directories`},
		{"listen_tags tag too long", luaPool("  listen_tags:\n    abcdefghi: 127.0.0.1:2\n"),
			at + `5: pool "alpha": listen_tags: must be a mapping of listener tags (1 to 8 characters) to listen addresses`},
		{"listen_tags bad address", luaPool("  listen_tags:\n    b: nowhere\n"),
			at + `5: pool "alpha": listen_tags: b: "nowhere" has no port; want "host:port" or "/path/to/socket [perm]"`},
		{"listen_tags on a native pool", pool("  listen_tags:\n    b: 127.0.0.1:2\n"),
			at + `3: pool "alpha": listen_tags: is only valid for a Lua pool (lua: FILE)`},
		{"lua_dirs on a native pool", pool("  lua_dirs: /tmp\n"),
			at + `3: pool "alpha": lua_dirs: is only valid for a Lua pool (lua: FILE)`},
		{"lua redis meta", luaPool("  redis: true\n  server_protocol: meta\n"),
			at + `5: pool "alpha": server_protocol: meta is only valid for a memcache pool`},
		{"lua cluster_refresh", luaPool("  cluster_refresh: 500\n"),
			at + `4: pool "alpha": cluster_refresh: is only valid for a redis_cluster pool (redis_cluster: true)`},
		{"lua server_tls", luaPool("  server_tls: true\n"),
			at + `4: pool "alpha": server_tls: a Lua pool's backends come from its route file, which cannot use TLS yet`},
		{"lua server_tls false", luaPool("  server_tls: false\n"), ""},
		{"lua_arg", luaPool("  lua_arg: hello\n"), ""},
		{"lua_arg empty", luaPool("  lua_arg: \"\"\n"),
			at + `4: pool "alpha": lua_arg: must be a non-empty string (leave the key out for mcp.start_arg false)`},
		{"lua_arg a list", luaPool("  lua_arg:\n    - a\n"),
			at + `5: pool "alpha": lua_arg: must be a single value, not a list`},
		{"lua_timeout", luaPool("  lua_timeout: 250\n"), ""},
		{"lua_timeout zero", luaPool("  lua_timeout: 0\n"),
			at + `4: pool "alpha": lua_timeout: 0 is out of range [1, 2147483647]`},
		{"lua_max_alloc zero", luaPool("  lua_max_alloc: 0\n"),
			at + `4: pool "alpha": lua_max_alloc: 0 is out of range [1, 1048576]`},
		{"cluster lua_max_alloc", clusterPool("  lua_max_alloc: 8\n"),
			at + `5: pool "alpha": lua_max_alloc: is only valid for a Lua pool (lua: FILE)`},
		{"native lua_timeout", pool("  lua_timeout: 250\n"),
			at + `3: pool "alpha": lua_timeout: is only valid for a Lua pool (lua: FILE)`},
		{"native lua_arg", pool("  lua_arg: hello\n"),
			at + `3: pool "alpha": lua_arg: is only valid for a Lua pool (lua: FILE)`},
		{"cluster lua_arg", clusterPool("  lua_arg: hello\n"),
			at + `5: pool "alpha": lua_arg: is only valid for a Lua pool (lua: FILE)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if got := e.Error(); got != tt.want {
				t.Errorf("first error\n got %s\nwant %s\n(all: %v)", got, tt.want, err)
			}
		})
	}
}

// Every problem of a pool is reported: the rules every pool follows, then
// its kind's, then the TLS and ACL keys'.
func TestPoolKindErrorOrder(t *testing.T) {
	text := "alpha:\n  lua: r.lua\n  redis_auth: pw\n  read_from: master\n  server_tls: true\n  tls_key: k\n"
	_, err := Parse([]byte(text), src)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`config: testdata/x.yml:1: pool "alpha": listen: is missing`,
		`config: testdata/x.yml:3: pool "alpha": redis_auth: is only valid for a redis pool (redis: true)`,
		`config: testdata/x.yml:4: pool "alpha": read_from: is only valid for a sharded redis pool or a redis_cluster pool; a route file picks its own backends`,
		`config: testdata/x.yml:5: pool "alpha": server_tls: a Lua pool's backends come from its route file, which cannot use TLS yet`,
		`config: testdata/x.yml:6: pool "alpha": tls_cert: is missing; tls_key needs it`,
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPoolKind: Kind names the pool's kind from its keys, for parsed pools
// and pools built in Go alike.
func TestPoolKind(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    *Pool
		want Kind
	}{
		{"sharded", mustParse(t, pool("")).Pools[0], KindSharded},
		{"lua", mustParse(t, "p:\n  listen: 127.0.0.1:0\n  lua: routes.lua\n").Pools[0], KindLua},
		{"cluster", mustParse(t, "p:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  servers:\n    - 127.0.0.1:7000:1\n").Pools[0], KindCluster},
		{"built lua", &Pool{Lua: "r.lua"}, KindLua},
		{"built cluster", &Pool{RedisCluster: true}, KindCluster},
		{"built sharded", &Pool{}, KindSharded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Kind(); got != tt.want {
				t.Errorf("Kind() = %q, want %q", got, tt.want)
			}
		})
	}
}
