package admin_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

var update = flag.Bool("update", false, "rewrite testdata/nutcracker_stats.json from the real nutcracker")

const (
	goldenConfig = "testdata/stats.yml"
	goldenStats  = "testdata/nutcracker_stats.json"
)

var (
	numberValue = regexp.MustCompile(`":-?[0-9]+`)
	stringValue = regexp.MustCompile(`"(source|version)":"[^"]*"`)
	extraField  = regexp.MustCompile(`, "(ejects|state|failures|retry_at|probing|probes|probe_failures|restores|idle_checks|idle_replaced)":N`)
)

// normalize replaces every number by N and the host and version strings by
// S, so that two stats replies compare equal when they have the same keys in
// the same order, the same value shapes and the same separators.
func normalize(b []byte) string {
	b = numberValue.ReplaceAll(b, []byte(`":N`))
	return string(stringValue.ReplaceAll(b, []byte(`"$1":"S"`)))
}

// nutcrackerPath returns the nutcracker binary, or "" when it is missing.
func nutcrackerPath() string {
	if p, err := exec.LookPath("nutcracker"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nutcracker"); err == nil {
		return "/usr/sbin/nutcracker"
	}
	return ""
}

// captureNutcracker runs the real nutcracker on the golden config and
// returns its stats reply.
func captureNutcracker(t *testing.T) []byte {
	t.Helper()
	yaml, err := os.ReadFile(goldenConfig)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(
		"LISTEN_ALPHA", "127.0.0.1:"+strconv.Itoa(testserver.FreePort(t)),
		"LISTEN_BETA", "127.0.0.1:"+strconv.Itoa(testserver.FreePort(t))).Replace(string(yaml))
	_, statsAddr := testserver.StartNutcracker(t, text)
	return readStats(t, statsAddr)
}

// TestStatsGolden checks shardproxy's stats reply for testdata/stats.yml
// against nutcracker 0.5.0's for the same file: byte for byte once values
// are normalized and shardproxy's extra server fields are taken out. -update
// rewrites the capture; with nutcracker installed the test also checks that
// the capture still matches a live one.
func TestStatsGolden(t *testing.T) {
	if *update {
		if err := os.WriteFile(goldenStats, captureNutcracker(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(goldenStats)
	if err != nil {
		t.Fatalf("%v (run go test -run TestStatsGolden -update with nutcracker installed)", err)
	}
	if !*update && !testing.Short() && nutcrackerPath() != "" {
		if live := captureNutcracker(t); normalize(live) != normalize(golden) {
			t.Errorf("the live nutcracker's stats differ from %s (rerun with -update):\nlive:   %s\ngolden: %s",
				goldenStats, normalize(live), normalize(golden))
		}
	}

	yaml, err := os.ReadFile(goldenConfig)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("LISTEN_ALPHA", "127.0.0.1:0", "LISTEN_BETA", "127.0.0.1:0").Replace(string(yaml))
	cfg, err := config.Parse([]byte(text), goldenConfig)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	st := srv.Stats()
	st.Now = st.Start.Add(3 * time.Second)
	got := admin.AppendStats(nil, st, "testhost")

	if !json.Valid(got) {
		t.Fatalf("not JSON: %s", got)
	}
	if !bytes.HasSuffix(got, []byte("}\n")) || !bytes.HasSuffix(golden, []byte("}\n")) {
		t.Errorf("want both to end in }\\n:\ngot:    %q\ngolden: %q", got[len(got)-4:], golden[len(golden)-4:])
	}
	ours := extraField.ReplaceAllString(normalize(got), "")
	if want := normalize(golden); ours != want {
		t.Errorf("stats differ from nutcracker's beyond values:\ngot:  %s\nwant: %s", ours, want)
	}
	// The extras are there, after nutcracker's 13 fields, in every server.
	if n, want := strings.Count(string(got), `"out_queue_bytes":0, "ejects":0, "state":0, "failures":0, "retry_at":0, `+
		`"probing":0, "probes":0, "probe_failures":0, "restores":0, "idle_checks":0, "idle_replaced":0}`), 3; n != want {
		t.Errorf("%d servers end with the extra fields, want %d:\n%s", n, want, got)
	}
	if !strings.Contains(string(got), `"uptime":3, "timestamp":`+strconv.FormatInt(st.Now.Unix(), 10)+", ") {
		t.Errorf("uptime or timestamp wrong:\n%s", got)
	}
}

// TestStatsExporterModel reads shardproxy's stats the way twemproxy
// exporters do, which decides where extra fields may go: every top-level key
// past the header is a pool object, every pool key past its six counters is
// a server object, and every value below is a number (Diamond applies int()
// to each, stuartnelson3/twemproxy_exporter unmarshals servers as structs).
func TestStatsExporterModel(t *testing.T) {
	st := proxy.Stats{Version: "1.2.3", Start: time.Unix(1000, 0), Now: time.Unix(1100, 0),
		Pools: []proxy.PoolStats{{Name: "a", Requests: 5, ProtocolErrors: 1, Servers: []proxy.ServerStats{
			{Name: "s1", Ejects: 2, Requests: 9},
			{Name: "s2", State: backend.State{Bad: true, RetryAt: time.Unix(2000, 0), Failures: 3}},
		}}}}
	doc := statsDoc(t, admin.AppendStats(nil, st, "h"))
	header := map[string]bool{"service": true, "source": true, "version": true, "uptime": true,
		"timestamp": true, "total_connections": true, "curr_connections": true}
	poolKeys := map[string]bool{"client_eof": true, "client_err": true, "client_connections": true,
		"server_ejects": true, "forward_error": true, "fragments": true}
	for k, v := range doc {
		if header[k] {
			continue
		}
		pool, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("top-level %q is %T, but exporters read it as a pool", k, v)
		}
		for pk, pv := range pool {
			if poolKeys[pk] {
				continue
			}
			server, ok := pv.(map[string]any)
			if !ok {
				t.Fatalf("pool key %q is %T, but exporters read it as a server", pk, pv)
			}
			for sk, sv := range server {
				if _, ok := sv.(float64); !ok {
					t.Errorf("server field %q is %T, want a number", sk, sv)
				}
			}
		}
	}
	s2 := doc["a"].(map[string]any)["s2"].(map[string]any)
	if s2["state"] != 2.0 || s2["failures"] != 3.0 || s2["retry_at"] != float64(time.Unix(2000, 0).UnixMicro()) {
		t.Errorf("bad server's extras: %v", s2)
	}
}

func TestStatsEncoding(t *testing.T) {
	base := proxy.Stats{Version: "v", Start: time.Unix(10, 0), Now: time.Unix(10, 0)}
	header := `{"service":"nutcracker", "source":"h", "version":"v", "uptime":0, "timestamp":10, "total_connections":0, "curr_connections":0`
	pool := `"client_eof":0, "client_err":0, "client_connections":0, "server_ejects":0, "forward_error":0, "fragments":0`
	tests := []struct {
		name  string
		pools []proxy.PoolStats
		want  string
	}{
		{"no pools", nil, header + "}\n"},
		{"pool without servers", []proxy.PoolStats{{Name: "p"}}, header + `, "p": {` + pool + "}}\n"},
		{"escaped names", []proxy.PoolStats{{Name: "a\"b\\c\n"}}, header + `, "a\"b\\c\u000a": {` + pool + "}}\n"},
		{"two pools", []proxy.PoolStats{{Name: "p"}, {Name: "q"}}, header + `, "p": {` + pool + `},"q": {` + pool + "}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := base
			st.Pools = tt.pools
			got := string(admin.AppendStats(nil, st, "h"))
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not JSON: %q", got)
			}
		})
	}
}

// TestLatencyBounds checks that the metrics' bucket bounds are the
// backends'. admin keeps a copy because it may not import backend.
func TestLatencyBounds(t *testing.T) {
	text := scrape(t, admin.Handler(fakeSource{}, admin.HTTPConfig{}), "")
	for _, b := range backend.LatencyBuckets {
		le := `le="` + strconv.FormatFloat(b.Seconds(), 'g', -1, 64) + `"`
		if !strings.Contains(text, `shardproxy_backend_latency_seconds_bucket{backend="s",pool="p",`+le+"}") {
			t.Errorf("no bucket %s in /metrics", le)
		}
	}
}

func TestWriteDescription(t *testing.T) {
	var b bytes.Buffer
	if err := admin.WriteDescription(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pool stats:\n  client_eof          \"# eof on client connections\"\n",
		"\n\nserver stats:\n  server_eof          \"# eof on server connections\"\n",
		"  server_connections  \"# active server connections\"\n",
		"  retry_at ",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("description lacks %q:\n%s", want, b.String())
		}
	}
}

// A server waiting for a health probe is bad (state 2) and probing, its
// retry_at the next probe's time, and its health counters are there.
func TestStatsProbing(t *testing.T) {
	next := time.Unix(20, 5000)
	st := proxy.Stats{Version: "v", Start: time.Unix(10, 0), Now: time.Unix(10, 0), Pools: []proxy.PoolStats{{
		Name: "p", Servers: []proxy.ServerStats{{
			Name: "s", Probes: 4, ProbeFailures: 3, Restores: 1, IdleChecks: 9, IdleReplaced: 2,
			State: backend.State{Bad: true, Probing: true, RetryAt: next},
		}},
	}}}
	got := string(admin.AppendStats(nil, st, "h"))
	want := `"state":2, "failures":0, "retry_at":20000005, "probing":1, "probes":4, "probe_failures":3, ` +
		`"restores":1, "idle_checks":9, "idle_replaced":2}`
	if !strings.Contains(got, want) {
		t.Fatalf("got %s\nwant it to contain %s", got, want)
	}
}
