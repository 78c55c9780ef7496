package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// startTLSServer runs bin with args (which listen with TLS on addr) until
// the test ends and returns once a TLS handshake with addr succeeds and
// probe, sent over it, is answered with a line starting with want.
func startTLSServer(t *testing.T, bin string, args []string, addr string, c *tls.Config, probe, want string) {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found: install it (Debian: apt-get install %s)", bin, map[string]string{
			"redis-server": "redis-server", "memcached": "memcached"}[bin])
	}
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &syncWriter{w: &out}, &syncWriter{w: &out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := tlsProbe(addr, c, probe)
		if err == nil && strings.HasPrefix(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s not ready: %q %v\n%s", bin, addr, got, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func tlsProbe(addr string, c *tls.Config, req string) (string, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: c}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := nc.Write([]byte(req)); err != nil {
		return "", err
	}
	return bufio.NewReader(nc).ReadString('\n')
}

// startRedisTLS runs redis-server with only a TLS port, serving p's server
// certificate, and returns its address. args are appended.
func startRedisTLS(t *testing.T, p *testserver.PKI, args ...string) string {
	t.Helper()
	port := testserver.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
		"--tls-cert-file", p.ServerCert, "--tls-key-file", p.ServerKey, "--tls-ca-cert-file", p.CA,
		"--tls-auth-clients", "no"}, args...)
	startTLSServer(t, "redis-server", argv, addr, p.ClientTLS(true), "PING\r\n", "+PONG")
	return addr
}

// logBuffer collects a proxy's log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startLoggedProxy runs a proxy for text, read as the file path (so
// relative paths in it resolve against path's directory), and returns it
// with its log.
func startLoggedProxy(t *testing.T, text, path string) (*proxy.Server, *logBuffer) {
	t.Helper()
	cfg, err := config.Parse([]byte(text), path)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &logBuffer{}
	srv := runProxy(t, cfg, proxy.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return srv, logs
}

// tlsDialResp opens a RESP client to addr over TLS.
func tlsDialResp(t testing.TB, addr string, c *tls.Config) *respClient {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &respClient{t: t, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

// tlsDialMemcache opens a memcached text client to addr over TLS.
func tlsDialMemcache(t testing.TB, addr string, c *tls.Config) *client {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func TestTLSRedisBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	p := testserver.NewPKI(t)
	rd := startRedisTLS(t, p)
	// Paths relative to the config file's directory.
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  timeout: 2000\n  server_tls: true\n"+
		"  server_tls_ca: ca.pem\n  servers:\n   - %s:1\n", rd)
	srv, _ := startLoggedProxy(t, yaml, filepath.Join(p.Dir, "shardproxy.yml"))
	c := respDial(t, srv.Addr("rd").String())
	if got := c.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	if got := c.do("GET", "k"); got != bulk("v") {
		t.Fatalf("GET = %q", got)
	}

	// A CA that did not sign the server's certificate: the connect fails.
	other := testserver.NewPKI(t)
	yaml = fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  timeout: 2000\n  server_tls: true\n"+
		"  server_tls_ca: %s\n  servers:\n   - %s:1\n", other.CA, rd)
	srv, logs := startLoggedProxy(t, yaml, filepath.Join(p.Dir, "bad.yml"))
	c = respDial(t, srv.Addr("rd").String())
	if got := c.do("GET", "k"); got != "-ERR backend failure: connecting\r\n" {
		t.Fatalf("GET with a wrong CA = %q", got)
	}
	if log := logs.String(); !strings.Contains(log, "backend tls handshake failed") ||
		!strings.Contains(log, "certificate signed by unknown authority") {
		t.Errorf("log does not name the TLS error:\n%s", log)
	}
}

func TestTLSMutualRedisBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	p := testserver.NewPKI(t)
	rd := startRedisTLS(t, p, "--tls-auth-clients", "yes")
	base := "rd:\n  listen: 127.0.0.1:0\n  redis: true\n  timeout: 2000\n  server_tls: true\n" +
		"  server_tls_ca: ca.pem\n  server_tls_server_name: localhost\n"
	yaml := base + fmt.Sprintf("  server_tls_cert: client.pem\n  server_tls_key: client.key\n  servers:\n   - %s:1\n", rd)
	srv, _ := startLoggedProxy(t, yaml, filepath.Join(p.Dir, "shardproxy.yml"))
	c := respDial(t, srv.Addr("rd").String())
	if got := c.do("SET", "k", "mtls"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	// Without a client certificate redis-server refuses the proxy.
	srv, _ = startLoggedProxy(t, base+fmt.Sprintf("  servers:\n   - %s:1\n", rd), filepath.Join(p.Dir, "shardproxy.yml"))
	c = respDial(t, srv.Addr("rd").String())
	if got := c.do("GET", "k"); !strings.HasPrefix(got, "-ERR backend failure: ") {
		t.Fatalf("GET without a client certificate = %q", got)
	}
}

func TestTLSMemcachedBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	p := testserver.NewPKI(t)
	port := testserver.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-Z",
		"-o", "ssl_chain_cert=" + p.ServerCert + ",ssl_key=" + p.ServerKey}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	startTLSServer(t, "memcached", args, addr, p.ClientTLS(false), "version\r\n", "VERSION ")
	yaml := fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  server_tls: true\n  server_tls_ca: %s\n"+
		"  servers:\n   - %s:1\n", p.CA, addr)
	srv, _ := startLoggedProxy(t, yaml, "inline.yml")
	c := dial(t, srv.Addr("mc").String())
	if got := c.do("set k 0 0 2\r\nhi\r\n"); got != "STORED\r\n" {
		t.Fatalf("set = %q", got)
	}
	if got := c.do("get k\r\n"); got != "VALUE k 0 2\r\nhi\r\nEND\r\n" {
		t.Fatalf("get = %q", got)
	}
}

func TestTLSClientListener(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real servers")
	}
	p := testserver.NewPKI(t)
	_, mcYAML := memcachedPool(t, 1, "  tls_cert: server.pem\n  tls_key: server.key\n")
	_, rdYAML := redisPool(t, 1, "  tls_cert: server.pem\n  tls_key: server.key\n  tls_client_ca: ca.pem\n")
	srv, _ := startLoggedProxy(t, mcYAML+rdYAML, filepath.Join(p.Dir, "shardproxy.yml"))

	// memcached over TLS, no client certificate needed.
	mc := tlsDialMemcache(t, srv.Addr("mc").String(), p.ClientTLS(false))
	if got := mc.do("set k 0 0 3\r\ntls\r\n"); got != "STORED\r\n" {
		t.Fatalf("set = %q", got)
	}
	if got := mc.do("get k\r\n"); got != "VALUE k 0 3\r\ntls\r\nEND\r\n" {
		t.Fatalf("get = %q", got)
	}
	// A plain client gets no memcached reply on a TLS listener.
	plain := dial(t, srv.Addr("mc").String())
	plain.send("version\r\n")
	plain.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := plain.r.ReadString('\n'); strings.HasPrefix(b, "VERSION") {
		t.Errorf("plain client on a TLS listener got %q %v", b, err)
	}

	// Redis over TLS with a client certificate, through go-redis.
	ctx := context.Background()
	rdb := newGoRedis(t, &redis.Options{Addr: srv.Addr("rd").String(), TLSConfig: p.ClientTLS(true), Protocol: 2})
	if err := rdb.Set(ctx, "k", "over tls", 0).Err(); err != nil {
		t.Fatalf("go-redis SET over TLS: %v", err)
	}
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "over tls" {
		t.Fatalf("go-redis GET over TLS: %q %v", v, err)
	}
	if got := tlsDialResp(t, srv.Addr("rd").String(), p.ClientTLS(true)).do("GET", "k"); got != bulk("over tls") {
		t.Errorf("RESP GET over TLS = %q", got)
	}
	// tls_client_ca: a client without a certificate is refused.
	nocert := newGoRedis(t, &redis.Options{Addr: srv.Addr("rd").String(), TLSConfig: p.ClientTLS(false), Protocol: 2})
	if err := nocert.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("client without a certificate: %v, want a refused handshake", err)
	}
}

// A certificate file that is missing or does not match its key fails the
// start, naming the key and the file.
func TestTLSBadFiles(t *testing.T) {
	p := testserver.NewPKI(t)
	tests := []struct{ name, extra, want string }{
		{"missing cert", "  tls_cert: nope.pem\n  tls_key: server.key\n",
			`proxy: pool "mc": tls_cert: open ` + filepath.Join(p.Dir, "nope.pem") + `: no such file or directory`},
		{"key of another cert", "  tls_cert: server.pem\n  tls_key: client.key\n",
			`proxy: pool "mc": tls_cert ` + p.ServerCert + `, tls_key ` + p.ClientKey + `: tls: private key does not match public key`},
		{"client CA not PEM", "  tls_cert: server.pem\n  tls_key: server.key\n  tls_client_ca: server.key\n",
			`proxy: pool "mc": tls_client_ca ` + p.ServerKey + `: no PEM certificate found`},
		{"missing server CA", "  server_tls: true\n  server_tls_ca: gone.pem\n",
			`proxy: pool "mc": server_tls_ca: open ` + filepath.Join(p.Dir, "gone.pem") + `: no such file or directory`},
		{"missing server key", "  server_tls: true\n  server_tls_cert: client.pem\n  server_tls_key: gone.key\n",
			`proxy: pool "mc": server_tls_key: open ` + filepath.Join(p.Dir, "gone.key") + `: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "mc:\n  listen: 127.0.0.1:0\n" + tt.extra + "  servers:\n   - 127.0.0.1:1:1\n"
			cfg, err := config.Parse([]byte(text), filepath.Join(p.Dir, "shardproxy.yml"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
			if err == nil || err.Error() != tt.want {
				t.Errorf("proxy.New error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestRedisACL(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	rd := testserver.StartRedis(t, "--user", "alice", "on", ">secret", "~*", "&*", "+@all", "--user", "default", "off")
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  timeout: 2000\n  redis_auth: secret\n"+
		"  redis_auth_user: alice\n  servers:\n   - %s:1\n", rd.Addr)
	srv, _ := startLoggedProxy(t, yaml, "inline.yml")
	addr := srv.Addr("rd").String()

	c := respDial(t, addr)
	for _, tt := range []struct{ req []string }{{[]string{"SET", "k", "v"}}, {[]string{"GET", "k"}}} {
		if got := c.do(tt.req...); got != "-NOAUTH Authentication required.\r\n" {
			t.Errorf("%v before AUTH = %q", tt.req, got)
		}
	}
	const wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	for _, args := range [][]string{{"AUTH", "secret"}, {"AUTH", "alice", "wrong"}, {"AUTH", "bob", "secret"}, {"AUTH", "default", "secret"}} {
		if got := c.do(args...); got != wrongpass {
			t.Errorf("%v = %q", args, got)
		}
	}
	if got := c.do("AUTH", "alice", "secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH alice secret = %q", got)
	}
	// The proxy's own sockets authenticate as alice: the SET reaches Redis.
	if got := c.do("GET", "k"); got != "$-1\r\n" {
		t.Fatalf("GET k = %q (the refused SET must not have been forwarded)", got)
	}
	if got := c.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}

	ctx := context.Background()
	rdb := newGoRedis(t, &redis.Options{Addr: addr, Username: "alice", Password: "secret"})
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Errorf("go-redis as alice: %q %v", v, err)
	}
	bad := newGoRedis(t, &redis.Options{Addr: addr, Password: "secret"})
	if err := bad.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("go-redis without a user name: %v", err)
	}

	// A proxy with the wrong password for alice cannot validate its sockets.
	yaml = strings.Replace(yaml, "redis_auth: secret", "redis_auth: nope", 1)
	srv, logs := startLoggedProxy(t, yaml, "inline.yml")
	c = respDial(t, srv.Addr("rd").String())
	c.do("AUTH", "alice", "nope")
	if got := c.do("GET", "k"); got != "-ERR backend failure: badvalidate\r\n" {
		t.Errorf("GET through a proxy with a wrong password = %q\n%s", got, logs)
	}
}

// A reload that keeps the listener's address switches it between plain and
// TLS for new clients.
func TestTLSReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	p := testserver.NewPKI(t)
	mc := testserver.StartMemcached(t)
	port := testserver.FreePort(t)
	plain := fmt.Sprintf("mc:\n  listen: 127.0.0.1:%d\n  servers:\n   - %s:1\n", port, mc.Addr)
	withTLS := fmt.Sprintf("mc:\n  listen: 127.0.0.1:%d\n  tls_cert: server.pem\n  tls_key: server.key\n  servers:\n   - %s:1\n", port, mc.Addr)
	path := filepath.Join(p.Dir, "shardproxy.yml")
	srv, _ := startLoggedProxy(t, plain, path)
	addr := srv.Addr("mc").String()
	if got := dial(t, addr).do("version\r\n"); !strings.HasPrefix(got, "VERSION ") {
		t.Fatalf("plain version = %q", got)
	}
	reload := func(text string) {
		t.Helper()
		cfg, err := config.Parse([]byte(text), path)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Reload(cfg); err != nil {
			t.Fatalf("Reload: %v", err)
		}
	}
	reload(withTLS)
	if got := tlsDialMemcache(t, addr, p.ClientTLS(false)).do("version\r\n"); !strings.HasPrefix(got, "VERSION ") {
		t.Fatalf("TLS version after reload = %q", got)
	}
	reload(plain)
	if got := dial(t, addr).do("version\r\n"); !strings.HasPrefix(got, "VERSION ") {
		t.Fatalf("plain version after the second reload = %q", got)
	}
	// A reload naming a missing file fails and keeps the running config.
	cfg, err := config.Parse([]byte(strings.Replace(withTLS, "server.pem", "gone.pem", 1)), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(cfg); err == nil || !strings.Contains(err.Error(), "tls_cert: open "+filepath.Join(p.Dir, "gone.pem")) {
		t.Errorf("Reload with a missing certificate: %v", err)
	}
}
