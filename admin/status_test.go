package admin_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/proxy"
)

// hostile is a pool and server name that would run script if a page
// wrote it unescaped, in text or in an attribute.
const hostile = `<script>alert("x")</script>&'"`

// clusterSource serves a Redis Cluster pool named hostile whose second
// node is bad.
type clusterSource struct{ cfg *config.Config }

func newClusterSource(t *testing.T) clusterSource {
	t.Helper()
	yaml := "'" + strings.ReplaceAll(hostile, "'", "''") + "':\n" +
		"  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  servers:\n    - 127.0.0.1:7001:1\n"
	cfg, err := config.Parse([]byte(yaml), "cluster.yml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return clusterSource{cfg}
}

func (c clusterSource) Stats() proxy.Stats {
	now := time.Now()
	node := func(addr string) proxy.ServerStats { return proxy.ServerStats{Name: addr, Addr: addr} }
	bad := node("127.0.0.1:7002")
	bad.State = backend.State{Bad: true, Failures: 2, LastCause: "timeout", RetryAt: now.Add(time.Second)}
	bad.ServerTimedout = 2
	named := node("127.0.0.1:7003")
	named.Name = hostile
	return proxy.Stats{Version: proxy.Version, Start: now.Add(-time.Hour), Now: now, Pools: []proxy.PoolStats{{
		Name: hostile, Protocol: "redis",
		Router: []proxy.RouterStat{{Name: "cluster_moved", Kind: proxy.RouterCounter, Value: 5},
			{Name: "cluster_ask", Kind: proxy.RouterCounter, Value: 2}},
		Slots: []proxy.SlotRange{{First: 0, Last: 5460, Master: "127.0.0.1:7001"},
			{First: 5461, Last: 10922, Master: "127.0.0.1:7002"},
			{First: 10923, Last: 16000, Master: "127.0.0.1:7003"},
			{First: 16001, Last: 16001, Master: "127.0.0.1:7002"},
			{First: 16002, Last: 16383, Master: "127.0.0.1:7001"}},
		Servers: []proxy.ServerStats{node("127.0.0.1:7001"), bad, named},
	}}}
}

func (c clusterSource) Info() proxy.Info {
	return proxy.Info{Config: c.cfg, Source: "cluster.yml", Checksum: "c0ffee", LoadedAt: time.Now()}
}

// TestStatusPageEscapes: names from the configuration reach the page
// escaped in text and attributes, never as markup.
func TestStatusPageEscapes(t *testing.T) {
	h := admin.Handler(newClusterSource(t), admin.HTTPConfig{})
	for _, path := range []string{"/", "/status/live"} {
		w := get(t, h, "GET", path, "")
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		body := w.Body.String()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, `"x")`) {
			t.Errorf("%s: a name reached the page unescaped:\n%s", path, body)
		}
		for _, want := range []string{
			`<h2>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;&#34; <small>redis_cluster · redis`,
			`data-pool="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;&#34;"`,
			`data-server="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;&#34;"`,
			`data-server="127.0.0.1:7002" data-state="bad"`,
			`consecutive failures: 2 (last: timeout)`,
			`retrying at `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: no %q in\n%s", path, want, body)
			}
		}
	}
	if body := get(t, h, "GET", "/", "").Body.String(); !strings.Contains(body, `<script src="static/status.js" defer></script>`) ||
		!strings.Contains(body, `<noscript><meta http-equiv="refresh" content="5"></noscript>`) {
		t.Errorf("/ lacks its script or its no-script refresh:\n%s", body)
	}
	if body := get(t, h, "GET", "/status/live", "").Body.String(); !strings.HasPrefix(body, `<main id="live"`) ||
		strings.Contains(body, "<html") {
		t.Errorf("/status/live is not the live part alone:\n%s", body)
	}
}

// TestStatusSlotMap: a cluster pool's slot owners, grouped by master in
// the order of their first slot, in the JSON and on the page.
func TestStatusSlotMap(t *testing.T) {
	h := admin.Handler(newClusterSource(t), admin.HTTPConfig{})
	w := get(t, h, "GET", "/status", "")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("/status: %d %s %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var doc struct {
		Pools []struct {
			Name  string
			Kind  string
			Slots []struct {
				Master string
				Count  int
				Ranges []string
			}
			Servers []struct {
				Name, State string
				RetryAt     *time.Time `json:"retry_at"`
				Errors      []struct {
					Kind  string
					Total int64
				}
			}
			Router []struct {
				Kind  string
				Total int64
			}
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatalf("/status: %v\n%s", err, w.Body)
	}
	if len(doc.Pools) != 1 || doc.Pools[0].Name != hostile || doc.Pools[0].Kind != "redis_cluster" {
		t.Fatalf("/status pools: %+v", doc.Pools)
	}
	p := doc.Pools[0]
	type owner = struct {
		Master string
		Count  int
		Ranges []string
	}
	want := []owner{
		{"127.0.0.1:7001", 5461 + 382, []string{"0-5460", "16002-16383"}},
		{"127.0.0.1:7002", 5462 + 1, []string{"5461-10922", "16001"}},
		{"127.0.0.1:7003", 5078, []string{"10923-16000"}},
	}
	if !reflect.DeepEqual(p.Slots, want) {
		t.Errorf("slots\n got %+v\nwant %+v", p.Slots, want)
	}
	if s := p.Servers[1]; s.State != "bad" || s.RetryAt == nil || s.Errors[1].Kind != "timeout" || s.Errors[1].Total != 2 {
		t.Errorf("bad node: %+v", s)
	}
	if len(p.Router) != 2 || p.Router[0].Kind != "cluster_moved" || p.Router[0].Total != 5 {
		t.Errorf("router counters: %+v", p.Router)
	}
	page := get(t, h, "GET", "/", "").Body.String()
	for _, want := range []string{
		`<tr data-master="127.0.0.1:7001"><td><code>127.0.0.1:7001</code></td><td class="num">5843</td><td>0-5460, 16002-16383</td></tr>`,
		`<td>5461-10922, 16001</td>`,
		`<td>cluster_moved</td><td class="num">5</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page: no %q", want)
		}
	}
}

// TestStatusAssets: the page's style sheet and script come from the
// binary; nothing else of its directory is served.
func TestStatusAssets(t *testing.T) {
	h := admin.Handler(fakeSource{}, admin.HTTPConfig{})
	for path, ct := range map[string]string{
		"/static/status.css": "text/css; charset=utf-8",
		"/static/status.js":  "text/javascript; charset=utf-8",
	} {
		w := get(t, h, "GET", path, "")
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != ct || w.Body.Len() < 100 {
			t.Errorf("%s: %d %q, %d bytes", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
	}
	for _, path := range []string{"/static/", "/static/status.html", "/nothing"} {
		if w := get(t, h, "GET", path, ""); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, w.Code)
		}
	}
}

// TestStatusGzip: the page is gzipped for a client that takes it.
func TestStatusGzip(t *testing.T) {
	h := admin.Handler(newClusterSource(t), admin.HTTPConfig{})
	r := httptest.NewRequest("GET", "/status/live", nil)
	r.Header.Set("Accept-Encoding", "gzip, deflate")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", w.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil || !strings.HasPrefix(string(body), `<main id="live"`) {
		t.Fatalf("gunzipped: %v %.60q", err, body)
	}
}
