package dnspool

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"shardproxy/config"
)

// ResolvConf is where the system's DNS servers are read when a
// servers_from names no resolver.
var ResolvConf = "/etc/resolv.conf"

// errEmpty is an answer without servers: NXDOMAIN or no records.
var errEmpty = errors.New("dnspool: no records")

// resolver asks DNS servers, in order, until one answers.
type resolver struct {
	servers []string // "host:port"
	timeout time.Duration
}

// newResolver returns a resolver asking addr, or the servers of
// ResolvConf when addr is "".
func newResolver(addr string, timeout time.Duration) (*resolver, error) {
	if addr != "" {
		return &resolver{servers: []string{addr}, timeout: timeout}, nil
	}
	cc, err := dns.ClientConfigFromFile(ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("dnspool: system resolver: %w", err)
	}
	r := &resolver{timeout: timeout}
	for _, s := range cc.Servers {
		r.servers = append(r.servers, net.JoinHostPort(s, cc.Port))
	}
	if len(r.servers) == 0 {
		return nil, fmt.Errorf("dnspool: system resolver: %s names no nameserver", ResolvConf)
	}
	return r, nil
}

// queryTimeout bounds one query: the interval, within [200ms, 2s], so a
// dead server costs a fast-moving pool little and a slow one time to
// answer.
func queryTimeout(interval time.Duration) time.Duration {
	return min(max(interval, 200*time.Millisecond), 2*time.Second)
}

// exchange asks for name's records of type qtype. It returns errEmpty for
// NXDOMAIN and an error for anything but a successful answer.
func (r *resolver) exchange(name string, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	var last error
	for _, server := range r.servers {
		in, err := r.ask(q, server)
		if err != nil {
			last = fmt.Errorf("dnspool: %s %s at %s: %w", dns.TypeToString[qtype], name, server, err)
			continue
		}
		switch in.Rcode {
		case dns.RcodeSuccess:
			return in, nil
		case dns.RcodeNameError:
			return nil, fmt.Errorf("%w: %s %s: NXDOMAIN", errEmpty, dns.TypeToString[qtype], name)
		}
		last = fmt.Errorf("dnspool: %s %s at %s: %s", dns.TypeToString[qtype], name, server, dns.RcodeToString[in.Rcode])
	}
	return nil, last
}

// ask sends q to server over UDP, and again over TCP when the answer was
// truncated.
func (r *resolver) ask(q *dns.Msg, server string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: r.timeout}
	in, _, err := c.Exchange(q, server)
	if err == nil && in.Truncated {
		c.Net = "tcp"
		in, _, err = c.Exchange(q, server)
	}
	return in, err
}

// lookup returns the servers sf names now, sorted by name: the whole
// answer or an error (a target without an address fails it whole).
func (r *resolver) lookup(sf *config.ServersFrom) ([]config.Server, error) {
	var lines []string
	var err error
	if sf.Type == config.DNSTypeSRV {
		lines, err = r.lookupSRV(sf.DNS)
	} else {
		lines, err = r.lookupAddrs(sf.DNS, sf.Type, sf.Port)
	}
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%w: %s %s", errEmpty, sf.Type, sf.DNS)
	}
	servers := make([]config.Server, 0, len(lines))
	for _, l := range lines {
		s, err := config.ParseServerLine(l)
		if err != nil {
			return nil, fmt.Errorf("dnspool: %s %s: %w", sf.Type, sf.DNS, err)
		}
		servers = append(servers, s)
	}
	slices.SortFunc(servers, func(a, b config.Server) int { return strings.Compare(a.Name, b.Name) })
	return servers, nil
}

// lookupAddrs returns a servers line per address of name's A or AAAA
// records, at port.
func (r *resolver) lookupAddrs(name, typ string, port int) ([]string, error) {
	ips, err := r.addrs(name, dns.StringToType[typ], nil)
	if err != nil {
		return nil, err
	}
	lines := make([]string, 0, len(ips))
	for _, ip := range ips {
		lines = append(lines, net.JoinHostPort(ip, strconv.Itoa(port))+":1")
	}
	return lines, nil
}

// addrs returns the distinct addresses of name's records of type qtype
// (A or AAAA), sorted, from extra (an SRV answer's additional section)
// when it has some, else asked.
func (r *resolver) addrs(name string, qtype uint16, extra []dns.RR) ([]string, error) {
	rrs, fromExtra := extra, hasAddr(extra, name, qtype)
	if !fromExtra {
		in, err := r.exchange(name, qtype)
		if err != nil {
			return nil, err
		}
		rrs = in.Answer
	}
	var ips []string
	for _, rr := range rrs {
		var ip net.IP
		switch a := rr.(type) {
		case *dns.A:
			ip = a.A
		case *dns.AAAA:
			ip = a.AAAA
		}
		// An answer's records may follow a CNAME chain; an extra section's
		// must be the target's own.
		if ip == nil || rr.Header().Rrtype != qtype || (fromExtra && !strings.EqualFold(rr.Header().Name, dns.Fqdn(name))) {
			continue
		}
		if s := ip.String(); !slices.Contains(ips, s) {
			ips = append(ips, s)
		}
	}
	slices.Sort(ips)
	return ips, nil
}

// hasAddr reports whether rrs hold an address record of type qtype for name.
func hasAddr(rrs []dns.RR, name string, qtype uint16) bool {
	for _, rr := range rrs {
		if rr.Header().Rrtype == qtype && strings.EqualFold(rr.Header().Name, dns.Fqdn(name)) {
			return true
		}
	}
	return false
}

// lookupSRV returns a servers line per target of name's SRV records of the
// lowest priority: the target's first address (A, else AAAA), the
// record's port, weight 1, named by the target.
func (r *resolver) lookupSRV(name string) ([]string, error) {
	in, err := r.exchange(name, dns.TypeSRV)
	if err != nil {
		return nil, err
	}
	var srvs []*dns.SRV
	for _, rr := range in.Answer {
		if s, ok := rr.(*dns.SRV); ok && s.Target != "." {
			srvs = append(srvs, s)
		}
	}
	if len(srvs) == 0 {
		return nil, nil
	}
	low := slices.MinFunc(srvs, func(a, b *dns.SRV) int { return int(a.Priority) - int(b.Priority) }).Priority
	var lines []string
	seen := map[string]bool{}
	for _, s := range srvs {
		target := strings.ToLower(strings.TrimSuffix(s.Target, "."))
		if s.Priority != low || seen[target] {
			continue
		}
		seen[target] = true
		ip, err := r.targetAddr(target, in.Extra)
		if err != nil {
			return nil, err
		}
		lines = append(lines, net.JoinHostPort(ip, strconv.Itoa(int(s.Port)))+":1 "+target)
	}
	return lines, nil
}

// targetAddr returns an SRV target's first address: A, else AAAA.
func (r *resolver) targetAddr(target string, extra []dns.RR) (string, error) {
	var errA error
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		ips, err := r.addrs(target, qtype, extra)
		if err == nil && len(ips) > 0 {
			return ips[0], nil
		}
		if errA == nil {
			errA = err
		}
	}
	if errA != nil && !errors.Is(errA, errEmpty) {
		return "", errA
	}
	return "", fmt.Errorf("dnspool: SRV target %s has no address", target)
}
