package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// A big change (two of three servers readdressed) is held until the next
// resolution gives it again: an answer that flaps back is never applied,
// one that stays is applied one interval later.
func TestDNSPoolHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	mc := map[string]*testserver.Server{}
	for _, n := range []string{"mc-0", "mc-1", "mc-2"} {
		mc[n] = testserver.StartMemcached(t)
	}
	d := testserver.StartDNS(t)
	const name = "_memcache._tcp.held.test"
	d.SetSRV(name, srvTargets(mc, "mc-0", "mc-1", "mc-2")...)
	listen, admin, _, fail := dnsProxy(t, "  servers_from:\n    dns: "+name+"\n    interval: 1000\n    resolver: "+d.Addr+"\n")
	first := fmt.Sprint(backendsOf(admin, "mc"))
	swapped := srvTargets(mc, "mc-0", "mc-1", "mc-2")
	swapped[0].Port, swapped[1].Port = swapped[1].Port, swapped[0].Port
	stat := func(k string) string { return proxyStats(listen)[k] }

	d.SetSRV(name, swapped...)
	waitFor(t, fail, "the answer held", func() bool { return stat("dns_held") == "1" })
	d.SetSRV(name, srvTargets(mc, "mc-0", "mc-1", "mc-2")...) // it flaps back
	res := stat("dns_resolutions")
	waitFor(t, fail, "the next resolution", func() bool { return stat("dns_resolutions") != res })
	if got := fmt.Sprint(backendsOf(admin, "mc")); got != first || stat("dns_changes") != "1" || stat("dns_holding") != "0" {
		fail("a held answer that flapped back was applied: %s, changes %s", got, stat("dns_changes"))
	}

	d.SetSRV(name, swapped...) // and stays
	waitFor(t, fail, "the answer held again", func() bool { return stat("dns_held") == "2" })
	if got := fmt.Sprint(backendsOf(admin, "mc")); got != first {
		fail("a held answer was applied at once: %s", got)
	}
	waitFor(t, fail, "the repeated answer applied", func() bool { return stat("dns_changes") == "2" })
	want := map[string]string{"mc-0.cache.test": mc["mc-1"].Addr, "mc-1.cache.test": mc["mc-0"].Addr, "mc-2.cache.test": mc["mc-2"].Addr}
	follow(t, fail, admin, time.Now(), want)
}

// A Redis pool over SRV follows an added server under verified SET/GET.
func TestDNSRedisPool(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs redis-server")
	}
	rs := map[string]*testserver.Server{"r-0": testserver.StartRedis(t), "r-1": testserver.StartRedis(t), "r-2": testserver.StartRedis(t)}
	d := testserver.StartDNS(t)
	const name = "_redis._tcp.cache.test"
	d.SetSRV(name, srvTargets(rs, "r-0", "r-1")...)
	listen, admin, _, fail := dnsProxy(t, "  redis: true\n  servers_from:\n    dns: "+name+"\n    interval: 200\n    resolver: "+d.Addr+"\n")
	nc, err := net.Dial("tcp", listen)
	if err != nil {
		fail("dial: %v", err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	check := func(round int) {
		for i := range 200 {
			k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("k%d:%d", i, round)
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k, len(v), v, len(k), k)
			ok, _ := r.ReadString('\n')
			size, _ := r.ReadString('\n')
			val, _ := r.ReadString('\n')
			if ok != "+OK\r\n" || size != fmt.Sprintf("$%d\r\n", len(v)) || val != v+"\r\n" {
				fail("round %d: SET/GET %s: %q %q %q", round, k, ok, size, val)
			}
		}
	}
	check(0)
	d.SetSRV(name, srvTargets(rs, "r-0", "r-1", "r-2")...)
	follow(t, fail, admin, time.Now(), map[string]string{"r-0.cache.test": rs["r-0"].Addr, "r-1.cache.test": rs["r-1"].Addr, "r-2.cache.test": rs["r-2"].Addr})
	check(1)
}

// Without an answer at start: -t and the proxy refuse a pool that has no
// servers key, naming it; with one, the proxy starts on its servers and
// takes the DNS set once it answers.
func TestDNSStart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	d := testserver.StartDNS(t)
	m0, m1 := testserver.StartMemcached(t), testserver.StartMemcached(t)
	dir := t.TempDir()
	listen := loopback(t)
	write := func(name, extra string) string {
		p := filepath.Join(dir, name)
		text := "mc:\n  listen: " + listen + "\n  servers_from:\n    dns: _mc._tcp.start.test\n    interval: 100\n    resolver: " + d.Addr + "\n" + extra
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	lone := write("lone.yml", "")
	var out, errb bytes.Buffer
	if code := run([]string{"-t", "-c", lone}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `pool "mc": servers_from: no answer for SRV _mc._tcp.start.test within 1s (dnspool: no records: SRV _mc._tcp.start.test: NXDOMAIN), and no servers key to start on`) {
		t.Fatalf("-t without an answer: code %d, err %q", code, errb.String())
	}
	bin := testserver.Shardproxy(t)
	cmd := exec.Command(bin, "-c", lone, "-s", "0", "--admin", "")
	logs := &testserver.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Run(); err == nil || !strings.Contains(logs.String(), "no servers key to start on") {
		t.Fatalf("start without an answer: %v\n%s", err, logs.String())
	}

	d.SetSRV("_mc._tcp.start.test", testserver.SRVTarget{Target: "a.start.test", Port: addrPort(m0.Addr), Addr: "127.0.0.1"})
	out.Reset()
	if code := run([]string{"-t", "-c", lone}, &out, &errb); code != 0 {
		t.Fatalf("-t with an answer: code %d, err %q", code, errb.String())
	}

	d.SetSRV("_mc._tcp.start.test")
	fallback := write("fallback.yml", "  servers:\n    - "+m1.Addr+":1 b\nshardproxy:\n  admin_listen: "+loopback(t)+"\n  stats_listen: "+loopback(t)+"\n")
	admin := strings.Fields(strings.SplitN(readFile(t, fallback), "admin_listen: ", 2)[1])[0]
	_, _, fail := startProxy(t, bin, "-c", fallback, "--admin", "")
	follow(t, fail, admin, time.Now(), map[string]string{"b": m1.Addr})
	roundTrip(t, fail, listen, "x")
	d.SetSRV("_mc._tcp.start.test", testserver.SRVTarget{Target: "a.start.test", Port: addrPort(m0.Addr), Addr: "127.0.0.1"})
	follow(t, fail, admin, time.Now(), map[string]string{"a.start.test": m0.Addr})
	roundTrip(t, fail, listen, "y")
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dnsRoutes is a route file whose pool is the servers of its
// servers_from (mcp.servers()), keys hashed over them.
const dnsRoutes = `
function mcp_config_pools()
  local bs = {}
  for _, s in ipairs(mcp.servers()) do
    table.insert(bs, mcp.backend(s.name, s.host, s.port))
  end
  return mcp.pool(bs)
end

function mcp_config_routes(pool)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(pool)
  fg:ready{ n = "all", f = function(rctx)
    return function(r) return rctx:enqueue_and_wait(r, h) end
  end }
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`

// A Lua pool's route file builds its pool of mcp.servers(); a DNS change
// runs it again with the new servers.
func TestDNSLuaPool(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	mc := map[string]*testserver.Server{"mc-0": testserver.StartMemcached(t), "mc-1": testserver.StartMemcached(t)}
	d := testserver.StartDNS(t)
	const name = "_memcache._tcp.lua.test"
	d.SetSRV(name, srvTargets(mc, "mc-0")...)
	routes := filepath.Join(t.TempDir(), "routes.lua")
	if err := os.WriteFile(routes, []byte(dnsRoutes), 0o644); err != nil {
		t.Fatal(err)
	}
	listen, admin, _, fail := dnsProxy(t, "  lua: "+routes+"\n  servers_from:\n    dns: "+name+"\n    interval: 200\n    resolver: "+d.Addr+"\n")
	follow(t, fail, admin, time.Now(), map[string]string{"mc-0.cache.test": mc["mc-0"].Addr})
	roundTrip(t, fail, listen, "a")
	d.SetSRV(name, srvTargets(mc, "mc-0", "mc-1")...)
	follow(t, fail, admin, time.Now(), map[string]string{"mc-0.cache.test": mc["mc-0"].Addr, "mc-1.cache.test": mc["mc-1"].Addr})
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = fmt.Sprintf("lua-%d", i)
	}
	at := placement(t, fail, listen, []string{mc["mc-0"].Addr, mc["mc-1"].Addr}, keys)
	on := map[string]int{}
	for _, k := range keys {
		on[at[k]]++
	}
	if on[mc["mc-0"].Addr] == 0 || on[mc["mc-1"].Addr] == 0 || on[mc["mc-0"].Addr]+on[mc["mc-1"].Addr] != len(keys) {
		fail("keys over the route file's servers: %v", on)
	}
}
