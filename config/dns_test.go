package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// dnsPool is a memcache pool taking its servers from DNS; body is the
// servers_from mapping's lines, indented four spaces.
func dnsPool(body string) string {
	return "alpha:\n  listen: 127.0.0.1:22121\n  servers_from:\n" + body
}

func TestServersFrom(t *testing.T) {
	tests := []struct {
		name, text string
		want       ServersFrom
	}{
		{"srv defaults", dnsPool("    dns: _memcache._tcp.cache.example.\n"),
			ServersFrom{DNS: "_memcache._tcp.cache.example", Type: DNSTypeSRV, Interval: DefaultDNSInterval,
				MaxChange: DefaultDNSMaxChange, MaxServers: DefaultDNSMaxServers, Line: 3}},
		{"a with everything", dnsPool("    dns: cache.example\n    type: a\n    port: 11211\n    interval: 100\n" +
			"    resolver: 127.0.0.1:5353\n    max_change: 1\n    max_servers: 3\n"),
			ServersFrom{DNS: "cache.example", Type: DNSTypeA, Port: 11211, Interval: 100 * time.Millisecond,
				Resolver: "127.0.0.1:5353", MaxChange: 1, MaxServers: 3, Line: 3}},
		{"aaaa", dnsPool("    dns: cache.example\n    type: AAAA\n    port: 6379\n    resolver: \"[::1]:53\"\n") + "  redis: true\n",
			ServersFrom{DNS: "cache.example", Type: DNSTypeAAAA, Port: 6379, Interval: DefaultDNSInterval,
				Resolver: "[::1]:53", MaxChange: DefaultDNSMaxChange, MaxServers: DefaultDNSMaxServers, Line: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.text)
			p := c.Pools[0]
			if p.ServersFrom == nil || *p.ServersFrom != tt.want {
				t.Fatalf("ServersFrom = %+v, want %+v", p.ServersFrom, tt.want)
			}
			if len(p.Servers) != 0 || !p.IsSet("servers_from") {
				t.Errorf("servers %v, set %v", p.Servers, p.IsSet("servers_from"))
			}
			again, text := roundTrip(t, c)
			if again.Pools[0].Checksum() != p.Checksum() {
				t.Errorf("round trip changed the pool:\n%s", text)
			}
		})
	}
}

// A Lua pool may take servers_from: its route file reads the answer.
func TestServersFromLua(t *testing.T) {
	c := mustParse(t, "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  servers_from:\n    dns: x\n")
	if p := c.Pools[0]; p.Kind() != KindLua || p.ServersFrom == nil {
		t.Fatalf("pool %+v", p)
	}
}

// servers beside servers_from are the set used until the first answer.
func TestServersFromWithServers(t *testing.T) {
	c := mustParse(t, dnsPool("    dns: _mc._tcp.example\n")+"  servers:\n   - 127.0.0.1:11211:1\n")
	if p := c.Pools[0]; len(p.Servers) != 1 || p.ServersFrom == nil {
		t.Fatalf("pool %+v", p)
	}
}

func TestServersFromErrors(t *testing.T) {
	const at = `config: testdata/x.yml:`
	tests := []struct{ name, text, want string }{
		{"not a mapping", "alpha:\n  listen: 127.0.0.1:1\n  servers_from: x\n",
			at + `3: pool "alpha": servers_from: must be a mapping with dns (and type, port, interval, resolver, max_change, max_servers), not a single value`},
		{"no dns", dnsPool("    interval: 1000\n"), at + `3: pool "alpha": servers_from: dns is missing: the name to resolve`},
		{"unknown key", dnsPool("    dns: x\n    ttl: 3\n"),
			at + `5: pool "alpha": servers_from: unknown key "ttl"; want dns, type, port, interval, resolver, max_change or max_servers`},
		{"duplicate", dnsPool("    dns: x\n    dns: y\n"), at + `5: pool "alpha": servers_from: dns: duplicate key (first at line 4)`},
		{"bad type", dnsPool("    dns: x\n    type: MX\n"), at + `5: pool "alpha": servers_from: type: unknown type "MX"; want SRV, A or AAAA`},
		{"a without port", dnsPool("    dns: x\n    type: A\n"),
			at + `3: pool "alpha": servers_from: port is missing: type A records carry no port`},
		{"srv with port", dnsPool("    dns: x\n    port: 1\n"),
			at + `5: pool "alpha": servers_from: port: an SRV record names its port; port is for type A or AAAA`},
		{"below floor", dnsPool("    dns: x\n    interval: 99\n"),
			at + `5: pool "alpha": servers_from: interval: 99 ms is below the floor of 100 ms`},
		{"bad interval", dnsPool("    dns: x\n    interval: soon\n"), at + `5: pool "alpha": servers_from: interval: "soon" is not a number`},
		{"bad resolver", dnsPool("    dns: x\n    resolver: 10.0.0.1\n"),
			at + `5: pool "alpha": servers_from: resolver: "10.0.0.1" has no port; want "host:port of a DNS server"`},
		{"max_change 0", dnsPool("    dns: x\n    max_change: 0\n"),
			at + `5: pool "alpha": servers_from: max_change: "0" is not a share above 0 and at most 1 (0.5: half the servers)`},
		{"max_servers", dnsPool("    dns: x\n    max_servers: 0\n"), at + `5: pool "alpha": servers_from: max_servers: 0 is out of range [1, 4096]`},
		{"bad name", dnsPool("    dns: \"a b\"\n"), at + `4: pool "alpha": servers_from: dns: "a b" is not a DNS name`},
		{"list value", dnsPool("    dns:\n     - a\n"), at + `4: pool "alpha": servers_from: dns: must be a single value, not a list`},
		{"sentinels", "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  sentinels:\n   - h:1\n  servers:\n   - m:1\n  servers_from:\n    dns: x\n",
			at + `8: pool "alpha": servers_from: does not apply to a pool with sentinels: its servers lines name Sentinel masters`},
		{"cluster", "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_cluster: true\n  servers_from:\n    dns: x\n",
			at + `5: pool "alpha": servers_from: is only valid for a sharded pool; a redis_cluster pool learns its nodes from the slot map`},
		{"lua with servers", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  servers_from:\n    dns: x\n  servers:\n   - 127.0.0.1:1:1\n",
			at + `3: pool "alpha": lua: a Lua pool defines its backends in its route file; remove servers`},
		{"neither", "alpha:\n  listen: 127.0.0.1:1\n",
			at + `1: pool "alpha": servers: is missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
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

func TestParseServerLine(t *testing.T) {
	s, err := ParseServerLine("10.0.0.1:11211:1 mc-0.mc.cache.svc")
	if err != nil || s.Addr != "10.0.0.1:11211" || s.Name != "mc-0.mc.cache.svc" || s.Weight != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	if s, _ := ParseServerLine("10.0.0.1:11211:1"); s.Name != "10.0.0.1" {
		t.Errorf("name %q, want the host alone at 11211", s.Name)
	}
	if _, err := ParseServerLine("10.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "no port") {
		t.Errorf("err %v", err)
	}
}
