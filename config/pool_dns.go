package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The record types a servers_from may ask for (ServersFrom.Type).
const (
	DNSTypeSRV  = "SRV"
	DNSTypeA    = "A"
	DNSTypeAAAA = "AAAA"
)

// The defaults and bounds of servers_from.
const (
	// DefaultDNSInterval is how often a pool's DNS name is resolved
	// again (servers_from interval).
	DefaultDNSInterval = 5 * time.Second
	// MinDNSInterval is the floor of servers_from interval; a smaller
	// value is refused, not raised, so that a file never says one thing
	// and runs another. It is small so that tests and a DNS server on
	// the same host may follow changes quickly; a resolver shared by many
	// proxies wants seconds.
	MinDNSInterval = 100 * time.Millisecond
	// DefaultDNSMaxChange is the share of a pool's servers one answer may
	// change (add, remove or readdress) before it is held until it
	// repeats (servers_from max_change).
	DefaultDNSMaxChange = 0.5
	// DefaultDNSMaxServers bounds the servers an answer may list before
	// it is held until it repeats (servers_from max_servers).
	DefaultDNSMaxServers = 128
	// MaxDNSMaxServers is the highest max_servers.
	MaxDNSMaxServers = 4096
)

// ServersFrom says where a pool takes its servers from: a DNS name,
// resolved again every Interval (key servers_from, a shardproxy
// extension, a mapping). The package dnspool resolves it; the command
// hands the proxy a copy of the configuration whose Servers are the
// answer. A pool that also has servers runs them until the first answer
// (and starts on them when the name does not resolve at start). Only a
// sharded pool without sentinels may set it.
type ServersFrom struct {
	// DNS is the name asked for (key dns): an SRV name
	// ("_memcache._tcp.cache.example"), or a host name for A or AAAA.
	DNS string
	// Type is DNSTypeSRV (the default), DNSTypeA or DNSTypeAAAA (key
	// type). SRV gives one server per target, named by the target, at the
	// record's port; A and AAAA one server per address, at Port, named as
	// a servers line "address:port:1" would be.
	Type string
	// Port is the servers' port for A and AAAA (key port, required
	// there); an SRV record carries its own, and a port beside SRV is
	// refused.
	Port int
	// Interval is how often the name is resolved again (key interval, in
	// milliseconds, at least MinDNSInterval; default DefaultDNSInterval).
	Interval time.Duration
	// Resolver is the DNS server asked, "host:port" (key resolver); ""
	// means the system's (the nameservers of /etc/resolv.conf).
	Resolver string
	// MaxChange is the share of the servers, from 0 to 1, one answer may
	// change at once (key max_change, default DefaultDNSMaxChange); an
	// answer changing more is held until the next resolution gives it
	// again.
	MaxChange float64
	// MaxServers bounds the servers of an answer (key max_servers, 1 to
	// MaxDNSMaxServers, default DefaultDNSMaxServers); a longer answer is
	// held as a big change is.
	MaxServers int
	// Line is the line of the servers_from key, for messages.
	Line int
}

// dnsKeys are the keys of a pool whose servers come from DNS. The other
// kinds refuse them (PoolCheck.RefuseServersFrom).
var dnsKeys = map[string]poolKey{
	"servers_from": poolKey{set: (*poolParser).setServersFrom, given: func(p *Pool) bool { return p.ServersFrom != nil }}.
		encodedAs(serversFromNode).onlyIf(func(p *Pool) bool { return p.ServersFrom != nil }),
}

// serversFromKeys are servers_from's own keys, each read by its setter.
var serversFromKeys = map[string]func(sf *ServersFrom, v *yaml.Node) string{
	"dns":        setDNSName,
	"type":       setDNSType,
	"port":       func(sf *ServersFrom, v *yaml.Node) string { return sub(v, 1, 65535, &sf.Port) },
	"interval":   setDNSInterval,
	"resolver":   setDNSResolver,
	"max_change": setDNSMaxChange,
	"max_servers": func(sf *ServersFrom, v *yaml.Node) string {
		return sub(v, 1, MaxDNSMaxServers, &sf.MaxServers)
	},
}

// setServersFrom reads the servers_from mapping. Each problem names the
// inner key ("servers_from: type: ..."); one run reports all of them.
func (pp *poolParser) setServersFrom(key string, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		pp.fail(v.Line, key, "must be a mapping with dns (and type, port, interval, resolver, max_change, max_servers), not "+kindName(v))
		return
	}
	sf := &ServersFrom{Type: DNSTypeSRV, Interval: DefaultDNSInterval, MaxChange: DefaultDNSMaxChange,
		MaxServers: DefaultDNSMaxServers, Line: pp.keys[key]}
	seen, ok := readMapping(pp, key, v, "dns, type, port, interval, resolver, max_change or max_servers", serversFromKeys, sf)
	if ok && pp.checkServersFrom(sf.Line, key, sf, seen) {
		pp.p.ServersFrom = sf
	}
}

// checkServersFrom checks what involves several of servers_from's keys.
func (pp *poolParser) checkServersFrom(line int, key string, sf *ServersFrom, seen map[string]int) bool {
	msg := ""
	switch {
	case sf.DNS == "":
		msg = "dns is missing: the name to resolve"
	case sf.Type == DNSTypeSRV && seen["port"] != 0:
		line, msg = seen["port"], "port: an SRV record names its port; port is for type A or AAAA"
	case sf.Type != DNSTypeSRV && sf.Port == 0:
		msg = "port is missing: type " + sf.Type + " records carry no port"
	default:
		return true
	}
	pp.fail(line, key, msg)
	return false
}

func setDNSName(sf *ServersFrom, v *yaml.Node) string {
	name := strings.TrimSuffix(v.Value, ".")
	if name == "" || len(name) > 253 || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return fmt.Sprintf("%q is not a DNS name", v.Value)
	}
	sf.DNS = name
	return ""
}

func setDNSType(sf *ServersFrom, v *yaml.Node) string {
	switch t := strings.ToUpper(v.Value); t {
	case DNSTypeSRV, DNSTypeA, DNSTypeAAAA:
		sf.Type = t
		return ""
	}
	return fmt.Sprintf("unknown type %q; want SRV, A or AAAA", v.Value)
}

func setDNSInterval(sf *ServersFrom, v *yaml.Node) string {
	var ms int
	if msg := sub(v, 1, maxInt32, &ms); msg != "" {
		return msg
	}
	if d := time.Duration(ms) * time.Millisecond; d >= MinDNSInterval {
		sf.Interval = d
		return ""
	}
	return fmt.Sprintf("%d ms is below the floor of %d ms", ms, MinDNSInterval.Milliseconds())
}

func setDNSResolver(sf *ServersFrom, v *yaml.Node) string {
	addr, msg := parseSentinelAddr(v.Value)
	if msg != "" {
		return strings.Replace(msg, "host:port", "host:port of a DNS server", 1)
	}
	sf.Resolver = addr
	return ""
}

func setDNSMaxChange(sf *ServersFrom, v *yaml.Node) string {
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || f <= 0 || f > 1 {
		return fmt.Sprintf("%q is not a share above 0 and at most 1 (0.5: half the servers)", v.Value)
	}
	sf.MaxChange = f
	return ""
}

// sub reads a decimal number within [min, max] into n, or says why not.
func sub(v *yaml.Node, min, max int, n *int) string {
	if !allDigits(v.Value) {
		return fmt.Sprintf("%q is not a number", v.Value)
	}
	x, ok := parseDecimal(v.Value, min, max)
	if !ok {
		return fmt.Sprintf("%s is out of range [%d, %d]", v.Value, min, max)
	}
	*n = x
	return ""
}

// serversFromNode is the servers_from mapping, its defaults left out.
func serversFromNode(p *Pool) *yaml.Node {
	sf := p.ServersFrom
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) { m.Content = append(m.Content, str(k), v) }
	add("dns", str(sf.DNS))
	if sf.Type != DNSTypeSRV {
		add("type", str(sf.Type))
		add("port", num(strconv.Itoa(sf.Port)))
	}
	if sf.Interval != DefaultDNSInterval && sf.Interval > 0 {
		add("interval", num(millis(sf.Interval)))
	}
	if sf.Resolver != "" {
		add("resolver", str(sf.Resolver))
	}
	if sf.MaxChange != DefaultDNSMaxChange && sf.MaxChange > 0 {
		v := strconv.FormatFloat(sf.MaxChange, 'f', -1, 64)
		if !strings.Contains(v, ".") {
			v += ".0" // a plain float, which the encoder writes without a tag
		}
		add("max_change", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: v})
	}
	if sf.MaxServers != DefaultDNSMaxServers && sf.MaxServers > 0 {
		add("max_servers", num(strconv.Itoa(sf.MaxServers)))
	}
	return m
}

// String is the servers_from as one line, for logs and checksums.
func (sf *ServersFrom) String() string {
	return fmt.Sprintf("%s %s port=%d interval=%s resolver=%q max_change=%g max_servers=%d",
		sf.Type, sf.DNS, sf.Port, sf.Interval, sf.Resolver, sf.MaxChange, sf.MaxServers)
}

// Same reports whether sf and o ask the same thing the same way (Line
// aside): a watcher of one serves the other.
func (sf *ServersFrom) Same(o *ServersFrom) bool {
	if sf == nil || o == nil {
		return sf == o
	}
	a, b := *sf, *o
	a.Line, b.Line = 0, 0
	return a == b
}

// ParseServerLine reads one servers line ("host:port:weight [name]"), as
// the servers key does: for a source of servers other than the file,
// such as a DNS answer, so that its servers are named and placed as the
// same lines in a file would be.
func ParseServerLine(s string) (Server, error) {
	srv, msg := parseServer(s)
	if msg != "" {
		return Server{}, fmt.Errorf("config: server %s", msg)
	}
	return srv, nil
}

// RefuseServersFrom refuses servers_from in a pool of a kind whose servers
// cannot come from DNS; why says what names them instead.
func (c *PoolCheck) RefuseServersFrom(why string) {
	c.Refuse([]string{"servers_from"}, "", why)
}
