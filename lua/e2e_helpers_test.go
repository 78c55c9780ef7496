package lua_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// The end-to-end tests run route files in a real proxy: a client socket
// talks to a Lua pool whose backends are real memcached (and redis-server)
// processes on loopback ports.

// logBuffer collects a proxy's log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count returns how many log lines contain s.
func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

// writeRoutes writes src to a route file in a fresh directory.
func writeRoutes(t testing.TB, src string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "routes.lua")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// startLua runs a proxy with one Lua pool, "lp", routed by the file at
// path, with extra YAML keys for the pool, and returns its address and log.
func startLua(t testing.TB, path, extra string) (string, *logBuffer) {
	t.Helper()
	yaml := "lp:\n  listen: 127.0.0.1:0\n  lua: " + path + "\n" + extra
	srv, logs, err := newProxy(t, yaml)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	return srv.Addr("lp").String(), logs
}

// newProxy builds and starts a proxy for yaml.
func newProxy(t testing.TB, yaml string) (*proxy.Server, *logBuffer, error) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	logs := &logBuffer{}
	srv, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		return nil, logs, err
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs)
		}
	})
	return srv, logs, nil
}

// luaRoutes writes src, with every "{{NAME}}" replaced by ports[NAME], and
// starts a proxy for it.
func luaRoutes(t testing.TB, src string, ports map[string]int, extra string) (string, *logBuffer) {
	t.Helper()
	for name, port := range ports {
		src = strings.ReplaceAll(src, "{{"+name+"}}", strconv.Itoa(port))
	}
	return startLua(t, writeRoutes(t, src), extra)
}

// testdataRoutes loads testdata/lua/name unchanged but for its backend
// ports: each literal port in ports is replaced by the port of the server
// started for it.
func testdataRoutes(t testing.TB, name string, ports map[int]int, extra string) (string, *logBuffer) {
	t.Helper()
	return fileRoutes(t, filepath.Join("..", "testdata", "lua", name), ports, extra)
}

// fileRoutes loads the route file at path with each literal port in ports
// replaced by the port of the server started for it, and starts a proxy.
func fileRoutes(t testing.TB, path string, ports map[int]int, extra string) (string, *logBuffer) {
	t.Helper()
	return startLua(t, writeRoutes(t, withPorts(t, path, ports)), extra)
}

// withPorts returns the file at path with each literal port in ports
// replaced; it fails the test if the file does not mention one.
func withPorts(t testing.TB, path string, ports map[int]int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(path)
	src := string(b)
	for from, to := range ports {
		re := regexp.MustCompile(`\b` + strconv.Itoa(from) + `\b`)
		if !re.MatchString(src) {
			t.Fatalf("%s does not mention port %d", name, from)
		}
		src = re.ReplaceAllString(src, strconv.Itoa(to))
	}
	return src
}

// client is a minimal text-protocol client.
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
	return &client{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *client) send(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// line reads one line, without "\r\n".
func (c *client) line() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, l)
	}
	return strings.TrimSuffix(l, "\r\n")
}

// reply reads one memcache reply: a line, VALUE blocks up to END, or a VA
// block, with "\r\n" line ends.
func (c *client) reply() string {
	c.t.Helper()
	var b strings.Builder
	for {
		l := c.line()
		b.WriteString(l + "\r\n")
		var n int
		switch {
		case strings.HasPrefix(l, "VALUE "):
			f := strings.Fields(l)
			n, _ = strconv.Atoi(f[3])
			b.WriteString(c.readN(n + 2))
			continue
		case strings.HasPrefix(l, "VA "):
			n, _ = strconv.Atoi(strings.Fields(l)[1])
			b.WriteString(c.readN(n + 2))
		}
		return b.String()
	}
}

func (c *client) readN(n int) string {
	c.t.Helper()
	buf := make([]byte, n)
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c.r, buf); err != nil {
		c.t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(buf)
}

// do sends req and reads one reply.
func (c *client) do(req string) string {
	c.t.Helper()
	c.send(req)
	return c.reply()
}

// timed sends req and returns its reply and how long it took.
func (c *client) timed(req string) (string, time.Duration) {
	c.t.Helper()
	start := time.Now()
	r := c.do(req)
	return r, time.Since(start)
}

// statLines sends req and returns its STAT lines by name, up to END.
func statLines(t *testing.T, c *client, req string) map[string]string {
	t.Helper()
	c.send(req)
	st := map[string]string{}
	for {
		l := c.line()
		if l == "END" {
			return st
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(l, "STAT "), " ")
		if !ok || !strings.HasPrefix(l, "STAT ") {
			t.Fatalf("%q: line %q", req, l)
		}
		st[name] = value
	}
}

func statInt(t *testing.T, st map[string]string, name string) int {
	t.Helper()
	v, ok := st[name]
	if !ok {
		t.Fatalf("no stat %s in %v", name, st)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("stat %s = %q", name, v)
	}
	return n
}

// statsText sends a stats command and returns its answer as sent, up to
// and with END.
func statsText(c *client, cmd string) string {
	c.t.Helper()
	return strings.Join(append(statsLines(c, cmd), "END"), "\r\n") + "\r\n"
}

// statsOf reads a "stats NAME" answer by name, as statLines does.
func statsOf(t *testing.T, c *client, name string) map[string]string {
	t.Helper()
	return statLines(t, c, "stats "+name+"\r\n")
}

// get asks the server at addr for key directly and returns its value, or
// "" and false on a miss.
func get(t testing.TB, addr, key string) (string, bool) {
	t.Helper()
	c := dial(t, addr)
	defer c.nc.Close()
	r := c.do("get " + key + "\r\n")
	if r == "END\r\n" {
		return "", false
	}
	lines := strings.Split(r, "\r\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "VALUE "+key+" ") {
		t.Fatalf("get %s from %s: %q", key, addr, r)
	}
	return lines[1], true
}

// setReq is the request that stores key=value.
func setReq(key, value string) string {
	return fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value)
}

// set stores key=value on the server at addr directly.
func set(t testing.TB, addr, key, value string) {
	t.Helper()
	c := dial(t, addr)
	defer c.nc.Close()
	if r := c.do(setReq(key, value)); r != "STORED\r\n" {
		t.Fatalf("set %s on %s: %q", key, addr, r)
	}
}

// relayTo starts a TCP relay on a loopback port to the server at addr and
// returns its port: for each connection it dials addr and runs up (client
// to server) and down (server to client) until either returns, closing
// the destination then. The test's end closes the relay and everything it
// opened.
func relayTo(t testing.TB, addr string, up, down func(dst, src net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			srv, err := net.Dial("tcp", addr)
			if err != nil {
				cl.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, cl, srv)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); defer srv.Close(); up(srv, cl) }()
			go func() { defer wg.Done(); defer cl.Close(); down(cl, srv) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// relayCopy is a relay direction that passes bytes on as they come.
func relayCopy(dst, src net.Conn) { io.Copy(dst, src) }

// relayEach is a relay direction that hands each chunk it reads to seen
// before passing it on.
func relayEach(seen func([]byte)) func(dst, src net.Conn) {
	return func(dst, src net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				seen(buf[:n])
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
}

// delayRelay forwards TCP connections to addr, holding every chunk the
// server sends for d (from when it arrived) before passing it on: a
// backend that answers d late. It returns the relay's port.
func delayRelay(t testing.TB, addr string, d time.Duration) int {
	t.Helper()
	return relayTo(t, addr, relayCopy, func(dst, src net.Conn) { relayDelayed(dst, src, d) })
}

// relayDelayed copies src to dst, each chunk d after it was read.
type chunk struct {
	b  []byte
	at time.Time
}

func relayDelayed(dst, src net.Conn, d time.Duration) {
	ch := make(chan chunk, 64)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 16<<10)
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{buf[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at.Add(d)))
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			for range ch {
			}
			return
		}
	}
}

// closedPort returns a loopback port nothing listens on: a backend that
// refuses connections.
func closedPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// silentPort returns a loopback port that accepts connections and never
// answers.
func silentPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// memcached starts n memcached servers.
func memcached(t testing.TB, n int) []*testserver.Server {
	t.Helper()
	s := make([]*testserver.Server, n)
	for i := range s {
		s[i] = testserver.StartMemcached(t)
	}
	return s
}

// eventually polls cond until it holds or 5s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tap is a relay in front of a backend that records every byte sent to
// it, over all its connections.
type tap struct {
	port int
	mu   sync.Mutex
	up   strings.Builder
}

// newTap starts a relay to the server at addr.
func newTap(t testing.TB, addr string) *tap {
	t.Helper()
	tp := &tap{}
	tp.port = relayTo(t, addr, relayEach(func(b []byte) {
		tp.mu.Lock()
		tp.up.Write(b)
		tp.mu.Unlock()
	}), relayCopy)
	return tp
}

// withoutChecks drops from what a backend received the proxy's socket
// validations: "version\r\n", followed by "mn\r\n" where the pool asks
// whether the server speaks meta (server_protocol auto, the default).
func withoutChecks(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "version\r\nmn\r\n", ""), "version\r\n", "")
}

// unjoined is s with each multi-key get or gets line as one line per key.
// A backend socket joins one-key gets written in one batch into one
// multi-get, which memcached answers as it would the gets one by one: how
// many are joined depends on how the requests meet the socket's writer.
func unjoined(s string) string {
	lines := strings.SplitAfter(s, "\r\n")
	for i, line := range lines {
		cmd, rest, _ := strings.Cut(line, " ")
		if keys := strings.Fields(rest); (cmd == "get" || cmd == "gets") && len(keys) > 1 {
			lines[i] = cmd + " " + strings.Join(keys, "\r\n"+cmd+" ") + "\r\n"
		}
	}
	return strings.Join(lines, "")
}

// sent returns what the backend received, without the proxy's
// validations, its multi-gets unjoined.
func (tp *tap) sent() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return unjoined(withoutChecks(tp.up.String()))
}

// take returns what the backend received since the last take or reset,
// without the validations and its multi-gets unjoined, and forgets it.
func (tp *tap) take() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	s := unjoined(withoutChecks(tp.up.String()))
	tp.up.Reset()
	return s
}

// reset forgets what was recorded.
func (tp *tap) reset() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.up.Reset()
}

// waitSent waits until the backend received want, and fails if it
// received anything else (multi-gets unjoined on both sides).
func (tp *tap) waitSent(t testing.TB, what, want string) {
	t.Helper()
	want = unjoined(want)
	deadline := time.Now().Add(5 * time.Second)
	for tp.sent() != want && len(tp.sent()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := tp.sent(); got != want {
		t.Errorf("%s: the backend received\n%q\nwant\n%q", what, got, want)
	}
}

// tapRelay starts a tap in front of addr and returns its port and the tap.
func tapRelay(t testing.TB, addr string) (int, *tap) {
	t.Helper()
	tp := newTap(t, addr)
	return tp.port, tp
}
