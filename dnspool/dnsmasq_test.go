package dnspool

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// dnsmasq, the DNS server of make run EXAMPLE=fleet, with srv-host and
// host-record lines as its configuration would have them: SRV answers
// whose targets' addresses this client takes from the additional section
// or asks for.
func TestDnsmasq(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dnsmasq")
	}
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		bin = "/usr/sbin/dnsmasq"
	}
	port := testserver.FreePort(t)
	cmd := exec.Command(bin, "--keep-in-foreground", "--port="+strconv.Itoa(port), "--listen-address=127.0.0.1",
		"--bind-interfaces", "--no-resolv", "--no-hosts", "--conf-file=/dev/null",
		"--srv-host=_memcache._tcp.fleet.test,mc-0.fleet.test,11211",
		"--srv-host=_memcache._tcp.fleet.test,mc-1.fleet.test,11212",
		"--host-record=mc-0.fleet.test,127.0.0.1", "--host-record=mc-1.fleet.test,127.0.0.2",
		"--host-record=cache.fleet.test,127.0.0.3", "--host-record=cache.fleet.test,127.0.0.4")
	if err := cmd.Start(); err != nil {
		t.Fatalf("dnsmasq: %v (install it: apt-get install dnsmasq-base, or make deps)", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r, err := newResolver("127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := &config.ServersFrom{DNS: "_memcache._tcp.fleet.test", Type: config.DNSTypeSRV}
	var got []config.Server
	deadline := time.Now().Add(5 * time.Second)
	for got == nil && time.Now().Before(deadline) { // until dnsmasq listens
		got, err = r.lookup(srv)
		time.Sleep(20 * time.Millisecond)
	}
	if s := names(got); s != "mc-0.fleet.test=127.0.0.1:11211 mc-1.fleet.test=127.0.0.2:11212" {
		t.Fatalf("SRV: %s %v", s, err)
	}
	got, err = r.lookup(&config.ServersFrom{DNS: "cache.fleet.test", Type: config.DNSTypeA, Port: 11211})
	if s := names(got); s != "127.0.0.3=127.0.0.3:11211 127.0.0.4=127.0.0.4:11211" {
		t.Fatalf("A: %s %v", s, err)
	}
}
