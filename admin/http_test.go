package admin_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"shardproxy/admin"
	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// fakeSource serves fixed stats and config.
type fakeSource struct{ cfg *config.Config }

func (f fakeSource) Stats() proxy.Stats {
	s := proxy.ServerStats{Name: "s", Addr: "127.0.0.1:1", Requests: 3}
	s.Latency.Counts[0], s.Latency.Counts[3], s.Latency.Counts[len(s.Latency.Counts)-1] = 1, 1, 1
	s.Latency.Sum = 3 * time.Second
	return proxy.Stats{Version: proxy.Version, Start: time.Now().Add(-time.Minute), Now: time.Now(),
		Pools: []proxy.PoolStats{{Name: "p", Protocol: "memcache", Servers: []proxy.ServerStats{s}}}}
}

func (f fakeSource) Info() proxy.Info {
	return proxy.Info{Config: f.cfg, Source: "fake.yml", Checksum: "c0ffee", LoadedAt: time.Unix(1700000000, 0)}
}

// get runs one request against h and returns the recorder.
func get(t testing.TB, h http.Handler, method, path, token string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// scrape returns h's /metrics text.
func scrape(t testing.TB, h http.Handler, token string) string {
	t.Helper()
	w := get(t, h, "GET", "/metrics", token)
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// families parses Prometheus text.
func families(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	// Legacy validation: every name must also be valid for scrapers
	// that predate UTF-8 names.
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, text)
	}
	return fams
}

// value returns the value of the sample of family name whose labels include
// want (label=value pairs), summed over matches; ok is false without one.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == want[i] && l.GetValue() == want[i+1])
			}
			if !found {
				continue next
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, ok
}

// TestMetrics scrapes /metrics from an HTTPServer over a real proxy with
// traffic and checks the main series.
func TestMetrics(t *testing.T) {
	f := newFixture(t, 2, "")
	web := startHTTP(t, f.srv)
	c := dialMC(t, f.srv.Addr("mc").String())
	for i := range 10 {
		key := "k" + strconv.Itoa(i)
		c.do("set "+key+" 0 0 1\r\nx\r\n", "STORED")
		c.do("get "+key+"\r\n", "END")
	}
	c.do("bogus\r\n", "ERROR", "CLIENT_ERROR")

	resp, err := http.Get("http://" + web.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s\n%s", resp.Status, body)
	}
	fams := families(t, string(body))
	checks := []struct {
		name   string
		labels []string
		want   func(float64) bool
		what   string
	}{
		{"shardproxy_build_info", []string{"version", proxy.Version}, eq(1), "1"},
		{"shardproxy_pool_requests_total", []string{"pool", "mc"}, atLeast(20), ">= 20"},
		{"shardproxy_pool_errors_total", []string{"pool", "mc", "kind", "forward"}, eq(0), "0"},
		{"shardproxy_pool_errors_total", []string{"pool", "mc", "kind", "client"}, atLeast(0), "present"},
		{"shardproxy_pool_client_connections", []string{"pool", "mc"}, eq(1), "1"},
		{"shardproxy_client_connections_accepted_total", nil, atLeast(1), ">= 1"},
		{"shardproxy_backend_requests_total", []string{"pool", "mc"}, eq(20), "20 over both backends"},
		{"shardproxy_backend_responses_total", []string{"pool", "mc"}, eq(20), "20"},
		{"shardproxy_backend_request_bytes_total", []string{"pool", "mc"}, atLeast(1), "> 0"},
		{"shardproxy_backend_errors_total", []string{"pool", "mc", "kind", "timeout"}, eq(0), "0"},
		{"shardproxy_backend_up", []string{"pool", "mc"}, eq(2), "1 for each backend"},
		{"shardproxy_backend_ejections_total", []string{"pool", "mc"}, eq(0), "0"},
		{"shardproxy_backend_latency_seconds", []string{"pool", "mc"}, eq(20), "20 observations"},
		{"shardproxy_pool_latency_seconds", []string{"pool", "mc"}, eq(20), "20 observations"},
		{"shardproxy_config_reloads_total", nil, eq(0), "0"},
		{"shardproxy_config_reload_failures_total", nil, eq(0), "0"},
		{"shardproxy_spliced_replies_total", nil, atLeast(0), "present"},
		{"shardproxy_config_info", []string{"checksum", f.srv.Info().Checksum}, eq(1), "1"},
		{"go_goroutines", nil, atLeast(1), "> 0"},
	}
	for _, c := range checks {
		v, ok := value(fams, c.name, c.labels...)
		if !ok || !c.want(v) {
			t.Errorf("%s%v = %v (present %t), want %s", c.name, c.labels, v, ok, c.what)
		}
	}
	if n := len(fams["shardproxy_backend_latency_seconds"].GetMetric()); n != 2 {
		t.Errorf("%d backend latency histograms, want 2", n)
	}
	if h := fams["shardproxy_pool_latency_seconds"].GetMetric()[0].GetHistogram(); len(h.GetBucket()) != len(backend.LatencyBuckets)+1 {
		t.Errorf("pool histogram has %d buckets, want %d and +Inf", len(h.GetBucket()), len(backend.LatencyBuckets))
	}
}

func eq(want float64) func(float64) bool      { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }

// TestMetricsHistogram checks the conversion of a backend histogram to
// cumulative buckets.
func TestMetricsHistogram(t *testing.T) {
	fams := families(t, scrape(t, admin.Handler(fakeSource{}, admin.HTTPConfig{}), ""))
	h := fams["shardproxy_backend_latency_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 3 {
		t.Errorf("count %d sum %v, want 3 and 3", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{0.0001: 1, 0.00025: 1, 0.0005: 1, 0.001: 2, 2.5: 2}
	for _, b := range h.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
}

const secretYAML = `rd:
  listen: 127.0.0.1:0
  redis: true
  redis_auth: hunter2
  servers:
    - 127.0.0.1:6379:1
mc:
  listen: 127.0.0.1:0
  servers:
    - 127.0.0.1:11211:1
shardproxy:
  stats_listen: 127.0.0.1:22222
  admin_listen: 127.0.0.1:22223
  admin_token: s3cret-token
`

func TestConfigRedaction(t *testing.T) {
	cfg, err := config.Parse([]byte(secretYAML), "secret.yml")
	if err != nil {
		t.Fatal(err)
	}
	h := admin.Handler(fakeSource{cfg}, admin.HTTPConfig{})
	w := get(t, h, "GET", "/config", "s3cret-token")
	if w.Code != http.StatusOK {
		t.Fatalf("/config: %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	for _, secret := range []string{"hunter2", "s3cret-token"} {
		if strings.Contains(body, secret) {
			t.Errorf("/config shows the secret %q:\n%s", secret, body)
		}
	}
	for _, want := range []string{"redis_auth: REDACTED", `admin_token: "REDACTED"`, `admin_listen: "127.0.0.1:22223"`,
		"# source: \"fake.yml\"\n", "# checksum: c0ffee\n", "# loaded_at: 2023-11-14T22:13:20Z\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/config lacks %q:\n%s", want, body)
		}
	}
	hdr := w.Header()
	if hdr.Get("X-Shardproxy-Config-Source") != "fake.yml" || hdr.Get("X-Shardproxy-Config-Checksum") != "c0ffee" ||
		hdr.Get("X-Shardproxy-Config-Loaded-At") != "2023-11-14T22:13:20Z" {
		t.Errorf("headers: %v", hdr)
	}
	// The body is a config that reads back to the same pools and admin
	// section, secrets aside.
	back, err := config.Parse([]byte(body), "back.yml")
	if err != nil {
		t.Fatalf("/config does not parse back: %v\n%s", err, body)
	}
	if len(back.Pools) != 2 || back.Pool("rd").RedisAuth != admin.Redacted || back.Admin.StatsListen != "127.0.0.1:22222" {
		t.Errorf("read back: %+v %+v", back.Pools, back.Admin)
	}
	if cfg.Pool("rd").RedisAuth != "hunter2" || cfg.Admin.Token != "s3cret-token" {
		t.Error("redaction changed the running config")
	}
}

// backends decodes /backends.
type backendsDoc struct {
	Pools []struct {
		Name     string
		Backends []struct {
			Name, Addr, State string
			Failures          int
			LastCause         string     `json:"last_cause"`
			RetryAt           *time.Time `json:"retry_at"`
		}
	}
}

// TestBackendsBad stops one memcached and checks that /backends shows it bad
// with a retry time, and /metrics shows it down.
func TestBackendsBad(t *testing.T) {
	f := newFixture(t, 2, "  server_failure_limit: 1\n  server_retry_timeout: 30000\n")
	h := admin.Handler(f.srv, admin.HTTPConfig{})
	c := dialMC(t, f.srv.Addr("mc").String())
	c.do("get warm0 warm1 warm2 warm3 warm4 warm5\r\n", "END") // connect both
	f.servers[0].Stop()
	// Some of these keys live on the stopped server: they differ in their
	// first bytes, which fnv1a_64 (the default hash) spreads well. (Keys
	// differing only at the end cluster on one server.)
	for i := range 200 {
		c.do("get "+strconv.Itoa(i*7919%100003)+"-k\r\n", "END", "SERVER_ERROR")
	}
	w := get(t, h, "GET", "/backends", "")
	var doc backendsDoc
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || w.Code != http.StatusOK {
		t.Fatalf("/backends: %d %v\n%s", w.Code, err, w.Body)
	}
	if len(doc.Pools) != 1 || len(doc.Pools[0].Backends) != 2 {
		t.Fatalf("/backends: %s", w.Body)
	}
	for _, b := range doc.Pools[0].Backends {
		switch b.Addr {
		case f.servers[0].Addr:
			if b.State != "bad" || b.RetryAt == nil || time.Until(*b.RetryAt) < 20*time.Second || b.LastCause == "" || b.Failures < 1 {
				t.Errorf("stopped backend: %+v", b)
			}
		case f.servers[1].Addr:
			if b.State != "up" || b.RetryAt != nil {
				t.Errorf("running backend: %+v", b)
			}
		default:
			t.Errorf("unknown backend %+v", b)
		}
	}
	fams := families(t, scrape(t, h, ""))
	if v, _ := value(fams, "shardproxy_backend_up", "pool", "mc"); v != 1 {
		t.Errorf("backend_up sums to %v, want 1 (one of two down)", v)
	}
	if v, _ := value(fams, "shardproxy_backend_ejections_total", "pool", "mc"); v != 1 {
		t.Errorf("ejections %v, want 1", v)
	}
}

// TestReloadEndpoint reloads through POST /reload: a changed file changes
// /config's checksum; an invalid or missing file is refused with the reason
// and the old config keeps running.
func TestReloadEndpoint(t *testing.T) {
	f := newFixture(t, 1, "")
	h := admin.Handler(f.srv, admin.HTTPConfig{Reload: f.reload})
	checksum := func() string {
		t.Helper()
		w := get(t, h, "GET", "/config", "")
		if w.Code != http.StatusOK {
			t.Fatalf("/config: %d", w.Code)
		}
		return w.Header().Get("X-Shardproxy-Config-Checksum")
	}
	first := checksum()

	if w := get(t, h, "GET", "/reload", ""); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") == "" {
		t.Errorf("GET /reload: %d, Allow %q; want 405 with Allow", w.Code, w.Header().Get("Allow"))
	}

	os.WriteFile(f.path, []byte(f.yaml("  server_connections: 2\n")), 0o644)
	w := get(t, h, "POST", "/reload", "")
	var ok struct {
		OK       bool
		Checksum string
		Source   string
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ok); err != nil || w.Code != http.StatusOK || !ok.OK {
		t.Fatalf("POST /reload: %d %v\n%s", w.Code, err, w.Body)
	}
	second := checksum()
	if second == first || ok.Checksum != second || ok.Source != f.path {
		t.Errorf("checksum %s -> %s (reply %+v)", first, second, ok)
	}

	refused := []struct {
		name, yaml string
		code       int
		reason     string
	}{
		{"invalid", "mc:\n  listen: 127.0.0.1:0\n  hash: nope\n  servers:\n    - 127.0.0.1:11211:1\n", http.StatusUnprocessableEntity, "hash"},
		{"missing", "", http.StatusInternalServerError, "no such file"},
	}
	for _, r := range refused {
		if r.yaml == "" {
			os.Remove(f.path)
		} else {
			os.WriteFile(f.path, []byte(r.yaml), 0o644)
		}
		w := get(t, h, "POST", "/reload", "")
		var e struct {
			OK    bool
			Error string
		}
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != r.code || e.OK || !strings.Contains(e.Error, r.reason) {
			t.Errorf("%s file: %d %s; want %d naming %q", r.name, w.Code, w.Body, r.code, r.reason)
		}
		if got := checksum(); got != second {
			t.Errorf("%s file changed the running config: %s", r.name, got)
		}
	}
	c := dialMC(t, f.srv.Addr("mc").String())
	if r := c.do("set k 0 0 1\r\nv\r\n", "STORED", "SERVER_ERROR"); r != "STORED\r\n" {
		t.Errorf("after refused reloads: %q", r)
	}
	fams := families(t, scrape(t, h, ""))
	if v, _ := value(fams, "shardproxy_config_reloads_total"); v != 1 {
		t.Errorf("reloads %v, want 1", v)
	}
	if v, _ := value(fams, "shardproxy_config_reload_failures_total"); v != 2 {
		t.Errorf("reload failures %v, want 2", v)
	}
	if w := get(t, admin.Handler(f.srv, admin.HTTPConfig{}), "POST", "/reload", ""); w.Code != http.StatusNotImplemented {
		t.Errorf("without a reload function: %d, want 501", w.Code)
	}
}

func TestToken(t *testing.T) {
	cfg, err := config.Parse([]byte(secretYAML), "secret.yml")
	if err != nil {
		t.Fatal(err)
	}
	reloads := 0
	h := admin.Handler(fakeSource{cfg}, admin.HTTPConfig{Reload: func() (admin.ReloadResult, error) {
		reloads++
		return admin.ReloadResult{}, nil
	}})
	for _, ep := range []struct{ method, path string }{
		{"GET", "/metrics"}, {"GET", "/config"}, {"GET", "/backends"}, {"GET", "/version"}, {"POST", "/reload"},
		{"GET", "/debug/pprof/"}, {"GET", "/debug/pprof/cmdline"},
		{"GET", "/"}, {"GET", "/status"}, {"GET", "/status/live"}, {"GET", "/static/status.js"},
	} {
		for _, tok := range []string{"", "wrong", "s3cret-token "} {
			if w := get(t, h, ep.method, ep.path, tok); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with token %q: %d, want 401 with WWW-Authenticate", ep.method, ep.path, tok, w.Code)
			}
		}
		if w := get(t, h, ep.method, ep.path, "s3cret-token"); w.Code != http.StatusOK {
			t.Errorf("%s %s with the token: %d %s", ep.method, ep.path, w.Code, w.Body)
		}
	}
	if reloads != 1 {
		t.Errorf("%d reloads ran, want 1 (only the authorized one)", reloads)
	}
	// Without a token in the config, nothing is asked.
	if w := get(t, admin.Handler(fakeSource{}, admin.HTTPConfig{}), "GET", "/version", ""); w.Code != http.StatusOK {
		t.Errorf("no token configured: %d", w.Code)
	}
}

func TestVersion(t *testing.T) {
	w := get(t, admin.Handler(fakeSource{}, admin.HTTPConfig{}), "GET", "/version", "")
	var v struct {
		Version   string
		GoVersion string `json:"go_version"`
		Uptime    int64  `json:"uptime_seconds"`
		Threads   int
	}
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || v.Version != proxy.Version || v.GoVersion == "" || v.Uptime < 59 ||
		v.Threads != runtime.GOMAXPROCS(0) {
		t.Errorf("/version: %d %v %s", w.Code, err, w.Body)
	}
}

// TestHTTPMove moves the HTTP admin from inside a POST /reload, as a reload
// that changes admin_listen does: the reply arrives, the new address serves,
// the old one refuses. A busy address keeps the old one; "" stops serving.
func TestHTTPMove(t *testing.T) {
	var web *admin.HTTPServer
	var target string
	web = admin.NewHTTP(fakeSource{}, admin.HTTPConfig{Logger: testLogger(t), Reload: func() (admin.ReloadResult, error) {
		return admin.ReloadResult{}, web.Listen(target)
	}})
	defer web.Close()
	if err := web.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	old := web.Addr().String()

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	target = busy.Addr().String()
	if code := post(t, old+"/reload"); code != http.StatusInternalServerError {
		t.Errorf("move to a busy address: %d, want 500", code)
	}
	if code := httpGet(t, old+"/version"); code != http.StatusOK {
		t.Fatalf("old address after a failed move: %d", code)
	}

	target = "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	if code := post(t, old+"/reload"); code != http.StatusOK {
		t.Fatalf("move: %d", code)
	}
	if code := httpGet(t, target+"/version"); code != http.StatusOK {
		t.Errorf("new address: %d", code)
	}
	if nc, err := net.DialTimeout("tcp", old, time.Second); err == nil {
		nc.Close()
		t.Errorf("old address %s still accepts", old)
	}
	if err := web.Listen(""); err != nil || web.Addr() != nil {
		t.Fatalf("Listen(\"\"): %v, Addr %v", err, web.Addr())
	}
	if nc, err := net.DialTimeout("tcp", target, time.Second); err == nil {
		nc.Close()
		t.Errorf("disabled admin still accepts on %s", target)
	}
}

// post sends POST to url ("host:port/path") on a fresh connection and
// returns the status.
func post(t testing.TB, url string) int {
	t.Helper()
	return do(t, "POST", url)
}

func httpGet(t testing.TB, url string) int {
	t.Helper()
	return do(t, "GET", url)
}

func do(t testing.TB, method, url string) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPNoKeepAlive checks that the HTTP admin closes every connection
// after its reply. A connection kept open waits for the server's idle
// timeout, and a client that sends on it just as the server closes it gets
// a reset and no reply: a POST /reload (which clients do not retry) fails
// without reaching the server. So a client that scrapes or reloads every
// minute, as the soak's 2-minute run did at its end (its middle /metrics
// scrape opened a second connection that sat idle for exactly the idle
// timeout), never finds a connection closing under it.
func TestHTTPNoKeepAlive(t *testing.T) {
	web := admin.NewHTTP(fakeSource{}, admin.HTTPConfig{Logger: testLogger(t), Reload: func() (admin.ReloadResult, error) {
		return admin.ReloadResult{Source: "fake.yml"}, nil
	}})
	defer web.Close()
	if err := web.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := web.Addr().String()
	for _, req := range []string{
		"POST /reload HTTP/1.1\r\nHost: admin\r\nContent-Length: 0\r\n\r\n",
		"GET /version HTTP/1.1\r\nHost: admin\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n",
	} {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(nc, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !resp.Close {
			t.Errorf("%q: status %d, Connection: close %v; want 200 and close", req, resp.StatusCode, resp.Close)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("%q: after the reply, read %d bytes, %v; want the server's close (EOF)", req, n, err)
		}
		nc.Close()
	}
}
