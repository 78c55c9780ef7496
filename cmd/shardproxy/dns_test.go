package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// mcConn is one memcached text connection with a deadline per call.
type mcConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialMC(addr string) (*mcConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &mcConn{nc: nc, r: bufio.NewReader(nc)}, nil
}

// do sends one request and reads its reply: one line, or a get's
// VALUE..END; a get returns its value ("" for a miss).
func (c *mcConn) do(req string) (line, value string, err error) {
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write([]byte(req)); err != nil {
		return "", "", err
	}
	line, err = c.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "VALUE ") {
		return line, "", err
	}
	f := strings.Fields(line)
	n, _ := strconv.Atoi(f[len(f)-1])
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return "", "", err
	}
	end, err := c.r.ReadString('\n')
	if end != "END\r\n" {
		return end, "", fmt.Errorf("after the value: %q %v", end, err)
	}
	return line, string(buf[:n]), nil
}

// load is verified traffic through the proxy: each worker sets its own
// keys to values naming the key and a sequence number, and gets each
// back at once. A reply is right when it is the value just set, or a
// miss (the key's server changed between the two); anything else is
// wrong, and an error reply or a broken connection is an error.
type load struct {
	ok, misses, wrong, errs atomic.Int64
	firstBad                atomic.Value
	stop                    chan struct{}
	wg                      sync.WaitGroup
}

func startLoad(addr string, workers int) *load { return startLoadAs(addr, workers, "w") }

// startLoadAs is startLoad with its workers' keys named name0-k..,
// name1-k..: loads through several proxies at once keep to their own keys.
func startLoadAs(addr string, workers int, name string) *load {
	l := &load{stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go l.worker(addr, name+strconv.Itoa(w))
	}
	return l
}

func (l *load) bad(counter *atomic.Int64, what string) {
	counter.Add(1)
	l.firstBad.CompareAndSwap(nil, what)
}

func (l *load) worker(addr, w string) {
	defer l.wg.Done()
	c, err := dialMC(addr)
	if err != nil {
		l.bad(&l.errs, err.Error())
		return
	}
	defer c.nc.Close()
	for seq := 0; ; seq++ {
		select {
		case <-l.stop:
			return
		default:
		}
		key := fmt.Sprintf("%s-k%d", w, seq%500)
		val := key + ":" + strconv.Itoa(seq)
		line, _, err := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(val), val))
		if err != nil || line != "STORED\r\n" {
			l.bad(&l.errs, fmt.Sprintf("set %s: %q %v", key, line, err))
			if err != nil {
				return
			}
			continue
		}
		line, got, err := c.do("get " + key + "\r\n")
		switch {
		case err != nil:
			l.bad(&l.errs, fmt.Sprintf("get %s: %v", key, err))
			return
		case line == "END\r\n":
			l.misses.Add(1)
		case strings.HasPrefix(line, "VALUE ") && got == val:
			l.ok.Add(1)
		case strings.HasPrefix(line, "VALUE "):
			l.bad(&l.wrong, fmt.Sprintf("get %s: %q, want %q", key, got, val))
		default:
			l.bad(&l.errs, fmt.Sprintf("get %s: %q", key, line))
		}
	}
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// placement sets keys through the proxy (deleted first on every server)
// and returns which server's address holds each.
func placement(t *testing.T, fail func(string, ...any), proxyAddr string, servers []string, keys []string) map[string]string {
	t.Helper()
	conns := map[string]*mcConn{}
	for _, s := range servers {
		c, err := dialMC(s)
		if err != nil {
			fail("dial %s: %v", s, err)
		}
		defer c.nc.Close()
		conns[s] = c
		for _, k := range keys {
			c.do("delete " + k + "\r\n")
		}
	}
	p, err := dialMC(proxyAddr)
	if err != nil {
		fail("dial proxy: %v", err)
	}
	defer p.nc.Close()
	at := map[string]string{}
	for _, k := range keys {
		if line, _, err := p.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(k), k)); line != "STORED\r\n" {
			fail("placement: set %s: %q %v", k, line, err)
		}
		for s, c := range conns {
			if _, v, _ := c.do("get " + k + "\r\n"); v == k {
				at[k] = s
			}
		}
	}
	return at
}

// backendsOf returns GET /backends' pool as name -> addr.
func backendsOf(adminAddr, pool string) map[string]string {
	resp, err := client.Get("http://" + adminAddr + "/backends")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var doc struct {
		Pools []struct {
			Name     string
			Backends []struct{ Name, Addr string }
		}
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return nil
	}
	out := map[string]string{}
	for _, p := range doc.Pools {
		for _, b := range p.Backends {
			if p.Name == pool {
				out[b.Name] = b.Addr
			}
		}
	}
	return out
}

// proxyStats returns the memcached stats command's answer through the
// proxy, by name.
func proxyStats(addr string) map[string]string {
	c, err := dialMC(addr)
	if err != nil {
		return nil
	}
	defer c.nc.Close()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c.nc, "stats\r\n")
	out := map[string]string{}
	for {
		l, err := c.r.ReadString('\n')
		if err != nil || l == "END\r\n" {
			return out
		}
		if f := strings.Fields(l); len(f) == 3 {
			out[f[1]] = f[2]
		}
	}
}

func srvTargets(d map[string]*testserver.Server, names ...string) []testserver.SRVTarget {
	var out []testserver.SRVTarget
	for _, n := range names {
		out = append(out, testserver.SRVTarget{Target: n + ".cache.test", Port: addrPort(d[n].Addr), Addr: "127.0.0.1"})
	}
	return out
}

func addrPort(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// dnsProxy writes a configuration of one pool mc over servers_from (the
// lines of its mapping in from) and starts the binary on it.
func dnsProxy(t *testing.T, pool string) (listen, admin string, logs *testserver.Buffer, fail func(string, ...any)) {
	t.Helper()
	listen, admin = loopback(t), loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	text := "mc:\n  listen: " + listen + "\n" + pool + "shardproxy:\n  admin_listen: " + admin + "\n  stats_listen: " + loopback(t) + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, logs, fail = startProxy(t, testserver.Shardproxy(t), "-c", conf, "--admin", "")
	waitFor(t, fail, "the proxy on "+listen, func() bool {
		c, err := dialMC(listen)
		if err == nil {
			c.nc.Close()
		}
		return err == nil
	})
	return listen, admin, logs, fail
}

// follow measures how long the pool takes to run want (name -> addr)
// after a DNS change made at since.
func follow(t *testing.T, fail func(string, ...any), admin string, since time.Time, want map[string]string) time.Duration {
	t.Helper()
	waitFor(t, fail, fmt.Sprintf("backends %v", want), func() bool { return fmt.Sprint(backendsOf(admin, "mc")) == fmt.Sprint(want) })
	return time.Since(since)
}

// TestDNSPool runs the binary with a memcache pool over an SRV name under
// verified load while the records change: a target added, one removed
// (then its memcached stopped), two addresses swapped, the DNS server
// stopped and started. The pool follows each change, no reply is wrong,
// no request fails, and a fixed set of keys moves only off the changed
// servers.
func TestDNSPool(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	mc := map[string]*testserver.Server{}
	for _, n := range []string{"mc-0", "mc-1", "mc-2", "mc-3"} {
		mc[n] = testserver.StartMemcached(t)
	}
	all := []string{mc["mc-0"].Addr, mc["mc-1"].Addr, mc["mc-2"].Addr, mc["mc-3"].Addr}
	d := testserver.StartDNS(t)
	const name = "_memcache._tcp.cache.test"
	d.SetSRV(name, srvTargets(mc, "mc-0", "mc-1", "mc-2")...)
	const interval = 200 * time.Millisecond
	listen, admin, _, fail := dnsProxy(t, "  servers_from:\n    dns: "+name+"\n    interval: 200\n    max_change: 1\n    resolver: "+d.Addr+"\n")
	want := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n+".cache.test"] = mc[n].Addr
		}
		return m
	}
	follow(t, fail, admin, time.Now(), want("mc-0", "mc-1", "mc-2"))
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = "place-" + strconv.Itoa(i)
	}
	before := placement(t, fail, listen, all, keys)
	l := startLoad(listen, 4)
	var took []time.Duration

	// Added: keys move only to the new server.
	at := time.Now()
	d.SetSRV(name, srvTargets(mc, "mc-0", "mc-1", "mc-2", "mc-3")...)
	took = append(took, follow(t, fail, admin, at, want("mc-0", "mc-1", "mc-2", "mc-3")))
	added := placement(t, fail, listen, all, keys)
	moved := 0
	for _, k := range keys {
		if added[k] != before[k] {
			moved++
			if added[k] != mc["mc-3"].Addr {
				fail("after mc-3 was added, %s moved from %s to %s", k, before[k], added[k])
			}
		}
	}
	if moved == 0 {
		fail("no key moved to the added server")
	}

	// Removed: only the removed server's keys move; then it stops.
	at = time.Now()
	d.SetSRV(name, srvTargets(mc, "mc-0", "mc-2", "mc-3")...)
	took = append(took, follow(t, fail, admin, at, want("mc-0", "mc-2", "mc-3")))
	time.Sleep(interval) // the old pool's requests drain
	mc["mc-1"].Stop()
	removed := placement(t, fail, listen, []string{mc["mc-0"].Addr, mc["mc-2"].Addr, mc["mc-3"].Addr}, keys)
	for _, k := range keys {
		if added[k] != mc["mc-1"].Addr && removed[k] != added[k] {
			fail("after mc-1 was removed, %s moved from %s to %s", k, added[k], removed[k])
		}
	}

	// Swapped: mc-0 and mc-2 trade addresses; mc-3's keys stay.
	swapped := []testserver.SRVTarget{
		{Target: "mc-0.cache.test", Port: addrPort(mc["mc-2"].Addr), Addr: "127.0.0.1"},
		{Target: "mc-2.cache.test", Port: addrPort(mc["mc-0"].Addr), Addr: "127.0.0.1"},
		srvTargets(mc, "mc-3")[0]}
	at = time.Now()
	d.SetSRV(name, swapped...)
	took = append(took, follow(t, fail, admin, at, map[string]string{
		"mc-0.cache.test": mc["mc-2"].Addr, "mc-2.cache.test": mc["mc-0"].Addr, "mc-3.cache.test": mc["mc-3"].Addr}))
	after := placement(t, fail, listen, []string{mc["mc-0"].Addr, mc["mc-2"].Addr, mc["mc-3"].Addr}, keys)
	swap := map[string]string{mc["mc-0"].Addr: mc["mc-2"].Addr, mc["mc-2"].Addr: mc["mc-0"].Addr, mc["mc-3"].Addr: mc["mc-3"].Addr}
	for _, k := range keys {
		if after[k] != swap[removed[k]] {
			fail("after the swap, %s is on %s; it was on %s", k, after[k], removed[k])
		}
	}

	// The DNS server stopped: the pool keeps its servers and serves.
	d.Stop()
	failures := func() int { n, _ := strconv.Atoi(proxyStats(listen)["dns_failures"]); return n }
	waitFor(t, fail, "failed resolutions", func() bool { return failures() >= 3 })
	if got := fmt.Sprint(backendsOf(admin, "mc")); got != fmt.Sprint(map[string]string{
		"mc-0.cache.test": mc["mc-2"].Addr, "mc-2.cache.test": mc["mc-0"].Addr, "mc-3.cache.test": mc["mc-3"].Addr}) {
		fail("with the DNS server stopped the pool runs %s", got)
	}
	okBefore := l.ok.Load()
	waitFor(t, fail, "traffic while DNS is down", func() bool { return l.ok.Load() > okBefore+100 })
	d.Start()
	waitFor(t, fail, "DNS answering again", func() bool { return proxyStats(listen)["dns_failing"] == "0" })

	l.end()
	if l.wrong.Load() != 0 || l.errs.Load() != 0 {
		fail("%d wrong replies, %d errors (first: %v)", l.wrong.Load(), l.errs.Load(), l.firstBad.Load())
	}
	st := proxyStats(listen)
	metrics := getText(t, fail, "http://"+admin+"/metrics")
	for _, m := range []string{`shardproxy_dns_changes_total{pool="mc"} 4`, `shardproxy_dns_servers{pool="mc"} 3`, `shardproxy_dns_failing{pool="mc"} 0`} {
		if !strings.Contains(metrics, m) {
			fail("/metrics lacks %s", m)
		}
	}
	t.Logf("%d verified set+get pairs, %d misses, 0 wrong, 0 errors; followed the changes in %v (interval %v); stats %s",
		l.ok.Load(), l.misses.Load(), took, interval, dnsLine(st))
}

func dnsLine(st map[string]string) string {
	var b []string
	for _, k := range []string{"dns_resolutions", "dns_failures", "dns_held", "dns_changes", "dns_servers"} {
		b = append(b, k+"="+st[k])
	}
	return strings.Join(b, " ")
}

func getText(t *testing.T, fail func(string, ...any), url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		fail("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
