package config

import (
	"fmt"
	"slices"
	"time"

	"gopkg.in/yaml.v3"
)

// poolParser reads one pool's mapping.
type poolParser struct {
	b    *builder
	p    *Pool
	keys map[string]int  // key -> line where it was set
	bad  map[string]bool // keys whose value was rejected
}

// setter reads the value of one pool key into the pool.
type setter func(pp *poolParser, key string, v *yaml.Node)

// poolKeys are the keys a pool may have: twemproxy's (src/nc_conf.c
// conf_commands, with tcpkeepalive and reuseport of later versions), then the
// shardproxy extensions.
var poolKeys = map[string]setter{
	"listen":               (*poolParser).setListen,
	"hash":                 (*poolParser).setHash,
	"hash_tag":             (*poolParser).setHashTag,
	"distribution":         (*poolParser).setDistribution,
	"timeout":              (*poolParser).setTimeout,
	"backlog":              intSetter(func(p *Pool) *int { return &p.Backlog }, 0, maxInt32),
	"client_connections":   intSetter(func(p *Pool) *int { return &p.ClientConnections }, 0, maxInt32),
	"redis":                boolSetter(func(p *Pool) *bool { return &p.Redis }),
	"redis_auth":           (*poolParser).setRedisAuth,
	"redis_db":             intSetter(func(p *Pool) *int { return &p.RedisDB }, 0, maxInt32),
	"preconnect":           boolSetter(func(p *Pool) *bool { return &p.Preconnect }),
	"auto_eject_hosts":     boolSetter(func(p *Pool) *bool { return &p.AutoEjectHosts }),
	"server_connections":   (*poolParser).setServerConnections,
	"server_retry_timeout": msSetter(func(p *Pool) *time.Duration { return &p.ServerRetryTimeout }, 0),
	"server_failure_limit": intSetter(func(p *Pool) *int { return &p.ServerFailureLimit }, 0, maxInt32),
	"tcpkeepalive":         boolSetter(func(p *Pool) *bool { return &p.TCPKeepalive }),
	"reuseport":            boolSetter(func(p *Pool) *bool { return &p.Reuseport }),
	"servers":              (*poolParser).setServers,

	"item_size_max":       intSetter(func(p *Pool) *int { return &p.ItemSizeMax }, 1024, 1<<30),
	"max_request_line":    intSetter(func(p *Pool) *int { return &p.MaxRequestLine }, 2048, 64<<20),
	"flush_all":           boolSetter(func(p *Pool) *bool { return &p.AllowFlushAll }),
	"connect_timeout":     msSetter(func(p *Pool) *time.Duration { return &p.ConnectTimeout }, 1),
	"hash_seed":           (*poolParser).setHashSeed,
	"eject_policy":        (*poolParser).setEjectPolicy,
	"failover_pool":       (*poolParser).setFailoverPool,
	"lua":                 (*poolParser).setLua,
	"active_req_limit":    intSetter(func(p *Pool) *int { return &p.ActiveReqLimit }, 0, maxInt32),
	"buffer_memory_limit": intSetter(func(p *Pool) *int { return &p.BufferMemoryLimit }, 0, maxInt32),
	"max_keys":            intSetter(func(p *Pool) *int { return &p.MaxKeys }, 0, maxInt32),
	"redis_cluster":       boolSetter(func(p *Pool) *bool { return &p.RedisCluster }),
	"read_from":           (*poolParser).setReadFrom,
	"cluster_refresh":     msSetter(func(p *Pool) *time.Duration { return &p.ClusterRefresh }, 100),
	"redis_auth_user":     (*poolParser).setRedisAuthUser,
	"server_protocol":     (*poolParser).setServerProtocol,

	"tls_cert":               pathSetter(func(p *Pool) *string { return &p.TLSCert }),
	"tls_key":                pathSetter(func(p *Pool) *string { return &p.TLSKey }),
	"tls_client_ca":          pathSetter(func(p *Pool) *string { return &p.TLSClientCA }),
	"server_tls":             boolSetter(func(p *Pool) *bool { return &p.ServerTLS }),
	"server_tls_ca":          pathSetter(func(p *Pool) *string { return &p.ServerTLSCA }),
	"server_tls_cert":        pathSetter(func(p *Pool) *string { return &p.ServerTLSCert }),
	"server_tls_key":         pathSetter(func(p *Pool) *string { return &p.ServerTLSKey }),
	"server_tls_server_name": (*poolParser).setServerTLSServerName,
	"server_tls_skip_verify": boolSetter(func(p *Pool) *bool { return &p.ServerTLSSkipVerify }),
}

// pool reads the pool called name, whose name is on line; it returns nil
// when the value is not a mapping.
func (b *builder) pool(name string, line int, n *yaml.Node) *Pool {
	if !b.plain(n, name, "") {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		b.errs.add(n.Line, name, "", "must be a mapping of keys such as listen and servers, not "+kindName(n))
		return nil
	}
	pp := &poolParser{b: b, p: newPool(name, line), keys: make(map[string]int), bad: make(map[string]bool)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		pp.entry(n.Content[i], n.Content[i+1])
	}
	pp.finish()
	return pp.p
}

// newPool returns a pool holding every default.
func newPool(name string, line int) *Pool {
	return &Pool{
		Name:               name,
		Line:               line,
		Hash:               DefaultHash,
		Distribution:       DefaultDistribution,
		Backlog:            DefaultBacklog,
		ServerConnections:  DefaultServerConnections,
		ServerRetryTimeout: DefaultServerRetryTimeout,
		ServerFailureLimit: DefaultServerFailureLimit,
		ItemSizeMax:        DefaultItemSizeMax,
		MaxRequestLine:     DefaultMaxRequestLine,
		AllowFlushAll:      DefaultFlushAll,
		EjectPolicy:        DefaultEjectPolicy,
		ServerProtocol:     DefaultServerProtocol,
	}
}

// entry reads one "key: value" of the pool.
func (pp *poolParser) entry(k, v *yaml.Node) {
	if !pp.b.plain(k, pp.p.Name, "") {
		return
	}
	if k.Kind != yaml.ScalarNode {
		pp.b.errs.add(k.Line, pp.p.Name, "", "a key must be a single value, not "+kindName(k))
		return
	}
	key := k.Value
	if line, dup := pp.keys[key]; dup {
		pp.fail(k.Line, key, fmt.Sprintf("duplicate key (first at line %d)", line))
		return
	}
	pp.keys[key] = k.Line
	set, ok := poolKeys[key]
	if !ok {
		pp.fail(k.Line, key, "unknown key")
		return
	}
	if !pp.b.plain(v, pp.p.Name, key) {
		pp.bad[key] = true
		return
	}
	set(pp, key, v)
}

// fail records a problem with key's value.
func (pp *poolParser) fail(line int, key, msg string) {
	pp.bad[key] = true
	pp.b.errs.add(line, pp.p.Name, key, msg)
}

// scalar returns v's text; twemproxy reads every value as its text, quoted
// or not.
func (pp *poolParser) scalar(key string, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		pp.fail(v.Line, key, "must be a single value, not "+kindName(v))
		return "", false
	}
	return v.Value, true
}

// integer reads a decimal number within [min, max].
func (pp *poolParser) integer(key string, v *yaml.Node, min, max int) (int, bool) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return 0, false
	}
	if !allDigits(s) {
		pp.fail(v.Line, key, fmt.Sprintf("%q is not a number", s))
		return 0, false
	}
	n, ok := parseDecimal(s, min, max)
	if !ok {
		pp.fail(v.Line, key, fmt.Sprintf("%s is out of range [%d, %d]", s, min, max))
	}
	return n, ok
}

// intSetter sets an int field from a number within [min, max].
func intSetter(field func(*Pool) *int, min, max int) setter {
	return func(pp *poolParser, key string, v *yaml.Node) {
		if n, ok := pp.integer(key, v, min, max); ok {
			*field(pp.p) = n
		}
	}
}

// msSetter sets a duration field from a number of milliseconds >= min.
func msSetter(field func(*Pool) *time.Duration, min int) setter {
	return func(pp *poolParser, key string, v *yaml.Node) {
		if n, ok := pp.integer(key, v, min, maxInt32); ok {
			*field(pp.p) = time.Duration(n) * time.Millisecond
		}
	}
}

// boolSetter sets a bool field from exactly true or false, as twemproxy's
// conf_set_bool does (no yes/no/on/off).
func boolSetter(field func(*Pool) *bool) setter {
	return func(pp *poolParser, key string, v *yaml.Node) {
		s, ok := pp.scalar(key, v)
		if !ok {
			return
		}
		switch s {
		case "true":
			*field(pp.p) = true
		case "false":
			*field(pp.p) = false
		default:
			pp.fail(v.Line, key, fmt.Sprintf("%q is not true or false", s))
		}
	}
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

func (pp *poolParser) setHash(key string, v *yaml.Node) {
	if s, ok := pp.scalar(key, v); ok {
		if !slices.Contains(hashes, s) {
			pp.fail(v.Line, key, fmt.Sprintf("unknown hash %q", s))
			return
		}
		pp.p.Hash = s
	}
}

func (pp *poolParser) setDistribution(key string, v *yaml.Node) {
	if s, ok := pp.scalar(key, v); ok {
		if !slices.Contains(distributions, s) {
			pp.fail(v.Line, key, fmt.Sprintf("unknown distribution %q", s))
			return
		}
		pp.p.Distribution = s
	}
}

// setHashTag takes two bytes, as twemproxy's conf_set_hashtag checks the
// length in bytes and the tag is matched byte by byte.
func (pp *poolParser) setHashTag(key string, v *yaml.Node) {
	if s, ok := pp.scalar(key, v); ok {
		if len(s) != 2 {
			pp.fail(v.Line, key, fmt.Sprintf("%q is not exactly 2 characters (bytes), such as \"{}\"", s))
			return
		}
		pp.p.HashTag = s
	}
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

func (pp *poolParser) setRedisAuth(key string, v *yaml.Node) {
	if s, ok := pp.scalar(key, v); ok {
		pp.p.RedisAuth = s
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

func (pp *poolParser) setHashSeed(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	n, ok := parseSeed(s)
	if !ok {
		pp.fail(v.Line, key, fmt.Sprintf("%q is not a number from 0 to 2^64-1 (decimal or 0x hex)", s))
		return
	}
	pp.p.HashSeed = n
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
	for _, item := range v.Content {
		if !pp.b.plain(item, pp.p.Name, key) {
			pp.bad[key] = true
			continue
		}
		if item.Kind != yaml.ScalarNode {
			pp.fail(item.Line, key, "a server must be one \"host:port:weight [name]\" line, not "+kindName(item))
			continue
		}
		s, msg := parseServer(item.Value)
		if msg != "" {
			pp.fail(item.Line, key, msg)
			continue
		}
		if line, dup := names[s.Name]; dup {
			pp.fail(item.Line, key, fmt.Sprintf("duplicate server name %q (first at line %d)", s.Name, line))
			continue
		}
		names[s.Name] = item.Line
		s.Line = item.Line
		pp.p.Servers = append(pp.p.Servers, s)
	}
}

// finish checks what involves several keys and fills the derived defaults.
func (pp *poolParser) finish() {
	p := pp.p
	if _, ok := pp.keys["listen"]; !ok {
		pp.fail(p.Line, "listen", "is missing")
	}
	_, hasServers := pp.keys["servers"]
	luaLine, hasLua := pp.keys["lua"]
	switch {
	case hasLua && hasServers:
		pp.fail(luaLine, "lua", "a Lua pool defines its backends in its route file; remove servers")
	case !hasServers && !hasLua:
		pp.fail(p.Line, "servers", "is missing")
	}
	if line, ok := pp.keys["redis_auth"]; ok && p.RedisAuth != "" && !p.Redis && !pp.bad["redis"] {
		pp.fail(line, "redis_auth", "is only valid for a redis pool (redis: true)")
	}
	if line, ok := pp.keys["hash_seed"]; ok && p.HashSeed != 0 && !p.RedisCluster && !pp.bad["hash"] && !pp.bad["distribution"] &&
		!slices.Contains(seededHashes, p.Hash) && p.Distribution != "random" {
		pp.fail(line, "hash_seed", fmt.Sprintf("has no effect with hash %s and distribution %s; "+
			"it seeds the hashes xxhash, murmur3, xxh3 and the distribution random", p.Hash, p.Distribution))
	}
	if _, ok := pp.keys["connect_timeout"]; !ok {
		p.ConnectTimeout = defaultConnectTimeout(p.Timeout)
	}
	if _, ok := pp.keys["item_size_max"]; !ok && p.Redis {
		p.ItemSizeMax = DefaultRedisItemSizeMax
	}
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
	if line, ok := pp.keys["server_protocol"]; ok && p.ServerProtocol == ServerProtocolMeta {
		switch {
		case p.Redis && !pp.bad["redis"]:
			pp.fail(line, "server_protocol", "meta is only valid for a memcache pool")
		case hasLua:
			pp.fail(line, "server_protocol", "a Lua pool's routes send requests as they are; remove server_protocol")
		}
	}
	pp.finishCluster()
	pp.finishSecurity()
}

// clusterRefused are the keys a redis_cluster pool refuses: the cluster's
// slot map, not the proxy, decides where keys go.
var clusterRefused = []string{"hash", "hash_tag", "distribution", "hash_seed"}

// finishCluster checks the keys of a redis_cluster pool, and that other
// pools do not use its keys.
func (pp *poolParser) finishCluster() {
	p := pp.p
	if !p.RedisCluster {
		for _, key := range []string{"read_from", "cluster_refresh"} {
			if line, ok := pp.keys[key]; ok && !pp.bad[key] && !pp.bad["redis_cluster"] {
				pp.fail(line, key, "is only valid for a redis_cluster pool (redis_cluster: true)")
			}
		}
		return
	}
	line := pp.keys["redis_cluster"]
	if !p.Redis && !pp.bad["redis"] {
		pp.fail(line, "redis_cluster", "needs redis: true")
	}
	for _, key := range clusterRefused {
		if l, ok := pp.keys[key]; ok {
			pp.fail(l, key, "does not apply to a redis_cluster pool: a key goes to the node serving its slot "+
				"(CRC16 of the key or of its {hash tag}), as the cluster's slot map says")
		}
	}
	if l, ok := pp.keys["auto_eject_hosts"]; ok && p.AutoEjectHosts {
		pp.fail(l, "auto_eject_hosts", "does not apply to a redis_cluster pool: the cluster fails over by itself")
	}
	if l, ok := pp.keys["redis_db"]; ok && p.RedisDB != 0 {
		pp.fail(l, "redis_db", "a Redis Cluster has database 0 only")
	}
	if l, ok := pp.keys["lua"]; ok {
		pp.fail(l, "lua", "a redis_cluster pool cannot be routed by Lua")
	}
	for _, s := range p.Servers {
		if s.Network != "tcp" {
			pp.fail(s.Line, "servers", fmt.Sprintf("%q: a cluster seed must be host:port", s.Name))
		}
	}
	if p.ReadFrom == "" {
		p.ReadFrom = DefaultReadFrom
	}
	if p.ClusterRefresh == 0 {
		p.ClusterRefresh = DefaultClusterRefresh
	}
}

// setReadFrom reads read_from: master, prefer_replica or replica.
func (pp *poolParser) setReadFrom(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	switch s {
	case ReadFromMaster, ReadFromPreferReplica, ReadFromReplica:
		pp.p.ReadFrom = s
	default:
		pp.fail(v.Line, key, fmt.Sprintf("unknown value %q; want %s, %s or %s", s,
			ReadFromMaster, ReadFromPreferReplica, ReadFromReplica))
	}
}

// setServerProtocol reads server_protocol: text or meta.
func (pp *poolParser) setServerProtocol(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	switch s {
	case ServerProtocolText, ServerProtocolMeta:
		pp.p.ServerProtocol = s
	default:
		pp.fail(v.Line, key, fmt.Sprintf("unknown value %q; want %s or %s", s, ServerProtocolText, ServerProtocolMeta))
	}
}

// setLua reads lua, the path of a route file.
func (pp *poolParser) setLua(key string, v *yaml.Node) {
	if s, ok := pp.scalar(key, v); ok {
		if s == "" {
			pp.fail(v.Line, key, "must be the path of a Lua route file")
			return
		}
		pp.p.Lua = s
	}
}

// setEjectPolicy reads eject_policy: remap, fail_fast or failover.
func (pp *poolParser) setEjectPolicy(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	switch s {
	case EjectRemap, EjectFailFast, EjectFailover:
		pp.p.EjectPolicy = s
	default:
		pp.fail(v.Line, key, fmt.Sprintf("unknown policy %q; want %s, %s or %s", s, EjectRemap, EjectFailFast, EjectFailover))
	}
}

// setFailoverPool reads failover_pool; the pool it names is checked once
// every pool is read (checkFailovers).
func (pp *poolParser) setFailoverPool(key string, v *yaml.Node) {
	if s, ok := pp.scalar(key, v); ok {
		if s == "" {
			pp.fail(v.Line, key, "must name a pool")
			return
		}
		pp.p.FailoverPool = s
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
