package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// sentinelKeys are the keys of a sharded redis pool whose servers are
// Sentinel master names. The other kinds refuse them (PoolCheck.RefuseSentinelKeys).
var sentinelKeys = map[string]poolKey{
	"sentinels": poolKey{set: (*poolParser).setSentinels, given: func(p *Pool) bool { return len(p.Sentinels) > 0 }}.
		encodedAs(sentinelsNode).onlyIf(withSentinels),
	"sentinel_auth":      stringKey(func(p *Pool) *string { return &p.SentinelAuth }, anyString, "").onlyIf(withSentinels),
	"sentinel_auth_user": stringKey(func(p *Pool) *string { return &p.SentinelAuthUser }, checkRedisAuthUser, "").onlyIf(withSentinels),
}

var sentinelOnly = []string{"sentinels", "sentinel_auth", "sentinel_auth_user"}

// masterForms is how a servers line of a pool with sentinels is written.
const masterForms = `want "master:weight [name]" (a Sentinel master name, its weight, an optional shard name)`

// hasSentinels reports whether the pool's mapping n has a sentinels key,
// which changes how its servers lines read, wherever the key stands.
func hasSentinels(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "sentinels" {
			return true
		}
	}
	return false
}

// setSentinels reads the list of Sentinel addresses, "host:port" each.
func (pp *poolParser) setSentinels(key string, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		pp.fail(v.Line, key, `must be a non-empty list of "host:port" Sentinel addresses`)
		return
	}
	seen := map[string]bool{}
	for _, item := range v.Content {
		if !pp.b.plain(item, pp.p.Name, key) {
			pp.bad[key] = true
			continue
		}
		addr, msg := "", "must be \"host:port\", not "+kindName(item)
		if item.Kind == yaml.ScalarNode {
			addr, msg = parseSentinelAddr(item.Value)
		}
		switch {
		case msg != "":
			pp.fail(item.Line, key, msg)
		case seen[addr]:
			pp.fail(item.Line, key, fmt.Sprintf("duplicate sentinel %q", item.Value))
		default:
			seen[addr] = true
			pp.p.Sentinels = append(pp.p.Sentinels, addr)
		}
	}
}

// parseSentinelAddr reads "host:port".
func parseSentinelAddr(s string) (string, string) {
	host, port, ok := cutLast(s, ':')
	if !ok {
		return "", fmt.Sprintf("%q has no port; want \"host:port\"", s)
	}
	n, ok := parsePort(port)
	if !ok {
		return "", fmt.Sprintf("invalid port %q in %q; want 1 to 65535", port, s)
	}
	h, ok := parseHost(host, false)
	if !ok {
		return "", fmt.Sprintf("invalid host %q in %q", host, s)
	}
	return net.JoinHostPort(h, strconv.Itoa(n)), ""
}

// parseMaster reads one servers line of a pool with sentinels,
// "master:weight [name]": the master name as the Sentinels know it, its
// weight, and the shard's name (the master name when absent), which
// places keys as a server's name does. It returns a message on failure.
func parseMaster(s string) (Server, string) {
	body, name, hasName := cutLast(s, ' ')
	if !hasName {
		body = s
	} else if name == "" {
		return Server{}, fmt.Sprintf("empty name after the space in %q", s)
	}
	master, weight, ok := cutLast(body, ':')
	if !ok {
		return Server{}, fmt.Sprintf("%q has no weight; %s", s, masterForms)
	}
	if master == "" || strings.ContainsAny(master, ": \t") || strings.ContainsFunc(master, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return Server{}, fmt.Sprintf("invalid master name %q in %q; %s", master, s, masterForms)
	}
	w, ok := parseDecimal(weight, 1, maxInt32)
	if !ok {
		return Server{}, fmt.Sprintf("invalid weight %q in %q; want an integer > 0", weight, s)
	}
	if !hasName {
		name = master
	}
	return Server{Network: "sentinel", Master: master, Weight: w, Name: name}, ""
}
