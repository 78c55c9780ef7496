package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// artifactsEnv names a directory where TestStatusPageInBrowser also
// writes its screenshot, for CI to keep.
const artifactsEnv = "SHARDPROXY_ARTIFACTS"

// TestStatusPageInBrowser loads the status page in headless Chromium
// against a proxy over three real memcached, kills one, and checks that
// the page, already open, turns that server bad by its live update.
//
// "Already open" is made exact: the test keeps the page as the admin
// served it while every server was up, and Chromium loads that copy from a
// front server which passes every other request (the script, its fetches
// of status/live) to the admin. Whatever the browser shows of the dead
// server therefore came from the script's updates, not from the first
// render. Chromium runs with a virtual time budget, which lets the page's
// one-second timer fire several times and waits for its fetches, so the
// test does not depend on the machine's speed.
func TestStatusPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs memcached and Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian package chromium; make deps installs it): the status page is not loaded in a browser")
	}
	f := newFixture(t, 3, "  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 60000\n")
	web := admin.NewHTTP(f.srv, admin.HTTPConfig{Logger: testLogger(t)})
	if err := web.Listen(freeAddr(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	base := "http://" + web.Addr().String()

	c := dialMC(t, f.listen)
	for i := range 50 {
		c.do(fmt.Sprintf("set key%d 0 0 1\r\nx\r\n", i), "STORED")
	}
	// The victim is the server most keys went to (keys cluster on the
	// ring, and one server may have none of these).
	vi, victim := 0, ""
	var most int64 = -1
	for _, s := range f.srv.Stats().Pools[0].Servers {
		if s.Requests > most {
			most, victim = s.Requests, s.Name // the server's name: its address as written
		}
	}
	for i, a := range f.addrs {
		if a == victim {
			vi = i
		}
	}
	stale := httpBody(t, base+"/")
	for _, name := range f.addrs {
		if got := rowState(stale, name); got != "up" {
			t.Fatalf("before the failure, server %s is %q on the page", name, got)
		}
	}

	f.servers[vi].Stop()
	var last proxy.ServerStats
	for deadline := time.Now().Add(10 * time.Second); !last.State.Bad; {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not mark the killed server bad: %+v", last)
		}
		for i := range 50 {
			c.do(fmt.Sprintf("get key%d\r\n", i), "END", "SERVER_ERROR")
		}
		for _, s := range f.srv.Stats().Pools[0].Servers {
			if s.Name == victim {
				last = s
			}
		}
	}

	// The page shows the newest sample, taken once a second: wait for one
	// taken after the proxy marked the server bad.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(httpBody(t, base+"/status"), `"ejected"`); {
		if time.Now().After(deadline) {
			t.Fatal("no sample shows the killed server ejected")
		}
		time.Sleep(100 * time.Millisecond)
	}
	front := serveFront(t, stale, base)
	dom := runChromium(t, chromium, "--virtual-time-budget=5000", "--dump-dom", front+"/")
	if got := rowState(dom, victim); got != "ejected" {
		t.Errorf("after the kill, the open page shows server %s as %q, want ejected\n%s", victim, got, dom)
	}
	for _, name := range f.addrs {
		if got := rowState(dom, name); got != "up" && name != victim {
			t.Errorf("server %s shows %q, want up", name, got)
		}
	}
	if !strings.Contains(dom, "Updated live every second; last at") {
		t.Errorf("the page's script did not report an update:\n%s", dom)
	}
	// Without the script, a fresh load renders the same state.
	if got := rowState(httpBody(t, base+"/"), victim); got != "ejected" {
		t.Errorf("a fresh load shows server %s as %q, want ejected", victim, got)
	}

	shot := filepath.Join(t.ArtifactDir(), "status-page.png")
	runChromium(t, chromium, "--virtual-time-budget=3000", "--window-size=1400,900",
		"--hide-scrollbars", "--screenshot="+shot, front+"/")
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Fatalf("screenshot %s: %v %v", shot, fi, err)
	}
	t.Logf("screenshot of the page with server %s ejected: %s", victim, shot)
	if dir := os.Getenv(artifactsEnv); dir != "" {
		b, _ := os.ReadFile(shot)
		out := filepath.Join(dir, "status-page.png")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot copied to %s (%s)", out, artifactsEnv)
	}
}

// rowState returns the data-state of server name's row in page, or "".
func rowState(page, name string) string {
	re := regexp.MustCompile(`<tr data-server="` + regexp.QuoteMeta(name) + `" data-state="([a-z]+)"`)
	if m := re.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

// serveFront serves page at / and passes every other request to the
// admin at base; it returns its URL.
func serveFront(t *testing.T, page, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	ln, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
			return
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// runChromium runs headless Chromium with args and returns its standard
// output.
func runChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless=new", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--disable-extensions", "--user-data-dir=" + t.TempDir()}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, errs.Bytes())
	}
	return out.String()
}

// freeAddr is a free loopback address (in SHARDPROXY_PORT_RANGE if set).
func freeAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
}

// TestStatusPageSlowlogInBrowser: a request made slow by its server while
// the status page is open appears in the page's slowlog, by the page's
// live update, with the server that took the time, and its key among the
// pool's hot keys.
func TestStatusPageSlowlogInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs memcached and Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian package chromium; make deps installs it): the status page is not loaded in a browser")
	}
	var fp *faultproxy.Proxy
	srv, addr, base := startObserved(t, "  slowlog_threshold: 15\n  hot_keys: 3\n", func(a string) string {
		fp = faultproxy.New(t, a)
		return fp.Addr()
	})
	pipeline(t, addr, 1, 1, func(int) string { return "warm" })
	srv.ResetSlowlog("") // the warm get's dial may have been slow
	stale := httpBody(t, base+"/")
	if !strings.Contains(stale, "No slow requests.") {
		t.Fatalf("before the slow request the page shows a slowlog:\n%s", stale)
	}
	fp.Latency(faultproxy.Downstream, 30*time.Millisecond, 0)
	pipeline(t, addr, 1, 1, func(int) string { return "user:slow" })
	if n := len(srv.Slowlogs(-1)[0].Entries); n != 1 {
		t.Fatalf("slowlog holds %d entries", n)
	}
	// The page's figures, hot keys among them, are the history's last
	// sample (one a second; the slowlog is read as the page is made):
	// wait for one taken after the request.
	eventually(t, "a sample with the hot key", func() bool {
		return strings.Contains(httpBody(t, base+"/status/live"), `data-hot-key="user:slow"`)
	})
	front := serveFront(t, stale, base)
	dom := runChromium(t, chromium, "--virtual-time-budget=3000", "--dump-dom", front+"/")
	row := regexp.MustCompile(`<tr data-slow-id="1">(.*?)</tr>`).FindStringSubmatch(dom)
	if row == nil {
		t.Fatalf("the open page shows no slowlog entry:\n%s", dom)
	}
	for _, want := range []string{"<code>get</code>", "<code>user:slow</code>", "<td>s1</td>", "miss"} {
		if !strings.Contains(row[1], want) {
			t.Errorf("slowlog row %q lacks %q", row[1], want)
		}
	}
	if !strings.Contains(dom, `<tr data-hot-key="user:slow">`) || strings.Contains(stale, `<tr data-hot-key="user:slow">`) {
		t.Errorf("the open page's hot keys did not gain user:slow:\n%s", dom)
	}
}
