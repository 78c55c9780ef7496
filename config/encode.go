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

// marshalOrder is the order Marshal writes a pool's keys in: twemproxy's
// (as its conf_commands lists them), then the shardproxy extensions, the
// TLS and ACL keys, the Sentinel keys, and the two lists last. How each
// key is written, and when it is left out, is in its entry of poolKeys;
// TestMarshalOrderHasEveryKey keeps this list and poolKeys in step.
var marshalOrder = []string{
	"listen", "hash", "hash_tag", "distribution", "timeout", "backlog",
	"client_connections", "redis", "redis_auth", "redis_db", "preconnect",
	"auto_eject_hosts", "server_connections", "server_retry_timeout",
	"server_failure_limit", "health_check_interval", "health_check_timeout",
	"tcpkeepalive", "reuseport",

	"item_size_max", "max_request_line", "flush_all", "redis_flushall",
	"redis_config", "redis_cluster_view", "redis_scripts", "connect_timeout", "hash_seed", "eject_policy",
	"failover_pool", "lua", "lua_arg", "lua_dirs", "listen_tags", "lua_timeout", "lua_max_alloc",
	"lua_internal_cache", "server_protocol", "default_version",
	"near_cache", "near_cache_ttl", "near_cache_fill", "near_cache_hot", "delete_spool", "read_from",
	"redis_cluster", "cluster_refresh", "active_req_limit",
	"buffer_memory_limit", "max_keys", "blocking_connections",
	"slowlog_threshold", "slowlog_max_len", "hot_keys",

	"redis_auth_user", "tls_cert", "tls_key", "tls_client_ca",
	"server_tls", "server_tls_ca", "server_tls_cert", "server_tls_key",
	"server_tls_server_name", "server_tls_skip_verify",

	"sentinels", "sentinel_auth", "sentinel_auth_user",

	"route", "servers_from", "servers", "replicas",
}

// node returns the pool's mapping: each key of marshalOrder that its
// poolKey does not omit, with the value its poolKey encodes.
func (p *Pool) node() *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, key := range marshalOrder {
		k := poolKeys[key]
		if k.omit == nil || !k.omit(p) {
			m.Content = append(m.Content, str(key), k.value(p))
		}
	}
	return m
}

// The conditions some keys are written on.

// notCluster: a redis_cluster pool refuses the hashing keys.
func notCluster(p *Pool) bool { return !p.RedisCluster }

// isCluster: only a redis_cluster pool reads cluster_refresh.
func isCluster(p *Pool) bool { return p.RedisCluster }

// hasNearCache: the near cache's keys say nothing without one.
func hasNearCache(p *Pool) bool { return p.NearCache > 0 }

// serverTLS: the keys of TLS to the servers say nothing without it.
func serverTLS(p *Pool) bool { return p.ServerTLS }

// withSentinels: the Sentinel keys say nothing without Sentinels.
func withSentinels(p *Pool) bool { return len(p.Sentinels) > 0 }

// defaultItemSizeMax is the item_size_max of a pool that sets none.
func defaultItemSizeMax(redis bool) int {
	if redis {
		return DefaultRedisItemSizeMax
	}
	return DefaultItemSizeMax
}

// serversNode is the servers list.
func serversNode(p *Pool) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range p.Servers {
		seq.Content = append(seq.Content, str(s.text()))
	}
	return seq
}

// replicasNode is the replicas list.
func replicasNode(p *Pool) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, r := range p.Replicas {
		seq.Content = append(seq.Content, str(r.text()))
	}
	return seq
}

// sentinelsNode is the sentinels list.
func sentinelsNode(p *Pool) *yaml.Node { return strList(p.Sentinels) }

// strList is a list of strings.
func strList(list []string) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range list {
		seq.Content = append(seq.Content, str(s))
	}
	return seq
}

// text is the replicas line that reads back as r.
func (r Replica) text() string {
	return r.Addr + ":" + strconv.Itoa(r.Weight) + " " + r.Shard
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
	fmt.Fprintf(h, "%q %q %v\n", p.LuaMore, p.LuaDirs, p.ListenTags)
	fmt.Fprintf(h, "%d %d %q %t %t %t %q\n", p.LuaMaxAlloc, p.LuaInternalCache, p.DefaultVersion, p.AllowRedisFlushAll, p.AllowRedisConfig, p.RedisClusterView, p.RedisScripts)
	fmt.Fprintf(h, "%d %d %q %t\n", p.NearCache, p.NearCacheTTL, p.NearCacheFill, p.NearCacheHot)
	fmt.Fprintf(h, "%d %d %d %d\n", p.ActiveReqLimit, p.BufferMemoryLimit, p.MaxKeys, p.BlockingConnections)
	fmt.Fprintf(h, "%d %d\n", p.HealthCheckInterval, p.HealthCheckTimeout)
	fmt.Fprintf(h, "%d %d %d\n", p.SlowlogThreshold, p.SlowlogMaxLen, p.HotKeys)
	fmt.Fprintf(h, "%t %q %d\n", p.RedisCluster, p.ReadFrom, p.ClusterRefresh)
	fmt.Fprintf(h, "%q %q %q %q\n", p.RedisAuthUser, p.TLSCert, p.TLSKey, p.TLSClientCA)
	fmt.Fprintf(h, "%t %q %q %q %q %t\n", p.ServerTLS, p.ServerTLSCA, p.ServerTLSCert, p.ServerTLSKey,
		p.ServerTLSServerName, p.ServerTLSSkipVerify)
	fmt.Fprintf(h, "%q %q %q\n", p.Sentinels, p.SentinelAuth, p.SentinelAuthUser)
	if p.Route != nil {
		fmt.Fprintf(h, "route %+v %+v %+v %+v %q\n", p.Route.Migrate, p.Route.WarmUp, p.Route.Shadow, p.Route.Failover, p.Route.Pool)
	}
	if p.ServersFrom != nil {
		fmt.Fprintf(h, "servers_from %s\n", p.ServersFrom)
	}
	if ds := p.DeleteSpool; ds != nil {
		fmt.Fprintf(h, "delete_spool %q %d %q %d\n", ds.Path, ds.MaxBytes, ds.Fsync, ds.FsyncInterval)
	}
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
