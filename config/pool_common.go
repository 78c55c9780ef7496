package config

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// commonKeys are the keys every kind of pool reads: where it listens, where
// its backends come from, the protocol, the limits and the timeouts, and
// ejection.
var commonKeys = map[string]poolKey{
	"listen": keyOf((*poolParser).setListen, func(p *Pool) *Listen { return &p.Listen }).
		encodedAs(func(p *Pool) *yaml.Node { return str(p.Listen.text()) }).
		omitIf(func(p *Pool) bool { return p.Listen == (Listen{}) }),
	"timeout": keyOf((*poolParser).setTimeout, func(p *Pool) *time.Duration { return &p.Timeout }).
		encodedAs(func(p *Pool) *yaml.Node { return num(millis(p.Timeout)) }).
		omitIf(func(p *Pool) bool { return p.Timeout <= 0 }),
	"backlog":            intKey(func(p *Pool) *int { return &p.Backlog }, 0, maxInt32),
	"client_connections": intKey(func(p *Pool) *int { return &p.ClientConnections }, 0, maxInt32),
	"redis":              boolKey(func(p *Pool) *bool { return &p.Redis }),
	"redis_auth":         stringKey(func(p *Pool) *string { return &p.RedisAuth }, anyString, ""),
	"redis_db":           intKey(func(p *Pool) *int { return &p.RedisDB }, 0, maxInt32),
	"preconnect":         boolKey(func(p *Pool) *bool { return &p.Preconnect }),
	"auto_eject_hosts":   boolKey(func(p *Pool) *bool { return &p.AutoEjectHosts }),
	"server_connections": keyOf((*poolParser).setServerConnections, func(p *Pool) *int { return &p.ServerConnections }).
		encodedAs(func(p *Pool) *yaml.Node { return num(strconv.Itoa(p.ServerConnections)) }),
	"server_retry_timeout":  msKey(func(p *Pool) *time.Duration { return &p.ServerRetryTimeout }, 0),
	"health_check_interval": msKey(func(p *Pool) *time.Duration { return &p.HealthCheckInterval }, 0, DefaultHealthCheckInterval),
	"health_check_timeout":  msKey(func(p *Pool) *time.Duration { return &p.HealthCheckTimeout }, 1, DefaultHealthCheckTimeout),
	"server_failure_limit":  intKey(func(p *Pool) *int { return &p.ServerFailureLimit }, 0, maxInt32),
	"tcpkeepalive":          boolKey(func(p *Pool) *bool { return &p.TCPKeepalive }, false),
	"reuseport":             boolKey(func(p *Pool) *bool { return &p.Reuseport }, false),
	"servers": poolKey{set: (*poolParser).setServers, given: func(p *Pool) bool { return len(p.Servers) > 0 }}.
		encodedAs(serversNode).onlyIf(func(p *Pool) bool { return len(p.Servers) > 0 }),

	"item_size_max": intKey(func(p *Pool) *int { return &p.ItemSizeMax }, 1024, 1<<30).
		omitIf(func(p *Pool) bool { return p.ItemSizeMax == defaultItemSizeMax(p.Redis) }),
	"max_request_line":   intKey(func(p *Pool) *int { return &p.MaxRequestLine }, 2048, 64<<20, DefaultMaxRequestLine),
	"flush_all":          boolKey(func(p *Pool) *bool { return &p.AllowFlushAll }, DefaultFlushAll),
	"redis_flushall":     boolKey(func(p *Pool) *bool { return &p.AllowRedisFlushAll }, false),
	"redis_config":       boolKey(func(p *Pool) *bool { return &p.AllowRedisConfig }, false),
	"redis_cluster_view": boolKey(func(p *Pool) *bool { return &p.RedisClusterView }, false),
	"redis_scripts": stringKey(func(p *Pool) *string { return &p.RedisScripts },
		oneOf("value", []string{RedisScriptsShared, RedisScriptsDedicated}), RedisScriptsShared, ""),
	"connect_timeout": msKey(func(p *Pool) *time.Duration { return &p.ConnectTimeout }, 1).
		omitIf(func(p *Pool) bool { return p.ConnectTimeout == defaultConnectTimeout(p.Timeout) }),
	"eject_policy": stringKey(func(p *Pool) *string { return &p.EjectPolicy }, checkEjectPolicy, DefaultEjectPolicy, ""),
	// failover_pool's pool is checked once every pool is read
	// (checkFailovers).
	"failover_pool":       stringKey(func(p *Pool) *string { return &p.FailoverPool }, nonEmpty("must name a pool"), ""),
	"active_req_limit":    intKey(func(p *Pool) *int { return &p.ActiveReqLimit }, 0, maxInt32, 0),
	"buffer_memory_limit": intKey(func(p *Pool) *int { return &p.BufferMemoryLimit }, 0, maxInt32, 0),
	"max_keys":            intKey(func(p *Pool) *int { return &p.MaxKeys }, 0, maxInt32, 0),
	"blocking_connections": intKey(func(p *Pool) *int { return &p.BlockingConnections }, 1, 1<<16, DefaultBlockingConnections, 0).
		onlyIf(func(p *Pool) bool { return p.Redis && p.Lua == "" }), // a Lua pool refuses it
	"default_version": stringKey(func(p *Pool) *string { return &p.DefaultVersion }, checkVersion, DefaultVersion, ""),
}

// validateCommon checks the rules every pool follows, whatever its kind.
func (pp *poolParser) validateCommon() {
	p := pp.p
	if !pp.has("listen") && !pp.b.routed[p.Name] {
		pp.fail(p.Line, "listen", "is missing")
	}
	pp.validateBackends()
	pp.validateRedisKeys()
	if line, ok := pp.keys["default_version"]; ok && p.Redis && !pp.bad["redis"] && !pp.bad["default_version"] {
		pp.fail(line, "default_version", "is only valid for a memcache pool")
	}
	if line, ok := pp.keys["blocking_connections"]; ok && !pp.bad["blocking_connections"] {
		pp.refuseRedisKey(line, "blocking_connections", !p.Redis && !pp.bad["redis"], "a Lua pool has no dedicated connections")
	}
	pp.validateEject()
	if line, ok := pp.keys["near_cache_hot"]; ok && p.NearCacheHot && p.HotKeys == 0 && !pp.bad["hot_keys"] {
		pp.fail(line, "near_cache_hot", "needs hot_keys: the near cache keeps the keys it names")
	}
}

// Values of Pool.RedisScripts: where a Redis pool's scripts run.
const (
	RedisScriptsShared    = "shared"
	RedisScriptsDedicated = "dedicated"
)

// onlyRedis is why a memcache pool refuses a Redis key.
const onlyRedis = "is only valid for a redis pool (redis: true)"

// validateRedisKeys refuses redis_auth, redis_flushall and redis_config on
// a memcache pool, and redis_config on a Lua pool.
func (pp *poolParser) validateRedisKeys() {
	p := pp.p
	notRedis := !p.Redis && !pp.bad["redis"]
	if line, ok := pp.keys["redis_auth"]; ok && p.RedisAuth != "" && notRedis {
		pp.fail(line, "redis_auth", onlyRedis)
	}
	if line, ok := pp.keys["redis_flushall"]; ok && p.AllowRedisFlushAll && notRedis {
		pp.fail(line, "redis_flushall", onlyRedis)
	}
	if line, ok := pp.keys["redis_config"]; ok && p.AllowRedisConfig {
		pp.refuseRedisKey(line, "redis_config", notRedis, "a Lua pool does not carry CONFIG")
	}
	if line, ok := pp.keys["redis_scripts"]; ok && p.RedisScripts == RedisScriptsDedicated {
		pp.refuseRedisKey(line, "redis_scripts", notRedis, "a Lua pool has no dedicated connections")
	}
	if line, ok := pp.keys["redis_cluster_view"]; ok && p.RedisClusterView {
		pp.refuseRedisKey(line, "redis_cluster_view", notRedis, "a Lua pool's route decides where keys go")
		if p.RedisCluster {
			pp.fail(line, "redis_cluster_view", "a redis_cluster pool's clients may reach the cluster's nodes themselves")
		}
	}
}

// refuseRedisKey refuses key, set on line, on a pool that is not a redis
// pool, and with whyLua on a Lua pool.
func (pp *poolParser) refuseRedisKey(line int, key string, notRedis bool, whyLua string) {
	switch {
	case notRedis:
		pp.fail(line, key, onlyRedis)
	case pp.has("lua"):
		pp.fail(line, key, whyLua)
	}
}

// validateBackends checks that the pool names its backends: a servers
// list, servers_from (with servers as the set used until the first
// answer), or a lua route file that defines them.
func (pp *poolParser) validateBackends() {
	hasServers := pp.has("servers")
	luaLine, hasLua := pp.keys["lua"]
	switch {
	case hasLua && hasServers:
		pp.fail(luaLine, "lua", "a Lua pool defines its backends in its route file; remove servers")
	case pp.has("route"):
		// a route pool's rules (checkRoutes, its kind's Validate)
	case !hasServers && !hasLua && !pp.has("servers_from"):
		pp.fail(pp.p.Line, "servers", "is missing")
	}
}

// validateEject checks eject_policy and failover_pool against
// auto_eject_hosts, and queues failover_pool for checkFailovers.
func (pp *poolParser) validateEject() {
	p := pp.p
	line, hasPool := pp.keys["failover_pool"]
	switch {
	case pp.bad["eject_policy"] || pp.bad["failover_pool"]:
	case p.EjectPolicy != EjectRemap && !p.AutoEjectHosts && !pp.bad["auto_eject_hosts"]:
		pp.fail(pp.keys["eject_policy"], "eject_policy", "needs auto_eject_hosts: true")
	case p.EjectPolicy == EjectFailover && !hasPool:
		pp.fail(pp.keys["eject_policy"], "failover_pool", "is missing; eject_policy failover needs it")
	case p.EjectPolicy != EjectFailover && hasPool:
		pp.fail(line, "failover_pool", "is only valid with eject_policy: failover")
	case hasPool && p.FailoverPool == p.Name:
		pp.fail(line, "failover_pool", "cannot name the pool itself")
	case hasPool:
		pp.b.failovers = append(pp.b.failovers, listenAt{pool: p, line: line})
	}
}

// provisionCommon fills the defaults that depend on other keys: the connect
// timeout follows timeout, and a Redis pool's item size is Redis's.
func (pp *poolParser) provisionCommon() {
	p := pp.p
	if !p.IsSet("connect_timeout") {
		p.ConnectTimeout = defaultConnectTimeout(p.Timeout)
	}
	if !p.IsSet("item_size_max") && p.Redis {
		p.ItemSizeMax = DefaultRedisItemSizeMax
	}
}

// defaultConnectTimeout is the connect timeout of a pool without
// connect_timeout.
func defaultConnectTimeout(timeout time.Duration) time.Duration {
	if timeout > 0 {
		return timeout
	}
	return DefaultConnectTimeout
}

func (pp *poolParser) setListen(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	l, msg := parseListen(s)
	if msg != "" {
		pp.fail(v.Line, key, msg)
		return
	}
	pp.p.Listen = l
	pp.b.listens = append(pp.b.listens, listenAt{pool: pp.p, line: v.Line})
}

// setTimeout also takes -1, twemproxy's internal "no timeout", though
// twemproxy's own parser refuses negative numbers.
func (pp *poolParser) setTimeout(key string, v *yaml.Node) {
	if v.Kind == yaml.ScalarNode && v.Value == "-1" {
		pp.p.Timeout = 0
		return
	}
	if n, ok := pp.integer(key, v, 0, maxInt32); ok {
		pp.p.Timeout = time.Duration(n) * time.Millisecond
	}
}

func (pp *poolParser) setServerConnections(key string, v *yaml.Node) {
	n, ok := pp.integer(key, v, 0, MaxServerConnections)
	if !ok {
		return
	}
	if n == 0 {
		pp.fail(v.Line, key, "cannot be 0")
		return
	}
	pp.p.ServerConnections = n
}

// setServers reads the servers list. Every item is checked, so one run
// reports every bad line.
func (pp *poolParser) setServers(key string, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		pp.fail(v.Line, key, "must be a list of \"host:port:weight [name]\" lines, not "+kindName(v))
		return
	}
	if len(v.Content) == 0 {
		pp.fail(v.Line, key, "is empty")
		return
	}
	names := make(map[string]int)
	pp.eachLine(key, v, "a server", "host:port:weight [name]", func(item *yaml.Node) {
		parse := parseServer
		if pp.sentinel {
			parse = parseMaster
		}
		s, msg := parse(item.Value)
		if msg != "" {
			pp.fail(item.Line, key, msg)
			return
		}
		if line, dup := names[s.Name]; dup {
			pp.fail(item.Line, key, fmt.Sprintf("duplicate server name %q (first at line %d)", s.Name, line))
			return
		}
		names[s.Name] = item.Line
		s.Line = item.Line
		pp.p.Servers = append(pp.p.Servers, s)
	})
}

// eachLine calls read for each item of v, a list of one-line entries
// (servers, replicas), that is a plain scalar; an item that is not is
// reported as what ("a server") in the form its line takes.
func (pp *poolParser) eachLine(key string, v *yaml.Node, what, form string, read func(item *yaml.Node)) {
	for _, item := range v.Content {
		if !pp.b.plain(item, pp.p.Name, key) {
			pp.bad[key] = true
			continue
		}
		if item.Kind != yaml.ScalarNode {
			pp.fail(item.Line, key, what+" must be one \""+form+"\" line, not "+kindName(item))
			continue
		}
		read(item)
	}
}

// refuseKeys refuses each of keys the pool sets (and has not already
// refused) with why, unless the key that would allow them, allowedBy, was
// itself refused ("" for none).
func (pp *poolParser) refuseKeys(keys []string, allowedBy, why string) {
	for _, key := range keys {
		if line, ok := pp.keys[key]; ok && !pp.bad[key] && (allowedBy == "" || !pp.bad[allowedBy]) {
			pp.fail(line, key, why)
		}
	}
}

// checkEjectPolicy wants eject_policy: remap, fail_fast or failover.
func checkEjectPolicy(s string) string {
	switch s {
	case EjectRemap, EjectFailFast, EjectFailover:
		return ""
	}
	return fmt.Sprintf("unknown policy %q; want %s, %s or %s", s, EjectRemap, EjectFailFast, EjectFailover)
}

// checkVersion wants a version as memcached prints it, which clients parse
// as major.minor.patch: three dot-separated numbers, then at most a suffix
// of printable characters without spaces ("1.6.18", "1.4.5-beta"), 64
// bytes at most.
func checkVersion(s string) string {
	const why = " is not a version such as 1.6.18 (major.minor.patch, no spaces)"
	if len(s) > 64 {
		return fmt.Sprintf("%.20q...", s) + why
	}
	rest := s
	for i := range 3 {
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 0 || (i < 2 && (n == len(rest) || rest[n] != '.')) {
			return fmt.Sprintf("%q", s) + why
		}
		rest = rest[n:]
		if i < 2 {
			rest = rest[1:]
		}
	}
	for _, c := range []byte(rest) {
		if c <= ' ' || c >= 0x7f {
			return fmt.Sprintf("%q", s) + why
		}
	}
	return ""
}

// readMapping reads v, the mapping of key's own keys (servers_from,
// delete_spool), each a single value its setter in sets takes into dst,
// returning the refusal's words or "". Each problem is reported naming key
// and the inner key, at its line (an unknown key's message lists want),
// so one run reports all of them. It returns the line of each key taken,
// and false when anything was refused.
func readMapping[T any](pp *poolParser, key string, v *yaml.Node, want string, sets map[string]func(T, *yaml.Node) string, dst T) (seen map[string]int, ok bool) {
	seen, ok = map[string]int{}, true
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if !pp.b.plain(k, pp.p.Name, key) || !pp.b.plain(val, pp.p.Name, key) {
			pp.bad[key], ok = true, false
			continue
		}
		msg := ""
		set, known := sets[k.Value]
		switch {
		case k.Kind != yaml.ScalarNode || !known:
			msg = fmt.Sprintf("unknown key %q; want %s", k.Value, want)
		case seen[k.Value] != 0:
			msg = fmt.Sprintf("%s: duplicate key (first at line %d)", k.Value, seen[k.Value])
		case val.Kind != yaml.ScalarNode:
			msg = k.Value + ": must be a single value, not " + kindName(val)
		default:
			seen[k.Value] = k.Line
			if msg = set(dst, val); msg != "" {
				msg = k.Value + ": " + msg
			}
		}
		if msg != "" {
			pp.fail(k.Line, key, msg)
			ok = false
		}
	}
	return seen, ok
}
