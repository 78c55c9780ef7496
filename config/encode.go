package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Marshal returns c as nutcracker.yml text: pools in c's order, twemproxy
// keys always written except those at an empty or zero value (timeout,
// hash_tag, redis_auth, tcpkeepalive, reuseport), shardproxy extensions only
// where they differ from their defaults, so a Config using none of them reads
// back in twemproxy. Durations are written in whole milliseconds. A Config
// from Parse reads back to one with equal values (line numbers aside), not
// with the same Pool.IsSet answers: an always-written twemproxy key reads
// back as set, an extension key set to its default as absent. Marshal does
// not validate a Config built by hand.
func (c *Config) Marshal() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, p := range c.Pools {
		root.Content = append(root.Content, str(p.Name), p.node())
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return buf.Bytes(), nil
}

// node returns the pool's mapping.
func (p *Pool) node() *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, v *yaml.Node) { m.Content = append(m.Content, str(key), v) }
	add("listen", str(p.Listen.text()))
	if !p.RedisCluster { // a cluster pool refuses them
		add("hash", str(p.Hash))
		if p.HashTag != "" {
			add("hash_tag", str(p.HashTag))
		}
		add("distribution", str(p.Distribution))
	}
	if p.Timeout > 0 {
		add("timeout", num(millis(p.Timeout)))
	}
	add("backlog", num(strconv.Itoa(p.Backlog)))
	add("client_connections", num(strconv.Itoa(p.ClientConnections)))
	add("redis", boolean(p.Redis))
	if p.RedisAuth != "" {
		add("redis_auth", str(p.RedisAuth))
	}
	add("redis_db", num(strconv.Itoa(p.RedisDB)))
	add("preconnect", boolean(p.Preconnect))
	add("auto_eject_hosts", boolean(p.AutoEjectHosts))
	add("server_connections", num(strconv.Itoa(p.ServerConnections)))
	add("server_retry_timeout", num(millis(p.ServerRetryTimeout)))
	add("server_failure_limit", num(strconv.Itoa(p.ServerFailureLimit)))
	if p.HealthCheckInterval != DefaultHealthCheckInterval {
		add("health_check_interval", num(millis(p.HealthCheckInterval)))
	}
	if p.HealthCheckTimeout != DefaultHealthCheckTimeout {
		add("health_check_timeout", num(millis(p.HealthCheckTimeout)))
	}
	if p.TCPKeepalive {
		add("tcpkeepalive", boolean(true))
	}
	if p.Reuseport {
		add("reuseport", boolean(true))
	}
	if def := DefaultItemSizeMax; p.Redis && p.ItemSizeMax != DefaultRedisItemSizeMax || !p.Redis && p.ItemSizeMax != def {
		add("item_size_max", num(strconv.Itoa(p.ItemSizeMax)))
	}
	if p.MaxRequestLine != DefaultMaxRequestLine {
		add("max_request_line", num(strconv.Itoa(p.MaxRequestLine)))
	}
	if !p.AllowFlushAll { // DefaultFlushAll is true
		add("flush_all", boolean(false))
	}
	if p.AllowRedisFlushAll {
		add("redis_flushall", boolean(true))
	}
	if p.AllowRedisConfig {
		add("redis_config", boolean(true))
	}
	if p.ConnectTimeout != defaultConnectTimeout(p.Timeout) {
		add("connect_timeout", num(millis(p.ConnectTimeout)))
	}
	if p.HashSeed != 0 {
		add("hash_seed", num(strconv.FormatUint(p.HashSeed, 10)))
	}
	if p.EjectPolicy != DefaultEjectPolicy && p.EjectPolicy != "" {
		add("eject_policy", str(p.EjectPolicy))
	}
	if p.FailoverPool != "" {
		add("failover_pool", str(p.FailoverPool))
	}
	if p.Lua != "" {
		add("lua", str(p.Lua))
	}
	if p.LuaArg != "" {
		add("lua_arg", str(p.LuaArg))
	}
	if p.LuaTimeout != DefaultLuaTimeout && p.LuaTimeout != 0 {
		add("lua_timeout", num(millis(p.LuaTimeout)))
	}
	if p.LuaMaxAlloc != DefaultLuaMaxAlloc && p.LuaMaxAlloc != 0 {
		add("lua_max_alloc", num(strconv.Itoa(p.LuaMaxAlloc)))
	}
	if p.LuaInternalCache != DefaultLuaInternalCache && p.LuaInternalCache != 0 {
		add("lua_internal_cache", num(strconv.Itoa(p.LuaInternalCache)))
	}
	if p.ServerProtocol != DefaultServerProtocol && p.ServerProtocol != "" && !(p.Kind() == KindLua && p.ServerProtocol == ServerProtocolText) {
		add("server_protocol", str(p.ServerProtocol))
	}
	if p.DefaultVersion != DefaultVersion && p.DefaultVersion != "" {
		add("default_version", str(p.DefaultVersion))
	}
	if p.NearCache > 0 {
		add("near_cache", num(strconv.Itoa(p.NearCache)))
		if p.NearCacheTTL != DefaultNearCacheTTL && p.NearCacheTTL != 0 {
			add("near_cache_ttl", num(strconv.FormatInt(int64(p.NearCacheTTL/time.Second), 10)))
		}
		if p.NearCacheFill != DefaultNearCacheFill && p.NearCacheFill != "" {
			add("near_cache_fill", str(p.NearCacheFill))
		}
	}
	if p.ReadFrom != DefaultReadFrom && p.ReadFrom != "" {
		add("read_from", str(p.ReadFrom))
	}
	if p.RedisCluster {
		add("redis_cluster", boolean(true))
		if p.ClusterRefresh != DefaultClusterRefresh && p.ClusterRefresh != 0 {
			add("cluster_refresh", num(millis(p.ClusterRefresh)))
		}
	}
	for _, kv := range []struct {
		key string
		v   int
	}{{"active_req_limit", p.ActiveReqLimit}, {"buffer_memory_limit", p.BufferMemoryLimit}, {"max_keys", p.MaxKeys}} {
		if kv.v != 0 {
			add(kv.key, num(strconv.Itoa(kv.v)))
		}
	}
	if p.Redis && p.Lua == "" && p.BlockingConnections != DefaultBlockingConnections && p.BlockingConnections != 0 {
		add("blocking_connections", num(strconv.Itoa(p.BlockingConnections)))
	}
	p.addSecurity(add)
	p.addSentinel(add)
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range p.Servers {
		seq.Content = append(seq.Content, str(s.text()))
	}
	if len(seq.Content) > 0 {
		add("servers", seq)
	}
	if len(p.Replicas) > 0 {
		reps := &yaml.Node{Kind: yaml.SequenceNode}
		for _, r := range p.Replicas {
			reps.Content = append(reps.Content, str(r.text()))
		}
		add("replicas", reps)
	}
	return m
}

// text is the replicas line that reads back as r.
func (r Replica) text() string {
	return r.Addr + ":" + strconv.Itoa(r.Weight) + " " + r.Shard
}

// addSecurity adds the ACL and TLS keys that are set, in the order of the
// README's table.
func (p *Pool) addSecurity(add func(string, *yaml.Node)) {
	for _, kv := range []struct{ key, v string }{
		{"redis_auth_user", p.RedisAuthUser},
		{"tls_cert", p.TLSCert}, {"tls_key", p.TLSKey}, {"tls_client_ca", p.TLSClientCA},
	} {
		if kv.v != "" {
			add(kv.key, str(kv.v))
		}
	}
	if !p.ServerTLS {
		return
	}
	add("server_tls", boolean(true))
	for _, kv := range []struct{ key, v string }{
		{"server_tls_ca", p.ServerTLSCA}, {"server_tls_cert", p.ServerTLSCert},
		{"server_tls_key", p.ServerTLSKey}, {"server_tls_server_name", p.ServerTLSServerName},
	} {
		if kv.v != "" {
			add(kv.key, str(kv.v))
		}
	}
	if p.ServerTLSSkipVerify {
		add("server_tls_skip_verify", boolean(true))
	}
}

// addSentinel adds the Sentinel keys that are set.
func (p *Pool) addSentinel(add func(string, *yaml.Node)) {
	if len(p.Sentinels) == 0 {
		return
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range p.Sentinels {
		seq.Content = append(seq.Content, str(s))
	}
	add("sentinels", seq)
	if p.SentinelAuth != "" {
		add("sentinel_auth", str(p.SentinelAuth))
	}
	if p.SentinelAuthUser != "" {
		add("sentinel_auth_user", str(p.SentinelAuthUser))
	}
}

// text is the listen value that parses back to l. A path with a space needs
// the permission field, even 0000, or its last word would be read as one.
func (l Listen) text() string {
	if l.Network == "unix" && (l.Perm != 0 || strings.Contains(l.Addr, " ")) {
		return fmt.Sprintf("%s %04o", l.Addr, uint32(l.Perm))
	}
	return l.Addr
}

// text is the servers line that parses back to s: the name is written only
// when it differs from the one twemproxy would derive.
func (s Server) text() string {
	if s.Network == "sentinel" {
		line := s.Master + ":" + strconv.Itoa(s.Weight)
		if s.Name != s.Master {
			line += " " + s.Name
		}
		return line
	}
	line, port := s.Host+":", ""
	if s.Network != "unix" {
		port = strconv.Itoa(s.Port)
		line += port + ":"
	}
	line += strconv.Itoa(s.Weight)
	if s.Name != nodeName(s.Host, port, s.Port) {
		line += " " + s.Name
	}
	return line
}

// Checksum returns a hex SHA-256 of everything that defines the pool (its
// name, listen, keys and servers in order), leaving out line numbers and
// which keys were set (Pool.IsSet), which Marshal does not keep. Two pools
// with equal checksums behave the same as long as nothing reads IsSet, so a
// reload can keep an unchanged pool's listener and server connections.
func (p *Pool) Checksum() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %o\n", p.Name, p.Listen.Network, p.Listen.Addr, uint32(p.Listen.Perm))
	fmt.Fprintf(h, "%q %q %q %d %d %d\n", p.Hash, p.HashTag, p.Distribution, p.Timeout, p.Backlog, p.ClientConnections)
	fmt.Fprintf(h, "%t %q %d %t %t\n", p.Redis, p.RedisAuth, p.RedisDB, p.Preconnect, p.AutoEjectHosts)
	fmt.Fprintf(h, "%d %d %d %t %t\n", p.ServerConnections, p.ServerRetryTimeout, p.ServerFailureLimit, p.TCPKeepalive, p.Reuseport)
	fmt.Fprintf(h, "%d %d %t %d %d\n", p.ItemSizeMax, p.MaxRequestLine, p.AllowFlushAll, p.ConnectTimeout, p.HashSeed)
	fmt.Fprintf(h, "%q %q %q %q %q %d\n", p.EjectPolicy, p.FailoverPool, p.Lua, p.LuaArg, p.ServerProtocol, p.LuaTimeout)
	fmt.Fprintf(h, "%d %d %q %t %t\n", p.LuaMaxAlloc, p.LuaInternalCache, p.DefaultVersion, p.AllowRedisFlushAll, p.AllowRedisConfig)
	fmt.Fprintf(h, "%d %d %q\n", p.NearCache, p.NearCacheTTL, p.NearCacheFill)
	fmt.Fprintf(h, "%d %d %d %d\n", p.ActiveReqLimit, p.BufferMemoryLimit, p.MaxKeys, p.BlockingConnections)
	fmt.Fprintf(h, "%d %d\n", p.HealthCheckInterval, p.HealthCheckTimeout)
	fmt.Fprintf(h, "%t %q %d\n", p.RedisCluster, p.ReadFrom, p.ClusterRefresh)
	fmt.Fprintf(h, "%q %q %q %q\n", p.RedisAuthUser, p.TLSCert, p.TLSKey, p.TLSClientCA)
	fmt.Fprintf(h, "%t %q %q %q %q %t\n", p.ServerTLS, p.ServerTLSCA, p.ServerTLSCert, p.ServerTLSKey,
		p.ServerTLSServerName, p.ServerTLSSkipVerify)
	fmt.Fprintf(h, "%q %q %q\n", p.Sentinels, p.SentinelAuth, p.SentinelAuthUser)
	for _, s := range p.Servers {
		fmt.Fprintf(h, "%q %q %q %d %d %q %q\n", s.Network, s.Addr, s.Host, s.Port, s.Weight, s.Name, s.Master)
	}
	for _, r := range p.Replicas {
		fmt.Fprintf(h, "replica %q %q %q %d %d %q\n", r.Network, r.Addr, r.Host, r.Port, r.Weight, r.Shard)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// str is a string scalar; the encoder quotes it when YAML would read it as
// something else.
func str(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.ContainsAny(s, "\n\r") {
		// yaml.v3 writes such strings as block scalars, and loses a
		// leading line break on the way ("\n0" reads back "0"): quoted,
		// every byte survives.
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// num is an integer scalar.
func num(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s} }

// boolean is a true/false scalar.
func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

// millis formats a duration as whole milliseconds.
func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
