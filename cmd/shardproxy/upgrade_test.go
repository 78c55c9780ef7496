package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// upgradeProxy is a proxy binary copied where a test may replace it, run
// with a pid file; the process serving is the one the pid file names.
type upgradeProxy struct {
	bin, pidFile string
	logs         *testserver.Buffer
	fail         func(string, ...any)
}

// startUpgradeProxy runs a copy of the binary with args. Every process it
// becomes is killed when the test ends.
func startUpgradeProxy(t *testing.T, args ...string) *upgradeProxy {
	t.Helper()
	dir := t.TempDir()
	p := &upgradeProxy{bin: filepath.Join(dir, "shardproxy"), pidFile: filepath.Join(dir, "pid")}
	b, err := os.ReadFile(testserver.Shardproxy(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, logs, fail := startProxy(t, p.bin, append([]string{"-p", p.pidFile, "--admin", "127.0.0.1:0",
		"-a", "127.0.0.1", "-s", strconv.Itoa(testserver.FreePort(t))}, args...)...)
	go cmd.Process.Wait() // reaps the first process when it hands over (startProxy's cleanup waits for the log)
	p.logs, p.fail = logs, fail
	t.Cleanup(func() {
		if pid := p.pid(); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor(t, fail, "the pid file", func() bool { return p.pid() > 0 })
	return p
}

// pid is the pid file's process id, or 0.
func (p *upgradeProxy) pid() int {
	b, _ := os.ReadFile(p.pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// count is how many log lines contain s.
func (p *upgradeProxy) count(s string) int { return strings.Count(p.logs.String(), s) }

var logTime = regexp.MustCompile(`time=(\S+)`)

// drainTimes are how long each old process took from its new process's
// readiness to its exit, from the log.
func (p *upgradeProxy) drainTimes() []time.Duration {
	var out []time.Duration
	var from time.Time
	for _, line := range strings.Split(p.logs.String(), "\n") {
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, m[1])
		switch {
		case strings.Contains(line, "the new process is ready; draining"):
			from = at
		case strings.Contains(line, "shardproxy stopped") && !from.IsZero():
			out = append(out, at.Sub(from))
			from = time.Time{}
		}
	}
	return out
}

// upgrade sends SIGUSR2 and waits until the new process serves and the
// old one has exited.
func (p *upgradeProxy) upgrade(t *testing.T, n int) {
	t.Helper()
	old := p.pid()
	if err := syscall.Kill(old, syscall.SIGUSR2); err != nil {
		p.fail("SIGUSR2: %v", err)
	}
	waitFor(t, p.fail, fmt.Sprintf("upgrade %d: a new pid", n), func() bool { return p.pid() != old && p.pid() > 0 })
	waitFor(t, p.fail, fmt.Sprintf("upgrade %d: the old process exits", n), func() bool {
		return p.count("shardproxy stopped") >= n && !alive(old)
	})
}

// alive reports whether process pid runs: it exists and is no zombie (the
// old processes after the first are reaped by whoever adopts them, late).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestUpgradeUnderLoad upgrades the binary in place 10 times under 50
// verified clients of each protocol (memcached text and meta, Redis, Redis
// transactions), one of them through a unix socket: no reply is wrong or
// cut short, no connection is refused. Between two upgrades a new binary
// that exits at start leaves the old process serving.
//
// The old process hands every client connection to the new one at a
// request boundary (handconns.go), so no client sees its connection
// close and no request goes unanswered: the raw clients, which count a
// request with no reply as failed, must count none, and 50 goroutines on
// a go-redis client (its pool, its default retries) must see no error.
func TestUpgradeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary, runs memcached and redis-server")
	}
	mc := testserver.StartMemcached(t)
	rd := testserver.StartRedis(t)
	mcAddr, rdAddr := loopback(t), loopback(t)
	sock := filepath.Join(t.TempDir(), "meta.sock")
	conf := filepath.Join(t.TempDir(), "conf.yml")
	os.WriteFile(conf, []byte(fmt.Sprintf("mc:\n  listen: %s\n  timeout: 5000\n  servers:\n    - %s:1\n"+
		"meta:\n  listen: %s 0600\n  timeout: 5000\n  servers:\n    - %s:1\n"+
		"rd:\n  listen: %s\n  redis: true\n  timeout: 5000\n  servers:\n    - %s:1\n",
		mcAddr, mc.Addr, sock, mc.Addr, rdAddr, rd.Addr)), 0o644)
	p := startUpgradeProxy(t, "-c", conf)

	l := newClientLoad()
	l.start(50, "tcp", mcAddr, "text", textStep)
	l.start(50, "unix", sock, "meta", metaStep)
	l.start(50, "tcp", rdAddr, "redis", redisStep)
	l.start(50, "tcp", rdAddr, "tx", txStep)
	gr := newClientLoad()
	gr.startGoRedis(50, rdAddr)
	ended := false
	defer func() {
		if !ended {
			l.end()
		}
	}()
	progress := func(what string) {
		t.Helper()
		from := l.ok.Load()
		waitFor(t, p.fail, what+": requests answered", func() bool { return l.ok.Load() >= from+3000 })
	}
	progress("before the upgrades")
	start := time.Now()
	for i := 1; i <= 10; i++ {
		if i == 5 {
			failedUpgrade(t, p, conf)
		}
		p.upgrade(t, i)
		progress(fmt.Sprintf("after upgrade %d", i))
	}
	took := time.Since(start)
	l.end()
	gr.end()
	ended = true
	t.Logf("10 upgrades in %v; clients: %v; go-redis: %v", took.Round(time.Millisecond), l, gr)
	t.Logf("drains (new process ready to old one exited): %v", p.drainTimes())
	// The connections are handed over: no client sees its connection
	// close, and none loses a request.
	if l.wrong.Load()+l.failed.Load()+l.refused.Load()+l.closedIdle.Load() > 0 || l.ok.Load() == 0 {
		p.fail("clients: %v; first: %q", l, l.firstBad)
	}
	if gr.wrong.Load()+gr.failed.Load() > 0 || gr.ok.Load() == 0 {
		p.fail("go-redis: %v; first: %q", gr, gr.firstBad)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		p.fail("the unix socket after the upgrades: %v %v", fi, err)
	}
}

// failedUpgrade upgrades to a binary that exits at start, then with a
// configuration file that does not load, then with one that adds an
// address in use: each time the old process serves on. The binary and the
// file are put back.
func failedUpgrade(t *testing.T, p *upgradeProxy, conf string) {
	t.Helper()
	replace := func(path string, b []byte) {
		os.Remove(path) // the running binary's file is busy: a new one replaces it
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0") // an address the new process cannot bind
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct{ what, path, broken, logged string }{
		{"a broken binary", p.bin, "#!/bin/sh\necho broken binary >&2\nexit 3\n", "broken binary"},
		{"a bad configuration", conf, "mc: [\n", "syntax is invalid"},
		{"an address in use", conf, "busy:\n  listen: " + busy.Addr().String() + "\n  servers:\n    - 127.0.0.1:1:1\n",
			"address already in use"},
	} {
		good, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		broken := []byte(c.broken)
		if c.what == "an address in use" {
			broken = append(good, broken...)
		}
		replace(c.path, broken)
		pid, failures := p.pid(), p.count("upgrade failed")
		syscall.Kill(pid, syscall.SIGUSR2)
		waitFor(t, p.fail, c.what+": the failed upgrade logged", func() bool { return p.count("upgrade failed") > failures })
		if p.pid() != pid || !alive(pid) || p.count(c.logged) == 0 {
			p.fail("after an upgrade to %s: pid %d, was %d; want %q logged", c.what, p.pid(), pid, c.logged)
		}
		replace(c.path, good)
	}
}

// TestUpgradeNotify runs the binary as systemd's Type=notify does: it says
// READY=1 with its pid once it serves, and the process an upgrade starts
// says so with its own pid, so that systemd follows the main process.
func TestUpgradeNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary")
	}
	sockPath := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	t.Setenv("NOTIFY_SOCKET", sockPath)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	os.WriteFile(conf, []byte(proxyConf(loopback(t), "127.0.0.1:1", "1000", "127.0.0.1:0", loopback(t))), 0o644)
	p := startUpgradeProxy(t, "-c", conf)
	next := func(what string) string {
		t.Helper()
		sock.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 512)
		n, err := sock.Read(b)
		if err != nil {
			p.fail("%s: no notification: %v", what, err)
		}
		return string(b[:n])
	}
	if got, want := next("start"), fmt.Sprintf("READY=1\nMAINPID=%d\n", p.pid()); got != want {
		p.fail("at start: %q, want %q", got, want)
	}
	p.upgrade(t, 1)
	if got, want := next("upgrade"), fmt.Sprintf("READY=1\nMAINPID=%d\n", p.pid()); got != want {
		p.fail("after the upgrade: %q, want %q", got, want)
	}
}

// TestUpgradeFleet upgrades a fleet member: the new process joins the fleet
// (its own registration, under its own lease) before the old one leaves,
// and the fleet then lists the new process alone.
func TestUpgradeFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, memcached and the binary")
	}
	eps := testserver.StartEtcd(t, 1).Endpoints()
	port := testserver.FreePort(t)
	fleetPut(t, eps, fleetYAML(port, testserver.StartMemcached(t).Addr+" mc1"))
	p := startUpgradeProxy(t, "--etcd", strings.Join(eps, ","), "--etcd-prefix", fleetPrefix, "--etcd-wait", "20s")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	registered := func(pid int) bool {
		st := fleetStatus(t, eps)
		return len(st.Proxies) == 1 && st.Proxies[0].PID == pid
	}
	waitFor(t, p.fail, "the first process registered", func() bool { return registered(p.pid()) })
	roundTrip(t, p.fail, addr, "before")
	p.upgrade(t, 1)
	waitFor(t, p.fail, "the new process registered alone", func() bool { return registered(p.pid()) })
	roundTrip(t, p.fail, addr, "after")
	logs := p.logs.String()
	joined := strings.LastIndex(logs, "joined the fleet")
	left := strings.Index(logs, "the new process is ready; draining")
	if strings.Count(logs, "joined the fleet") != 2 || left < 0 || joined > left {
		p.fail("the new process did not join before the old one left")
	}
}

// TestUpgradeKeepsSessions upgrades under clients whose connections carry
// state: a RESP3 client with a name keeps both on the connection the new
// process takes over, and a memcache client over a unix socket keeps its
// connection. Neither sees its connection close.
func TestUpgradeKeepsSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary, runs memcached and redis-server")
	}
	rdAddr := loopback(t)
	sock := filepath.Join(t.TempDir(), "mc.sock")
	conf := filepath.Join(t.TempDir(), "conf.yml")
	os.WriteFile(conf, []byte(fmt.Sprintf("mc:\n  listen: %s\n  servers:\n    - %s:1\n"+
		"rd:\n  listen: %s\n  redis: true\n  servers:\n    - %s:1\n",
		sock, testserver.StartMemcached(t).Addr, rdAddr, testserver.StartRedis(t).Addr)), 0o644)
	p := startUpgradeProxy(t, "-c", conf)

	rd := dialClient(t, p.fail, "tcp", rdAddr)
	if err := rd.send(command("HELLO", "3", "SETNAME", "app")); err != nil {
		p.fail("HELLO: %v", err)
	}
	if l, err := rd.line(); err != nil || !strings.HasPrefix(l, "%") {
		p.fail("HELLO 3: %q %v", l, err)
	}
	rd.r.Discard(rd.r.Buffered()) // the map's fields; nothing else was sent
	mc := dialClient(t, p.fail, "unix", sock)
	if err := textStep(mc, "k", 1); err != nil {
		p.fail("before the upgrade: %v", err)
	}
	before := p.pid()
	p.upgrade(t, 1)

	if err := redisSteps(rd, []string{command("CLIENT", "GETNAME"), command("GET", "missing")}, []string{"app", "_"}); err != nil {
		p.fail("the Redis client after the upgrade: %v", err)
	}
	if err := textStep(mc, "k", 2); err != nil {
		p.fail("the memcache client after the upgrade: %v", err)
	}
	if p.pid() == before || p.count("adopted=2") != 1 {
		p.fail("the new process (pid %d, was %d) did not log 2 connections adopted", p.pid(), before)
	}
}

// TestUpgradeToOlderRelease upgrades to a new process that says it is ready
// without taking client connections, as a release before the hand-over
// does: the old process drains as a shutdown does, its idle client sees the
// connection close.
func TestUpgradeToOlderRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary")
	}
	addr := loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	os.WriteFile(conf, []byte(proxyConf(addr, testserver.StartMemcached(t).Addr, "1000", "127.0.0.1:0", loopback(t))), 0o644)
	p := startUpgradeProxy(t, "-c", conf)
	c := dialClient(t, p.fail, "tcp", addr)
	if err := textStep(c, "k", 1); err != nil {
		p.fail("before the upgrade: %v", err)
	}
	old := p.pid()
	os.Remove(p.bin)
	// Ready on descriptor 3, then nothing for a while, with no output
	// the test waits for.
	os.WriteFile(p.bin, []byte("#!/bin/sh\nprintf '\\001' >&3\nexec sleep 5 </dev/null >/dev/null 2>&1 3>&-\n"), 0o755)
	syscall.Kill(old, syscall.SIGUSR2)
	waitFor(t, p.fail, "the old process exits", func() bool { return !alive(old) })
	if p.count("hands_over_connections=false") != 1 {
		p.fail("the old process did not see a new process that takes no connections")
	}
	if !c.peerClosed() {
		p.fail("the idle client's connection is open after the drain")
	}
}

// dialClient dials a verified client's connection.
func dialClient(t *testing.T, fail func(string, ...any), network, addr string) *clientConn {
	t.Helper()
	nc, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		fail("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return newClientConn(nc)
}

// TestUpgradeDroppedListener upgrades to a configuration without one of
// the running addresses: the client of the address kept is handed over;
// the client of the address dropped is not handed to a process that would
// close it, but ends as a drain ends it, after its replies.
func TestUpgradeDroppedListener(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary, runs memcached")
	}
	mc := testserver.StartMemcached(t).Addr
	kept, dropped := loopback(t), loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	write := func(pools string) {
		if err := os.WriteFile(conf, []byte(pools), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pool := func(name, addr string) string {
		return fmt.Sprintf("%s:\n  listen: %s\n  servers:\n    - %s:1\n", name, addr, mc)
	}
	write(pool("kept", kept) + pool("dropped", dropped))
	p := startUpgradeProxy(t, "-c", conf)
	a, b := dialClient(t, p.fail, "tcp", kept), dialClient(t, p.fail, "tcp", dropped)
	for _, c := range []*clientConn{a, b} {
		if err := textStep(c, "k", 1); err != nil {
			p.fail("before the upgrade: %v", err)
		}
	}
	write(pool("kept", kept))
	p.upgrade(t, 1)
	if err := textStep(a, "k", 2); err != nil {
		p.fail("the kept address's client after the upgrade: %v", err)
	}
	if !b.peerClosed() {
		p.fail("the dropped address's client is still connected")
	}
	if p.count("a connection handed over is closed") != 0 || p.count("handed=1") != 1 {
		p.fail("want one connection handed over and none closed by the new process")
	}
}
