package testserver

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DNS is an authoritative DNS server in the test's process (miekg/dns),
// on one free loopback port over UDP and TCP, answering from records the
// test sets and changes: SRV, A and AAAA, with the SRV targets' addresses
// in the additional section as Kubernetes' DNS gives them. A name it has
// no records for is NXDOMAIN; Fail makes it answer SERVFAIL. Stop and
// Start take it down and up again on the same port, for "the DNS server
// stopped". It is stopped when the test ends.
type DNS struct {
	// Addr is "127.0.0.1:PORT", the same for UDP and TCP.
	Addr string

	t       testing.TB
	mu      sync.Mutex
	records map[string][]dns.RR // by lower-case FQDN
	fail    bool
	udp     *dns.Server
	tcp     *dns.Server
	queries atomic.Int64
}

// SRVTarget is one SRV record: a target name, its port, and the target's
// address (an A record, or AAAA for an IPv6 address).
type SRVTarget struct {
	Target   string
	Port     int
	Addr     string
	Priority int
	Weight   int
}

// StartDNS starts a DNS server with no records on a free loopback port.
func StartDNS(t testing.TB) *DNS {
	t.Helper()
	d := &DNS{t: t, records: map[string][]dns.RR{}}
	for try := 0; ; try++ {
		d.Addr = loopback(FreePort(t))
		err := d.listen()
		if err == nil {
			break
		}
		if try == 10 {
			t.Fatalf("testserver: dns: %v", err)
		}
	}
	t.Cleanup(d.Stop)
	return d
}

// listen starts the UDP and TCP servers on d.Addr.
func (d *DNS) listen() error {
	pc, err := net.ListenPacket("udp", d.Addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.Addr)
	if err != nil {
		pc.Close()
		return err
	}
	h := dns.HandlerFunc(d.serve)
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	started := make(chan struct{}, 2)
	udp.NotifyStartedFunc = func() { started <- struct{}{} }
	tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	<-started
	<-started
	d.mu.Lock()
	d.udp, d.tcp = udp, tcp
	d.mu.Unlock()
	return nil
}

// Stop shuts the server down; its port stays free for Start. Stopping a
// stopped server does nothing.
func (d *DNS) Stop() {
	d.mu.Lock()
	udp, tcp := d.udp, d.tcp
	d.udp, d.tcp = nil, nil
	d.mu.Unlock()
	if udp != nil {
		udp.Shutdown()
		tcp.Shutdown()
	}
}

// Start serves again on the same address after Stop, with the same
// records; it retries while the port is not free yet.
func (d *DNS) Start() {
	d.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := d.listen()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("testserver: dns: restart on %s: %v", d.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Queries counts the questions answered so far.
func (d *DNS) Queries() int64 { return d.queries.Load() }

// SetSRV replaces name's SRV records, and the A or AAAA records of their
// targets; no targets removes them (the name becomes NXDOMAIN).
func (d *DNS) SetSRV(name string, targets ...SRVTarget) {
	d.mu.Lock()
	defer d.mu.Unlock()
	owner := dns.Fqdn(strings.ToLower(name))
	for _, rr := range d.records[owner] {
		if srv, ok := rr.(*dns.SRV); ok {
			delete(d.records, strings.ToLower(srv.Target))
		}
	}
	delete(d.records, owner)
	for _, tg := range targets {
		target := dns.Fqdn(strings.ToLower(tg.Target))
		d.records[owner] = append(d.records[owner], &dns.SRV{
			Hdr:      dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 1},
			Priority: uint16(tg.Priority), Weight: uint16(tg.Weight), Port: uint16(tg.Port), Target: target})
		d.records[target] = append(d.records[target], addrRR(target, tg.Addr))
	}
}

// SetAddrs replaces name's A and AAAA records with addrs; none removes
// them.
func (d *DNS) SetAddrs(name string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	owner := dns.Fqdn(strings.ToLower(name))
	delete(d.records, owner)
	for _, a := range addrs {
		d.records[owner] = append(d.records[owner], addrRR(owner, a))
	}
}

// Fail makes every answer SERVFAIL while on.
func (d *DNS) Fail(on bool) {
	d.mu.Lock()
	d.fail = on
	d.mu.Unlock()
}

func addrRR(owner, addr string) dns.RR {
	ip := net.ParseIP(addr)
	hdr := dns.RR_Header{Name: owner, Class: dns.ClassINET, Ttl: 1}
	if ip4 := ip.To4(); ip4 != nil {
		hdr.Rrtype = dns.TypeA
		return &dns.A{Hdr: hdr, A: ip4}
	}
	hdr.Rrtype = dns.TypeAAAA
	return &dns.AAAA{Hdr: hdr, AAAA: ip}
}

// serve answers one question from the records.
func (d *DNS) serve(w dns.ResponseWriter, q *dns.Msg) {
	d.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail || len(q.Question) != 1 {
		m.Rcode = dns.RcodeServerFailure
		w.WriteMsg(m)
		return
	}
	qn := q.Question[0]
	rrs, ok := d.records[strings.ToLower(qn.Name)]
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	for _, rr := range rrs {
		if rr.Header().Rrtype != qn.Qtype {
			continue
		}
		m.Answer = append(m.Answer, dns.Copy(rr))
		if srv, ok := rr.(*dns.SRV); ok {
			for _, a := range d.records[strings.ToLower(srv.Target)] {
				m.Extra = append(m.Extra, dns.Copy(a))
			}
		}
	}
	w.WriteMsg(m)
}
