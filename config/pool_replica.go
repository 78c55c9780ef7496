package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// replicaKeys are the keys that send a Redis pool's reads to replicas:
// read_from (a redis_cluster pool or a sharded redis pool) and replicas (a
// sharded redis pool). A Lua pool and a memcache pool refuse both
// (PoolCheck.RefuseReplicaKeys, shard/config.go).
var replicaKeys = map[string]poolKey{
	"read_from": stringKey(func(p *Pool) *string { return &p.ReadFrom }, checkReadFrom, DefaultReadFrom, ""),
	"replicas": poolKey{set: (*poolParser).setReplicas, given: func(p *Pool) bool { return len(p.Replicas) > 0 }}.
		encodedAs(replicasNode).onlyIf(func(p *Pool) bool { return len(p.Replicas) > 0 }),
}

// replicaOnly are the replica keys, which the pools that may not read
// from replicas refuse.
var replicaOnly = []string{"read_from", "replicas"}

// replicaForms is how a replicas line is written.
const replicaForms = `want "host:port[:weight] shard" or "/path/to/socket[:weight] shard" (shard: a servers line's name or address)`

// Replica is one line of a sharded redis pool's replicas list: a server
// that replicates one shard and may serve its reads (see Pool.ReadFrom).
type Replica struct {
	// Network is "tcp" or "unix".
	Network string
	// Addr is the address to dial: "host:port" (IPv6 hosts in brackets)
	// or the socket's path. It is also the replica's name in the stats.
	Addr string
	// Host is the host as written, without IPv6 brackets, or the path.
	Host string
	// Port is the TCP port, 0 for a unix socket.
	Port int
	// Weight is the replica's share of its shard's reads among the
	// shard's replicas (> 0; 1 when the line has none).
	Weight int
	// Shard is the Name of the servers line the replica belongs to. The
	// line may name it by its name or by its address as written
	// ("host:port" or "host:port:weight"); Parse stores the name.
	Shard string
	// Line is the line of the replica in the source, for messages.
	Line int
}

// setReplicas reads the replicas list; shards are matched to servers by
// the sharded kind's rules (shard/config.go), once every key is read.
func (pp *poolParser) setReplicas(key string, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		pp.fail(v.Line, key, "must be a non-empty list of \"host:port[:weight] shard\" lines")
		return
	}
	pp.eachLine(key, v, "a replica", "host:port[:weight] shard", func(item *yaml.Node) {
		r, msg := parseReplica(item.Value)
		if msg != "" {
			pp.fail(item.Line, key, msg)
			return
		}
		r.Line = item.Line
		pp.p.Replicas = append(pp.p.Replicas, r)
	})
}

// parseReplica reads one replicas line, "host:port[:weight] shard": the
// address as a servers line writes it, its weight optional, and the shard
// after the last space, with no other space. A host:port with two colons
// outside brackets has a weight; an IPv6 host without a weight must be in
// brackets.
func parseReplica(s string) (Replica, string) {
	body, shard, ok := cutLast(s, ' ')
	if !ok || shard == "" {
		return Replica{}, fmt.Sprintf("%q names no shard; %s", s, replicaForms)
	}
	if body == "" {
		return Replica{}, fmt.Sprintf("%q has no address; %s", s, replicaForms)
	}
	// The address is one word. parseServer would read a space in it as
	// the start of a servers line's name and drop that word, accepting a
	// line such as "h:1:2 x one" as if it read "h:1:2 one".
	if strings.Contains(body, " ") {
		return Replica{}, fmt.Sprintf("%q has more than an address and a shard; %s", s, replicaForms)
	}
	if !hasWeight(body) {
		body += ":1"
	}
	srv, msg := parseServer(body)
	if msg != "" {
		return Replica{}, strings.Replace(msg, serverForms, replicaForms, 1)
	}
	return Replica{Network: srv.Network, Addr: srv.Addr, Host: srv.Host, Port: srv.Port, Weight: srv.Weight, Shard: shard}, ""
}

// hasWeight reports whether an address as a replicas line writes it ends
// in a weight: a path with a ':', a "[v6]:port:weight", a host:port:weight.
func hasWeight(addr string) bool {
	if strings.HasPrefix(addr, "/") {
		return strings.Contains(addr, ":")
	}
	if i := strings.LastIndexByte(addr, ']'); strings.HasPrefix(addr, "[") && i > 0 {
		return strings.Count(addr[i:], ":") >= 2
	}
	return strings.Count(addr, ":") >= 2
}

// checkReadFrom wants read_from: master, prefer_replica or replica.
func checkReadFrom(s string) string {
	switch s {
	case ReadFromMaster, ReadFromPreferReplica, ReadFromReplica:
		return ""
	}
	return fmt.Sprintf("unknown value %q; want %s, %s or %s", s,
		ReadFromMaster, ReadFromPreferReplica, ReadFromReplica)
}
