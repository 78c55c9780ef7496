package examples_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// The fleet example's ports, as indexes of run.ports: the pool, the pool
// the second version adds and the HTTP admin, each proxy's on its own
// loopback address (run.conf's proxies).
const (
	fleetPool     = 0
	fleetSessions = 8
	fleetAdmin    = 19
)

var fleetHosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// fleetApplyBound bounds how long every proxy may take to run a version
// published to etcd; the fleet applies it on the watch event, in well under
// a second on loopback.
const fleetApplyBound = 15 * time.Second

// TestExampleFleet runs examples/fleet: three etcd members, dnsmasq, three
// memcached and three proxies that take their configuration from etcd and
// their servers from an SRV name. It talks to every proxy (a key written
// through each is read through the next), runs the two commands the
// banner prints (publish the second version, show the fleet) and waits
// until all three run that version. Then it stops one memcached, as the
// page suggests: every proxy must run the ring without it at one version
// and answer for its keys from the other two. Last it stops the script as
// Ctrl-C would.
func TestExampleFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers; not in -short")
	}
	bin := testserver.Shardproxy(t)
	r := start(t, bin, "fleet", nil)
	doc := readDoc(t, "docs/fleet.md")
	if !strings.Contains(doc, r.docCommand()) {
		t.Errorf("docs/fleet.md does not show the command the script printed:\n%s", r.docCommand())
	}
	if got, want := r.try(t), examples[0].want; got != want {
		t.Errorf("%s\nanswered %q\nwant      %q", r.command, got, want)
	}
	r.everyProxy(t)

	put, status, metrics := r.fleetCommands(t, bin)
	for _, c := range []string{put, status, metrics} {
		if d := r.docForm(strings.ReplaceAll(c, bin, "bin/shardproxy")); !strings.Contains(doc, d) {
			t.Errorf("docs/fleet.md does not show the command the script printed:\n%s", d)
		}
	}
	out := r.run(t, put)
	m := regexp.MustCompile(`at revision (\d+), checksum ([0-9a-f]{12})$`).FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		t.Fatalf("%s printed no revision and checksum:\n%s", put, out)
	}
	rev, sum := m[1], m[2]
	// Each proxy binds its own listen host, and each shows the checksum
	// of the version as published: the same on all three.
	r.waitApplied(t, status, metrics, rev, sum)
	for _, h := range fleetHosts {
		if got, want := setGet(t, r.addr(h, fleetSessions), "s"), "STORED\r\nVALUE s 0 1\r\nv\r\nEND\r\n"; got != want {
			t.Errorf("the pool sessions of the second version on %s answered %q, want %q", h, got, want)
		}
	}
	r.ejectOne(t, status, metrics)
	r.everyProxy(t)
	r.stop(t, true)
	for _, h := range fleetHosts[1:] {
		for _, i := range []int{fleetPool, fleetSessions, 18, fleetAdmin} {
			if c, err := net.DialTimeout("tcp", r.addr(h, i), time.Second); err == nil {
				_ = c.Close()
				t.Errorf("%s still listens after the script exited", r.addr(h, i))
			}
		}
	}
}

// addr is the example's port i on host.
func (r *run) addr(host string, i int) string {
	return net.JoinHostPort(host, strconv.Itoa(r.ports[i]))
}

// everyProxy writes a key through each proxy and reads it through the
// next: the three apply one configuration, so the key is on one server.
func (r *run) everyProxy(t *testing.T) {
	t.Helper()
	for i, h := range fleetHosts {
		key := "k" + strconv.Itoa(i)
		if got, want := setGet(t, r.addr(h, fleetPool), key), "STORED\r\nVALUE "+key+" 0 1\r\nv\r\nEND\r\n"; got != want {
			t.Errorf("set and get %s through %s answered %q, want %q", key, h, got, want)
		}
		next := fleetHosts[(i+1)%len(fleetHosts)]
		if got, want := roundTripAddr(t, r.addr(next, fleetPool), "get "+key+"\r\n"), "VALUE "+key+" 0 1\r\nv\r\nEND\r\n"; got != want {
			t.Errorf("%s written through %s, read through %s: %q, want %q", key, h, next, got, want)
		}
	}
}

// ejectOne stops the second memcached (mc2.cache.fleet.example, port
// index 2) and sends gets through every proxy until fleet status shows the
// ring of the pool cache without it, then checks that every proxy runs that
// ring version.
func (r *run) ejectOne(t *testing.T, status, metrics string) {
	t.Helper()
	port := strconv.Itoa(r.ports[2])
	m := regexp.MustCompile(`memcached on 127\.0\.0\.1:` + port + ` \(pid (\d+)\)`).FindStringSubmatch(r.out.String())
	if m == nil {
		t.Fatalf("the script names no memcached on port %s:\n%s", port, r.out.String())
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ring := regexp.MustCompile(`(?m)^ring cache: version (\d+), ejected \[mc2\.cache\.fleet\.example\]$`)
	stopped := time.Now()
	deadline := stopped.Add(fleetApplyBound)
	var out string
	for {
		for _, h := range fleetHosts {
			for i := range 10 { // some of these keys are mc2's: the proxies see it fail
				roundTripAddr(t, r.addr(h, fleetPool), "get e"+strconv.Itoa(i)+"\r\n")
			}
		}
		out = r.run(t, status)
		if v := ring.FindStringSubmatch(out); v != nil {
			t.Logf("ring version %s without mc2 after %v", v[1], time.Since(stopped).Round(time.Millisecond))
			want := `shardproxy_ring_version{pool="cache"} ` + v[1] + "\n"
			for _, h := range fleetHosts {
				if got, _ := r.output(strings.Replace(metrics, fleetHosts[0]+":", h+":", 1)); !strings.Contains(got, want) {
					t.Errorf("%s runs another ring than fleet status shows (%s):\n%s", h, strings.TrimSpace(want), got)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v with memcached %s stopped, fleet status:\n%s", fleetApplyBound, port, out)
		}
	}
}

// fleetCommands returns the three commands the banner prints after
// "Publish a new configuration", once the banner is complete: fleet put,
// fleet status, and the one that reads the first proxy's metrics.
func (r *run) fleetCommands(t *testing.T, bin string) (put, status, metrics string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.out.String(), "Ctrl-C stops") {
		if time.Now().After(deadline) {
			t.Fatalf("no end of the banner:\n%s", r.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, line := range strings.Split(r.out.String(), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, bin+" fleet put "):
			put = line
		case strings.HasPrefix(line, bin+" fleet status "):
			status = line
		case strings.HasPrefix(line, "curl -s "+fleetHosts[0]+":"):
			metrics = line
		}
	}
	if put == "" || status == "" || metrics == "" {
		t.Fatalf("the banner has no fleet put, fleet status and metrics commands:\n%s", r.out.String())
	}
	return put, status, metrics
}

// waitApplied waits until every proxy runs the version published at
// revision rev: its running configuration has the pool sessions, its
// metrics (the banner's command, run for each proxy's address) show rev,
// and `shardproxy fleet status` shows it at rev.
func (r *run) waitApplied(t *testing.T, status, metrics, rev, sum string) {
	t.Helper()
	start := time.Now()
	var last string
	for {
		applied := 0
		want := "shardproxy_fleet_config_revision " + rev + "\n"
		for _, h := range fleetHosts {
			m, _ := r.output(strings.Replace(metrics, fleetHosts[0]+":", h+":", 1)) // grep fails until it is there
			if strings.Contains(httpGet(t, r.addr(h, fleetAdmin), "/config"), "\nsessions:") && strings.Contains(m, want) {
				applied++
			}
		}
		last = r.run(t, status)
		if applied == len(fleetHosts) && statusShows(last, rev, sum, len(fleetHosts)) {
			t.Logf("every proxy runs revision %s after %v", rev, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > fleetApplyBound {
			t.Fatalf("after %v, %d of %d proxies run the second version; fleet status:\n%s",
				fleetApplyBound, applied, len(fleetHosts), last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// statusShows reports whether fleet status's output has a line for each
// of proxy1..proxyN that names revision rev and then checksum sum (each
// proxy binds its own listen host; the checksum is of the version as
// published, the same on all).
func statusShows(out, rev, sum string, n int) bool {
	word := regexp.MustCompile(`\b` + rev + `\s+` + sum + `\b`)
	for i := 1; i <= n; i++ {
		id := regexp.MustCompile(`\bproxy` + strconv.Itoa(i) + `\b`)
		found := false
		for _, line := range strings.Split(out, "\n") {
			found = found || (id.MatchString(line) && word.MatchString(line))
		}
		if !found {
			return false
		}
	}
	return true
}

// run runs a command line the banner printed and returns its output.
func (r *run) run(t *testing.T, line string) string {
	t.Helper()
	out, err := r.output(line)
	if err != nil {
		t.Fatalf("%s: %v\n%s\nscript output:\n%s", line, err, out, r.out.String())
	}
	return out
}

// output runs a command line in bash and returns its output.
func (r *run) output(line string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-c", line).CombinedOutput()
	return string(out), err
}

// setGet sets key to "v" through the proxy at addr and gets it back on
// one connection; it returns the answer.
func setGet(t *testing.T, addr, key string) string {
	t.Helper()
	return roundTripAddr(t, addr, fmt.Sprintf("set %s 0 0 1\r\nv\r\nget %s\r\n", key, key))
}

// roundTripAddr sends memcache requests to addr and returns the answers up
// to the last END (or an error line).
func roundTripAddr(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	br := bufio.NewReader(c)
	for !strings.HasSuffix(b.String(), "END\r\n") && !strings.Contains(b.String(), "ERROR") {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			break
		}
	}
	return b.String()
}

// httpGet returns the body of GET path on the HTTP admin at addr.
func httpGet(t *testing.T, addr, path string) string {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
