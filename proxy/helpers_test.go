package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// startProxy runs a proxy for yaml (whose pool listens on 127.0.0.1:0) and
// returns the address of pool name.
func startProxy(t testing.TB, yaml, name string) (*proxy.Server, string) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	srv, _ := startProxyCfg(t, cfg)
	return srv, srv.Addr(name).String()
}

// startProxyCfg runs a proxy for cfg until the test ends.
func startProxyCfg(t testing.TB, cfg *config.Config) (*proxy.Server, error) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := proxy.New(cfg, proxy.Options{Logger: log})
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
	return srv, nil
}

// runProxy starts a proxy for cfg with opts and shuts it down when the test
// ends.
func runProxy(t testing.TB, cfg *config.Config, opts proxy.Options) *proxy.Server {
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
		srv.Shutdown(ctx)
	})
	return srv
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// memcachedPool starts n memcached servers and returns a pool YAML for them
// with extra options appended.
func memcachedPool(t testing.TB, n int, extra string, args ...string) ([]*testserver.Server, string) {
	t.Helper()
	servers := make([]*testserver.Server, n)
	var b strings.Builder
	b.WriteString("mc:\n  listen: 127.0.0.1:0\n")
	b.WriteString(extra)
	b.WriteString("  servers:\n")
	for i := range servers {
		servers[i] = testserver.StartMemcached(t, args...)
		fmt.Fprintf(&b, "    - %s:1\n", servers[i].Addr)
	}
	return servers, b.String()
}

// ioTimeout bounds a test client's reads and writes. It is generous: CI runs
// every package's tests at once under -race on two cores, and a test that
// means to check timing measures it itself.
const ioTimeout = 30 * time.Second

// client is a minimal memcached text-protocol client for tests.
type client struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *client) send(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// line reads one reply line without its "\r\n".
func (c *client) line() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read line: %v (got %q)", err, l)
	}
	return strings.TrimSuffix(l, "\r\n")
}

// readN reads exactly n bytes.
func (c *client) readN(n int) string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(b)
}

// reply reads one whole reply: a line, or VALUE blocks up to END, or a VA
// block, and returns it with "\r\n" line ends.
func (c *client) reply() string {
	c.t.Helper()
	var b strings.Builder
	for {
		l := c.line()
		b.WriteString(l + "\r\n")
		var key string
		var flags, n int
		switch {
		case strings.HasPrefix(l, "VALUE "):
			if _, err := fmt.Sscanf(l, "VALUE %s %d %d", &key, &flags, &n); err != nil {
				c.t.Fatalf("bad VALUE line %q", l)
			}
			b.WriteString(c.readN(n + 2))
			continue
		case strings.HasPrefix(l, "VA "):
			if _, err := fmt.Sscanf(l, "VA %d", &n); err != nil {
				c.t.Fatalf("bad VA line %q", l)
			}
			b.WriteString(c.readN(n + 2))
		case strings.HasPrefix(l, "STAT "):
			continue
		}
		return b.String()
	}
}

// do sends req and returns one reply.
func (c *client) do(req string) string {
	c.t.Helper()
	c.send(req)
	return c.reply()
}

// expectClosed asserts that the proxy closes the connection (after any
// replies already read).
func (c *client) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := io.ReadAll(c.r)
	if err != nil && !isReset(err) {
		c.t.Fatalf("expected close, got error %v after %q", err, b)
	}
	if len(b) != 0 {
		c.t.Fatalf("expected close, got %q", b)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

// direct asks one memcached server for key and returns its value, or "" on a miss.
func direct(t testing.TB, addr, key string) (string, bool) {
	t.Helper()
	c := dial(t, addr)
	defer c.nc.Close()
	r := c.do("get " + key + "\r\n")
	if r == "END\r\n" {
		return "", false
	}
	lines := strings.SplitN(r, "\r\n", 3)
	return lines[1], true
}
