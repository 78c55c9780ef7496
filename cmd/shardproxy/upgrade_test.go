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
// The requests that got no reply at all are counted and logged, not held
// to 0: memcached's and Redis's protocols have no way to tell a client to
// go elsewhere, so the old process closes each connection after answering
// what it read, and a request a client writes as the connection closes
// (before the close reaches it) gets an EOF with no reply. A client that
// retries such a request on a new connection, as go-redis does, sees
// nothing: 50 goroutines on a go-redis client (its pool checks a
// connection before reuse, its default retries) run beside them and must
// see no error at all. The raw clients count such a request (see
// docs/operations.md, Upgrading in place).
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
	if l.wrong.Load()+l.cut.Load()+l.refused.Load() > 0 || l.ok.Load() == 0 {
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
