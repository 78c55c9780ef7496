package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// testLogger discards logs unless the test runs with -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startProxy runs a proxy for cfg until the test ends.
func startProxy(t testing.TB, cfg *config.Config) *proxy.Server {
	t.Helper()
	return startProxyOpts(t, cfg, proxy.Options{Logger: testLogger(t)})
}

// startProxyOpts runs a proxy for cfg with opts until the test ends.
func startProxyOpts(t testing.TB, cfg *config.Config, opts proxy.Options) *proxy.Server {
	t.Helper()
	srv, err := proxy.New(cfg, opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return srv
}

// startHTTP serves src's admin endpoints on a loopback port until the test
// ends.
func startHTTP(t testing.TB, src admin.Source) *admin.HTTPServer {
	t.Helper()
	web := admin.NewHTTP(src, admin.HTTPConfig{Logger: testLogger(t)})
	if err := web.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	return web
}

// startStats serves src's stats port on a loopback port, aggregated every
// interval, until the test ends.
func startStats(t testing.TB, src admin.Source, interval time.Duration) *admin.StatsServer {
	t.Helper()
	stats := admin.NewStats(src, admin.StatsConfig{Interval: interval, Logger: testLogger(t)})
	if err := stats.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stats.Close() })
	return stats
}

// httpBody GETs url and returns the body of a 200 reply.
func httpBody(t testing.TB, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}

// mcYAML is a one-pool memcached config named "mc" on listen over servers,
// with extra pool keys.
func mcYAML(listen, extra string, servers ...string) string {
	var b strings.Builder
	b.WriteString("mc:\n  listen: " + listen + "\n  timeout: 2000\n")
	b.WriteString(extra)
	b.WriteString("  servers:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "    - %s:1\n", s)
	}
	return b.String()
}

// writeConfig writes yaml to a file in dir and loads it.
func writeConfig(t testing.TB, path, yaml string) *config.Config {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

// fixture is a running proxy over real memcached servers, loaded from a
// file so that reload tests can change it. It listens on a fixed free port
// rather than port 0, which a reload would move.
type fixture struct {
	path    string
	listen  string
	srv     *proxy.Server
	servers []*testserver.Server
	addrs   []string
}

func newFixture(t testing.TB, n int, extra string) *fixture {
	t.Helper()
	f := &fixture{path: filepath.Join(t.TempDir(), "conf.yml"),
		listen: "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))}
	for range n {
		s := testserver.StartMemcached(t)
		f.servers = append(f.servers, s)
		f.addrs = append(f.addrs, s.Addr)
	}
	f.srv = startProxy(t, writeConfig(t, f.path, f.yaml(extra)))
	return f
}

// yaml is the fixture's config with extra pool keys.
func (f *fixture) yaml(extra string) string { return mcYAML(f.listen, extra, f.addrs...) }

// reload is what the command's reload does, without the admin moves.
func (f *fixture) reload() (admin.ReloadResult, error) {
	cfg, err := config.Load(f.path)
	if err != nil {
		f.srv.ReloadFailed(f.path, err)
		return admin.ReloadResult{}, err
	}
	if err := f.srv.Reload(cfg); err != nil {
		return admin.ReloadResult{}, err
	}
	return admin.ReloadResult{Source: cfg.Source, Checksum: f.srv.Info().Checksum}, nil
}

// mc is a minimal memcached text-protocol client.
type mc struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialMC(t testing.TB, addr string) *mc {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &mc{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// do sends req and reads reply lines up to and including one that starts
// with a word in ends.
func (c *mc) do(req string, ends ...string) string {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	var b strings.Builder
	for {
		l, err := c.r.ReadString('\n')
		b.WriteString(l)
		if err != nil {
			c.t.Fatalf("read: %v (got %q)", err, b.String())
		}
		for _, e := range ends {
			if strings.HasPrefix(l, e) {
				return b.String()
			}
		}
	}
}

// readStats connects to a stats port and returns everything it sends.
func readStats(t testing.TB, addr string) []byte {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial stats %s: %v", addr, err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("read stats: %v (got %q)", err, b)
	}
	return b
}

// statsDoc decodes a stats reply.
func statsDoc(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("stats JSON: %v\n%s", err, b)
	}
	return doc
}

// eventually polls cond until it holds or 10 seconds pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
