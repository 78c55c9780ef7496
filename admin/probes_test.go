package admin_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// probe sends method path to the HTTP admin at addr, with token when set,
// and returns the status and body.
func probe(t *testing.T, addr, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProbes follows /ready and /live through a proxy's states, over a
// real socket, with admin_token set (the probes carry none): starting
// while its server's handshake is held, ready once it answered, draining
// after POST /drain (which wants the token) started the drain the
// command runs. /live answers 200 throughout.
func TestProbes(t *testing.T) {
	mc := testserver.StartMemcached(t)
	fp := faultproxy.New(t, mc.Addr)
	fp.Hold(faultproxy.Downstream, true)
	yaml := mcYAML("127.0.0.1:0", "  preconnect: true\n", fp.Addr()) +
		"shardproxy:\n  admin_token: s3cret-token\n"
	cfg := writeConfig(t, filepath.Join(t.TempDir(), "conf.yml"), yaml)
	srv := startProxyOpts(t, cfg, proxy.Options{Logger: testLogger(t), ReadyWait: time.Hour})
	drains := make(chan struct{}, 1)
	web := admin.NewHTTP(srv, admin.HTTPConfig{Logger: testLogger(t), Drain: func() {
		drains <- struct{}{}
		go srv.Drain(context.Background())
	}})
	if err := web.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	addr := web.Addr().String()
	expect := func(method, path, token string, code int, body string) {
		t.Helper()
		if gotCode, got := probe(t, addr, method, path, token); gotCode != code || (body != "" && got != body) {
			t.Fatalf("%s %s: %d %q, want %d %q", method, path, gotCode, got, code, body)
		}
	}

	expect("GET", "/ready", "", http.StatusServiceUnavailable, "starting\n")
	expect("GET", "/live", "", http.StatusOK, "live\n")
	fp.Hold(faultproxy.Downstream, false)
	eventually(t, "ready", func() bool { code, _ := probe(t, addr, "GET", "/ready", ""); return code == http.StatusOK })
	expect("GET", "/ready", "", http.StatusOK, "ready\n")
	expect("GET", "/metrics", "", http.StatusUnauthorized, "")
	expect("POST", "/drain", "", http.StatusUnauthorized, "")
	if len(drains) != 0 {
		t.Fatal("POST /drain without the token started a drain")
	}
	c, err := net.Dial("tcp", srv.Addr("mc").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expect("POST", "/drain", "s3cret-token", http.StatusAccepted, "")
	<-drains
	expect("GET", "/ready", "", http.StatusServiceUnavailable, "draining\n")
	expect("GET", "/live", "", http.StatusOK, "live\n")
	eventually(t, "the idle client closed", func() bool {
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	})
	fams := families(t, scrapeURL(t, addr, "s3cret-token"))
	if v, _ := value(fams, "shardproxy_draining"); v != 1 {
		t.Errorf("shardproxy_draining = %v, want 1", v)
	}
	eventually(t, "the drain counted", func() bool {
		fams := families(t, scrapeURL(t, addr, "s3cret-token"))
		v, _ := value(fams, "shardproxy_drain_connections_total", "result", "drained")
		return v == 1
	})
}

// scrapeURL GETs /metrics from the HTTP admin at addr.
func scrapeURL(t *testing.T, addr, token string) string {
	t.Helper()
	code, body := probe(t, addr, "GET", "/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return body
}
