package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/fleet"
	"shardproxy/internal/testserver"
)

const fleetPrefix = "/shardproxy/test"

// fleetProxy is one shardproxy process of a fleet.
type fleetProxy struct {
	id, addr, admin string
	fail            func(string, ...any)
	stop            func() error
}

// startFleetProxies runs n proxies of one fleet without a local file, each
// on its own loopback address (127.0.0.2, ...) at the pool's port.
func startFleetProxies(t *testing.T, eps []string, n, port int) []*fleetProxy {
	t.Helper()
	var out []*fleetProxy
	for i := range n {
		out = append(out, startFleetProxy(t, eps, "p"+strconv.Itoa(i), fmt.Sprintf("127.0.0.%d", i+2), port))
	}
	return out
}

// startFleetProxy runs one proxy of the fleet, id, on host at the pool's
// port.
func startFleetProxy(t *testing.T, eps []string, id, host string, port int) *fleetProxy {
	t.Helper()
	p := &fleetProxy{id: id, admin: loopback(t), addr: fmt.Sprintf("%s:%d", host, port)}
	cmd, _, fail := startProxy(t, testserver.Shardproxy(t), "--etcd", strings.Join(eps, ","), "--etcd-prefix", fleetPrefix,
		"--fleet-id", p.id, "--fleet-listen-host", host, "-a", "127.0.0.1",
		"-s", strconv.Itoa(testserver.FreePort(t)), "--admin", p.admin, "--etcd-wait", "20s")
	p.fail = fail
	p.stop = func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		return cmd.Wait()
	}
	return p
}

// fleetYAML is the fleet's configuration: a ketama pool over the named
// servers ("addr name").
func fleetYAML(port int, servers ...string) string {
	s := fmt.Sprintf("cache:\n  listen: 127.0.0.1:%d\n  hash: fnv1a_64\n  distribution: ketama\n"+
		"  timeout: 2000\n  servers:\n", port)
	for _, sv := range servers {
		addr, name, _ := strings.Cut(sv, " ")
		s += fmt.Sprintf("    - %s:1 %s\n", addr, name)
	}
	return s
}

// fleetPut publishes yml with the fleet command, as an operator does, and
// returns the revision it printed.
func fleetPut(t *testing.T, eps []string, yml string) int64 {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fleet.yml")
	os.WriteFile(file, []byte(yml), 0o644)
	var out, errb bytes.Buffer
	deadline := time.Now().Add(20 * time.Second)
	for {
		out.Reset()
		errb.Reset()
		code := run([]string{"fleet", "put", "-c", file, "--etcd", strings.Join(eps, ","), "--etcd-prefix", fleetPrefix,
			"--timeout", "3s"}, &out, &errb)
		if code == 0 {
			break
		}
		if code != 1 || !strings.Contains(errb.String(), "write") || time.Now().After(deadline) {
			t.Fatalf("fleet put: code %d: %s%s", code, out.String(), errb.String())
		}
		time.Sleep(100 * time.Millisecond) // a leader being elected
	}
	m := regexp.MustCompile(`at revision (\d+), checksum [0-9a-f]{12}\n$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("fleet put printed %q", out.String())
	}
	rev, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatalf("fleet put printed %q", out.String())
	}
	return rev
}

// fleetStatus reads the registrations.
func fleetStatus(t *testing.T, eps []string) *fleet.Status {
	t.Helper()
	cli, err := fleet.Dial(fleet.Conn{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := fleet.ReadStatus(ctx, cli, fleetPrefix)
	if err != nil {
		return &fleet.Status{}
	}
	return st
}

// waitApplied waits until every proxy registers rev and returns how long
// after start each did, as seen by polling their registrations.
func waitApplied(t *testing.T, eps []string, proxies []*fleetProxy, rev int64, start time.Time, within time.Duration) []time.Duration {
	t.Helper()
	took := map[string]time.Duration{}
	for len(took) < len(proxies) {
		for _, r := range fleetStatus(t, eps).Proxies {
			if _, done := took[r.ID]; !done && r.ConfigRevision == rev {
				took[r.ID] = time.Since(start)
			}
		}
		if time.Since(start) > within {
			proxies[0].fail("revision %d applied by %v only after %v", rev, took, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
	var out []time.Duration
	for _, d := range took {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// metric reads one unlabelled metric of a proxy's /metrics; -1 if absent.
func metric(p *fleetProxy, name string) int64 {
	resp, err := client.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int64(n)
		}
	}
	return -1
}

func reloadFailures(p *fleetProxy) int64 { return metric(p, "shardproxy_config_reload_failures_total") }

// TestFleetConfig runs three proxies of one fleet under verified load while
// the configuration in etcd changes: each version reaches all three, a
// broken one is refused by all three, one etcd member down changes
// nothing, and the whole cluster down leaves every proxy serving its last
// configuration until etcd returns with a newer one.
func TestFleetConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, memcached and the binary")
	}
	c := testserver.StartEtcd(t, 3)
	eps := c.Endpoints()
	// Versions add fresh servers and remove servers of the first set only:
	// no key ever returns to a server that holds an old value of it, so
	// every get must return the value just set (or miss, when the key's
	// server changed between the set and the get).
	var mc []string
	for i := range 7 {
		mc = append(mc, fmt.Sprintf("%s mc%d", testserver.StartMemcached(t).Addr, i+1))
	}
	port := testserver.FreePort(t)
	rev := fleetPut(t, eps, fleetYAML(port, mc[0], mc[1], mc[2], mc[3]))
	proxies := startFleetProxies(t, eps, 3, port)
	waitApplied(t, eps, proxies, rev, time.Now(), 30*time.Second)
	var addrs []string
	for _, p := range proxies {
		addrs = append(addrs, p.addr)
	}
	var loads []*load
	for i, addr := range addrs {
		loads = append(loads, startLoadAs(addr, 4, fmt.Sprintf("p%dw", i)))
	}
	answered := func() (n int64) {
		for _, l := range loads {
			n += l.ok.Load() + l.misses.Load()
		}
		return n
	}

	// Servers added and removed: every proxy applies the version.
	var all []time.Duration
	for i, servers := range [][]string{mc[1:5], mc[2:6], mc[2:7]} {
		start := time.Now()
		rev = fleetPut(t, eps, fleetYAML(port, servers...))
		took := waitApplied(t, eps, proxies, rev, start, 10*time.Second)
		t.Logf("version %d (revision %d): applied by all three %v after the put", i+2, rev, took)
		all = append(all, took[len(took)-1])
		time.Sleep(300 * time.Millisecond)
	}
	slices.Sort(all)
	t.Logf("put to the last proxy's apply: p50 %v, max %v", all[len(all)/2], all[len(all)-1])

	// A broken version: refused by all three, the running one kept.
	before := make([]int64, len(proxies))
	for i, p := range proxies {
		before[i] = reloadFailures(p)
	}
	bad := fleetYAML(port, mc[0]) + "  hash: nope\n"
	cli, _ := fleet.Dial(fleet.Conn{Endpoints: eps})
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := cli.Put(ctx, fleetPrefix+"/config", bad) // fleet put would refuse it
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range proxies {
		waitFor(t, p.fail, "the broken version refused", func() bool { return reloadFailures(p) == before[i]+1 })
	}
	for _, p := range proxies {
		if metric(p, "shardproxy_fleet_refused_total") != 1 || metric(p, "shardproxy_fleet_config_revision") != rev ||
			metric(p, "shardproxy_fleet_proxies") != 3 || metric(p, "shardproxy_fleet_connected") != 1 {
			p.fail("%s: the refusal not shown in /metrics", p.id)
		}
	}
	for _, r := range fleetStatus(t, eps).Proxies {
		if r.ConfigRevision != rev || r.ConfigRevision >= resp.Header.Revision {
			proxies[0].fail("%s runs revision %d after the broken %d, want %d", r.ID, r.ConfigRevision, resp.Header.Revision, rev)
		}
	}

	// One member down: nothing changes.
	c.Members[0].Stop()
	start := time.Now()
	rev = fleetPut(t, eps[1:], fleetYAML(port, mc[3:7]...))
	waitApplied(t, eps[1:], proxies, rev, start, 20*time.Second)
	c.Members[0].Restart()

	// Every member down: the proxies keep serving; they catch up when
	// etcd returns.
	for _, m := range c.Members {
		m.Stop()
	}
	okBefore := answered()
	for _, p := range proxies { // once the lease (6 s) is lost
		waitForIn(t, p.fail, 15*time.Second, "etcd shown unreachable", func() bool {
			return metric(p, "shardproxy_fleet_connected") == 0 && metric(p, "shardproxy_fleet_errors_total") > 0
		})
	}
	if answered() <= okBefore {
		proxies[0].fail("no request answered while etcd was down")
	}
	for _, m := range c.Members {
		m.Restart()
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	rev = fleetPut(t, eps, fleetYAML(port, mc[4:7]...))
	took := waitApplied(t, eps, proxies, rev, start, 30*time.Second)
	t.Logf("after etcd returned: applied by all three %v after the put", took)

	for i, l := range loads {
		l.end()
		res := fmt.Sprintf("ok %d, misses %d, wrong %d, errors %d (first: %v)", l.ok.Load(), l.misses.Load(),
			l.wrong.Load(), l.errs.Load(), l.firstBad.Load())
		t.Logf("load through proxy %d: %s", i, res)
		if l.wrong.Load() != 0 || l.errs.Load() != 0 || l.ok.Load() == 0 {
			proxies[i].fail("load: %s", res)
		}
	}
	for _, p := range proxies {
		if err := p.stop(); err != nil {
			p.fail("exit: %v", err)
		}
	}
	// Each proxy revoked its lease as it stopped.
	if st := fleetStatus(t, eps); len(st.Proxies) != 0 {
		t.Fatalf("registrations left after the proxies stopped: %+v", st.Proxies)
	}
}

// TestFleetCommands: fleet put validates before publishing, get and status
// show what etcd holds; a proxy joins by its file's fleet: section, serves
// that file until etcd answers, and a POST /reload re-reads etcd; without
// a local file and without etcd the proxy gives up after --etcd-wait.
func TestFleetCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, memcached and the binary")
	}
	c := testserver.StartEtcd(t, 1)
	eps := strings.Join(c.Endpoints(), ",")
	mc := testserver.StartMemcached(t).Addr
	port := testserver.FreePort(t)
	dir := t.TempDir()
	fleetArgs := []string{"--etcd", eps, "--etcd-prefix", fleetPrefix}
	for _, tc := range []struct{ yml, want string }{
		{fleetYAML(port, mc+" a") + "  hash: nope\n", "hash"},
		{fleetYAML(port, mc+" a") + "fleet:\n  endpoints: " + eps + "\n  prefix: /x\n", "fleet: section"},
	} {
		file := filepath.Join(dir, "bad.yml")
		os.WriteFile(file, []byte(tc.yml), 0o644)
		var out, errb bytes.Buffer
		if code := run(append([]string{"fleet", "put", "-c", file}, fleetArgs...), &out, &errb); code != 1 ||
			!strings.Contains(errb.String(), tc.want) {
			t.Fatalf("fleet put of a bad file: code %d, %q", code, errb.String())
		}
	}
	if st := fleetStatus(t, c.Endpoints()); st.ConfigRevision != 0 {
		t.Fatalf("a refused file was published: %+v", st)
	}

	// A proxy whose file names the fleet serves the file until etcd
	// answers; etcd holds nothing yet.
	adminAddr := loopback(t)
	local := filepath.Join(dir, "local.yml")
	os.WriteFile(local, []byte(fleetYAML(port, mc+" a")+"fleet:\n  endpoints: "+eps+"\n  prefix: "+fleetPrefix+
		"\n  id: solo\n"), 0o644)
	cmd, _, fail := startProxy(t, testserver.Shardproxy(t), "-c", local, "-a", "127.0.0.1",
		"-s", strconv.Itoa(testserver.FreePort(t)), "--admin", adminAddr)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, fail, "the local file served", func() bool { return len(fleetStatus(t, c.Endpoints()).Proxies) == 1 })
	roundTrip(t, fail, addr, "before")

	rev := fleetPut(t, c.Endpoints(), fleetYAML(port, mc+" b"))
	waitApplied(t, c.Endpoints(), []*fleetProxy{{fail: fail}}, rev, time.Now(), 10*time.Second)
	roundTrip(t, fail, addr, "after")
	if code, body := postReload(t, fail, adminAddr); code != 200 || !strings.Contains(body, "etcd:"+fleetPrefix) {
		fail("POST /reload with a fleet: %d %s", code, body)
	}

	var out, errb bytes.Buffer
	if code := run(append([]string{"fleet", "status"}, fleetArgs...), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), fmt.Sprintf("configuration revision %d, 1 proxies", rev)) ||
		!regexpLine(out.String(), `^solo\s+\S+\s+\d+\s+\S+\s+`+strconv.FormatInt(rev, 10)+`\s`) {
		t.Fatalf("fleet status: code %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(append([]string{"fleet", "get"}, fleetArgs...), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), mc+":1 b") {
		t.Fatalf("fleet get: code %d\n%s%s", code, out.String(), errb.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		fail("exit: %v", err)
	}

	// No local file, no etcd: the proxy waits --etcd-wait, then exits.
	errb.Reset()
	start := time.Now()
	code := run([]string{"--etcd", loopback(t), "--etcd-prefix", fleetPrefix, "--etcd-wait", "1s",
		"-s", strconv.Itoa(testserver.FreePort(t)), "--admin", ""}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "no configuration to start with") || time.Since(start) > 10*time.Second {
		t.Fatalf("without etcd: code %d after %v: %s", code, time.Since(start), errb.String())
	}
}

// TestFleetCommandsTLS: fleet put and status reach an etcd that requires
// TLS and a client certificate with --etcd-ca, --etcd-cert and --etcd-key;
// without the certificate, or trusting another CA, they exit 1 naming the
// TLS error, and publish nothing.
func TestFleetCommandsTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd")
	}
	c := testserver.StartEtcdTLS(t, 1)
	file := filepath.Join(t.TempDir(), "fleet.yml")
	os.WriteFile(file, []byte(fleetYAML(testserver.FreePort(t), "127.0.0.1:9 a")), 0o644)
	fleetCmd := func(verb, timeout string, tls ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args := append([]string{"fleet", verb, "--etcd", strings.Join(c.Endpoints(), ","), "--etcd-prefix", fleetPrefix,
			"--timeout", timeout}, tls...)
		if verb == "put" {
			args = append(args, "-c", file)
		}
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	good := []string{"--etcd-ca", c.PKI.CA, "--etcd-cert", c.PKI.ClientCert, "--etcd-key", c.PKI.ClientKey}
	code, out, errs := fleetCmd("put", "10s", good...)
	m := regexp.MustCompile(`at revision (\d+), checksum`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("fleet put over TLS: code %d: %s%s", code, out, errs)
	}
	if code, out, errs := fleetCmd("status", "10s", good...); code != 0 ||
		!strings.Contains(out, "configuration revision "+m[1]+",") {
		t.Fatalf("fleet status over TLS: code %d: %s%s", code, out, errs)
	}
	other := testserver.NewPKI(t)
	for _, tc := range []struct {
		name, verb string
		flags      []string
		want       string
	}{
		{"put without a client certificate", "put", []string{"--etcd-ca", c.PKI.CA}, `tls: (bad certificate|certificate required)`},
		{"status trusting another CA", "status", []string{"--etcd-ca", other.CA, "--etcd-cert", c.PKI.ClientCert,
			"--etcd-key", c.PKI.ClientKey}, "x509: certificate signed by unknown authority"},
	} {
		if code, out, errs := fleetCmd(tc.verb, "2s", tc.flags...); code != 1 || !regexp.MustCompile(tc.want).MatchString(errs) {
			t.Errorf("%s: code %d, want 1 and an error matching %q: %s%s", tc.name, code, tc.want, out, errs)
		}
	}
	if code, out, errs := fleetCmd("status", "10s", good...); code != 0 ||
		!strings.Contains(out, "configuration revision "+m[1]+",") {
		t.Fatalf("fleet status after the refused put: code %d: %s%s", code, out, errs)
	}
}

func regexpLine(s, re string) bool {
	return regexp.MustCompile(`(?m)` + re).MatchString(s)
}

// waitForIn polls cond for up to d.
func waitForIn(t *testing.T, fail func(string, ...any), d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			fail("timed out after %v waiting for %s", d, what)
		}
	}
}

// TestFleetPutServersFrom: fleet put checks a pool that takes its servers
// from DNS as -t does, its name resolved first, and publishes it; checked
// without the answer, the pool would have no server and be refused.
func TestFleetPutServersFrom(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, memcached and a DNS server")
	}
	c := testserver.StartEtcd(t, 1)
	mc := map[string]*testserver.Server{"mc-0": testserver.StartMemcached(t)}
	d := testserver.StartDNS(t)
	const name = "_memcache._tcp.cache.test"
	d.SetSRV(name, srvTargets(mc, "mc-0")...)
	yml := fmt.Sprintf("cache:\n  listen: 127.0.0.1:%d\n  auto_eject_hosts: true\n  servers_from:\n"+
		"    dns: %s\n    resolver: %s\n", testserver.FreePort(t), name, d.Addr)
	rev := fleetPut(t, c.Endpoints(), yml)
	if st := fleetStatus(t, c.Endpoints()); st.ConfigRevision != rev {
		t.Fatalf("published at revision %d, etcd holds %+v", rev, st)
	}
}
