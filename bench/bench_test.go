package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/proc"
)

func TestParseHostBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  100 5 50 1000 20 3 2 10 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
	got, err := parseHostBusy([]byte(stat))
	if want := 165 * clockTick; err != nil || got != want {
		t.Errorf("parseHostBusy = %v, %v; want %v", got, err, want)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5}, 5},
		{[]float64{math.NaN(), 7, math.NaN()}, 7},
	}
	for _, tt := range tests {
		if got := medianOf(tt.in); got != tt.want {
			t.Errorf("medianOf(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := medianOf(nil); !math.IsNaN(got) {
		t.Errorf("medianOf(nil) = %v, want NaN", got)
	}
	m := median([]sample{{OpsPerSec: 10, Errors: 1}, {OpsPerSec: 30}, {OpsPerSec: 20, Errors: 2}})
	if m.OpsPerSec != 20 || m.Errors != 3 {
		t.Errorf("median: %v ops/s, %d errors; want 20 and 3 (errors add up)", m.OpsPerSec, m.Errors)
	}
}

func TestSampleJSONWithoutFigures(t *testing.T) {
	b, err := json.Marshal(median(nil))
	if err != nil {
		t.Fatalf("marshal an empty median: %v", err)
	}
	if !strings.Contains(string(b), `"proxy_cpu_us":null`) {
		t.Errorf("NaN not written as null: %s", b)
	}
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","103092.78","0.314","0.096","0.311","0.455","0.671","2.991"
"GET","99000.50","0.314","0.096","0.311","0.455","0.671","2.991"
`
	got, err := parseRedisBenchmarkCSV([]byte(out), "GET")
	if err != nil || got != 99000.50 {
		t.Errorf("GET rps = %v, %v", got, err)
	}
	if _, err := parseRedisBenchmarkCSV([]byte(out), "LPUSH"); err == nil {
		t.Error("missing test: no error")
	}
}

func TestPoolYAML(t *testing.T) {
	got := poolYAML("127.0.0.1:9", true, []*proc.Process{proc.New(proc.Config{Addr: "127.0.0.1:1"}), proc.New(proc.Config{Addr: "127.0.0.1:2"})})
	want := "bench:\n  listen: 127.0.0.1:9\n  hash: fnv1a_64\n  distribution: ketama\n  timeout: 5000\n" +
		"  redis: true\n  servers:\n    - 127.0.0.1:1:1\n    - 127.0.0.1:2:1\n"
	if got != want {
		t.Errorf("poolYAML:\n%s\nwant:\n%s", got, want)
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -1500: "-1,500"} {
		if got := fmtInt(v); got != want {
			t.Errorf("fmtInt(%v) = %q, want %q", v, got, want)
		}
	}
	if got := fmtInt(math.NaN()); got != "—" {
		t.Errorf("fmtInt(NaN) = %q", got)
	}
}

func TestParseOptions(t *testing.T) {
	t.Setenv("BENCH_QUICK", "1")
	o, err := parseOptions(nil, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !o.quick || o.rounds != 1 || o.duration >= time.Second || strings.HasPrefix(o.out, "bench") {
		t.Errorf("BENCH_QUICK=1: quick %v, rounds %d, duration %v, out %q", o.quick, o.rounds, o.duration, o.out)
	}
	t.Setenv("BENCH_QUICK", "")
	o, err = parseOptions([]string{"-rounds", "5", "-only", "loads", "-loads", "memcache-p1,redis-p16"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.quick || o.rounds != 5 || o.out != filepath.Join("bench", "report") || !o.only["loads"] || o.only["idle"] ||
		len(o.loads) != 2 {
		t.Errorf("options %+v", o)
	}
	if _, err := parseOptions([]string{"-loads", "nope"}, os.Stderr); err == nil {
		t.Error("unknown load: no error")
	}
}

// TestReportRenders renders a synthetic report: tables, criteria and plots.
func TestReportRenders(t *testing.T) {
	dir := t.TempDir()
	s := func(ops, cpu float64) sample {
		return sample{OpsPerSec: ops, P50: 100, P99: 900, P999: 2000, ProxyCPU: cpu, BackendCPU: 3, ClientCPU: 4}
	}
	tbl := &table{Load: loads()[0], Rounds: 1, Rows: []*row{
		{Target: direct, Samples: []sample{s(100000, nan)}},
		{Target: shardproxy, Samples: []sample{s(90000, 5)}},
		{Target: nutcracker, Err: "did not start: boom"},
	}}
	for _, r := range tbl.Rows {
		r.Median = median(r.Samples)
	}
	sc := &scaling{Name: "conns", Title: "client connections", XLabel: "client connections", Targets: targetNames,
		LogOps: true}
	for _, x := range []float64{10, 100, 1000} {
		sc.Points = append(sc.Points, point{X: x, Target: direct, Sample: s(x*100, nan), RSSKiB: 2048},
			point{X: x, Target: shardproxy, Sample: s(x*90, 6), RSSKiB: int64(x) * 10}, point{X: x, Target: nutcracker, Err: "x"})
	}
	rep := &report{Date: "today", Settings: "test", Machine: map[string]string{"cores": "2"},
		Versions: map[string]string{}, Tables: []*table{tbl}, Scaling: []*scaling{sc},
		Idle: []idleResult{{Target: shardproxy, Conns: 100, BeforeKiB: 1000, AfterKiB: 1500, PerConnKiB: 5}}}
	rep.finish([]string{"a failure"})
	if err := rep.write(dir); err != nil {
		t.Fatalf("write: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| shardproxy | 90,000 | 0.90 |", "did not start: boom", "a failure",
		"scaling-conns-ops.png", "scaling-conns-rss.png", "| 1,000 | 100,000 | 90,000 | — | 3.00 | 6.00 | — | 2.0 MiB | 9.8 MiB | — |",
		"5.00 KiB", "| met |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	for _, png := range []string{"scaling-conns-ops.png", "scaling-conns-cpu.png", "scaling-conns-rss.png"} {
		b, err := os.ReadFile(filepath.Join(dir, png))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", png, err)
		}
	}
	var back map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Errorf("results.json: %v", err)
	}
}

// buildTools builds shardproxy and shardbench from the repository into a
// temporary directory and returns it.
func buildTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"shardproxy", "shardbench"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "./cmd/"+pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return dir
}

// TestHarnessRuns runs the harness end to end on one short load, its
// fixed-rate twin and a few idle connections. It checks that it runs and
// that its output is sane, not what the figures are. With MEMTIER set in
// the environment (a memtier_benchmark binary) both loads run under memtier
// too; without it they run under shardbench only, and the tables say so.
func TestHarnessRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the harness runs real servers")
	}
	dir := buildTools(t)
	out := filepath.Join(dir, "report")
	memtier := os.Getenv("MEMTIER")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-only", "loads,idle", "-loads", "memcache-p1,memcache-p1-half", "-rounds", "1", "-duration", "300ms",
		"-warmup", "100ms", "-idle-conns", "200", "-out", out, "-memtier", cmp.Or(memtier, "off"),
		"-shardproxy", filepath.Join(dir, "shardproxy"), "-shardbench", filepath.Join(dir, "shardbench"),
		"-baseline", filepath.Join(dir, "shardproxy")},
		&stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	type sampleJSON struct {
		OpsPerSec  float64 `json:"ops_per_sec"`
		Errors     int64   `json:"errors"`
		PacingLate float64 `json:"pacing_late_p99_us"`
		P99        float64 `json:"p99_us"`
	}
	var rep struct {
		Loads []struct {
			Rate      float64 `json:"rate"`
			PerConn   int     `json:"rate_per_conn"`
			NoMemtier string  `json:"no_memtier"`
			Rows      []struct {
				Target  string
				Samples []sampleJSON
				Memtier []sampleJSON `json:"memtier_samples"`
			}
		}
		Idle []struct {
			Target     string
			PerConnKiB float64 `json:"per_conn_kib"`
			FDs        int     `json:"fds"`
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	// Both have shardproxy's defaults as a row of their own, and the
	// baseline binary (here the same build) right after shardproxy.
	if len(rep.Loads) != 2 || len(rep.Loads[0].Rows) != 5 || len(rep.Loads[1].Rows) != 5 {
		t.Fatalf("want two loads with five targets:\n%s", b)
	}
	if fixed := rep.Loads[1]; fixed.PerConn < 1 || fixed.Rate != memtierRate(fixed.PerConn)*50 {
		t.Errorf("fixed rate %v, %d per connection: not what memtier paces 50 connections to", fixed.Rate, fixed.PerConn)
	}
	for _, l := range rep.Loads {
		if (memtier == "") != strings.Contains(l.NoMemtier, "memtier_benchmark not run") {
			t.Errorf("MEMTIER=%q, note %q", memtier, l.NoMemtier)
		}
		for _, r := range l.Rows {
			if memtier != "" && (len(r.Memtier) != 1 || r.Memtier[0].OpsPerSec <= 0 || r.Memtier[0].P99 <= 0 || r.Memtier[0].Errors != 0) {
				t.Errorf("%s: memtier samples %+v", r.Target, r.Memtier)
			}
			if memtier == "" && len(r.Memtier) > 0 {
				t.Errorf("%s: memtier samples without memtier", r.Target)
			}
		}
	}
	for i, want := range []string{direct, shardproxy, shardproxyBaseline, shardproxyDefaults, nutcracker} {
		if got := rep.Loads[0].Rows[i].Target; got != want {
			t.Errorf("memcache-p1's row %d is %s, want %s", i, got, want)
		}
	}
	for i, l := range rep.Loads {
		for _, r := range l.Rows {
			if len(r.Samples) != 1 || r.Samples[0].OpsPerSec <= 0 || r.Samples[0].Errors != 0 {
				t.Errorf("%s: samples %+v", r.Target, r.Samples)
				continue
			}
			// Only the second load is paced: it reports the
			// generator's own lateness.
			if paced := r.Samples[0].PacingLate > 0; paced != (i == 1) {
				t.Errorf("load %d, %s: pacing lateness %v", i, r.Target, r.Samples[0].PacingLate)
			}
		}
	}
	if len(rep.Idle) != 2 {
		t.Fatalf("idle results %+v", rep.Idle)
	}
	for _, r := range rep.Idle {
		if r.FDs < 200 {
			t.Errorf("idle %s: %+v", r.Target, r)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "README.md"))
	wants := []string{"### memcache text, pipeline 1", "The generator's own lateness",
		"memcache-p1: req/s, shardproxy ÷ shardproxy-baseline (shardbench)", "| shardproxy-baseline |"}
	if memtier != "" {
		wants = append(wants, "shardbench / memtier_benchmark", "--rate-limiting")
	}
	for _, want := range wants {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}

// TestRatioGoalRounds checks a goal's verdict (the median of the rounds'
// ratios) and the figures shown beside it.
func TestRatioGoalRounds(t *testing.T) {
	rowOf := func(ops ...float64) *row {
		r := &row{}
		for _, o := range ops {
			r.Samples = append(r.Samples, sample{OpsPerSec: o})
		}
		r.Median = median(r.Samples)
		return r
	}
	ops := func(s *sample) float64 { return s.OpsPerSec }
	// The medians, 120 and 100, come from different rounds; the rounds'
	// ratios are 1.50, 0.90 and 2.00.
	sp, nc := rowOf(150, 90, 120), rowOf(100, 100, 60)
	c := ratioGoal("x", "≥", 1.5, ops, sp, nc)
	if c.Measured != "1.50× (median of the rounds: 1.50, 0.90, 2.00; ratio of the medians 1.20×)" || c.Status != "met" {
		t.Errorf("got %q, %s", c.Measured, c.Status)
	}
	c = ratioGoal("x", "≥", 1.6, ops, sp, nc)
	if c.Status != "NOT MET" {
		t.Errorf("1.50× against ≥ 1.60×: %s", c.Status)
	}
	// Just under the goal: the verdict's figure shows it.
	c = ratioGoal("x", "≥", 1.1, ops, rowOf(109.9), rowOf(100))
	if c.Measured != "1.099×" || c.Status != "NOT MET" {
		t.Errorf("just under the goal: got %q, %s", c.Measured, c.Status)
	}
	c = ratioGoal("x", "≤", 1.2, ops, sp, rowOf(100)) // one round: no spread to show
	if c.Measured != "1.20×" || c.Status != "met" {
		t.Errorf("got %q, %s", c.Measured, c.Status)
	}
}

// TestHalfLoadGoalRounds checks that the p99 goal at half load is judged on
// the rounds' own ratios, with both medians shown.
func TestHalfLoadGoalRounds(t *testing.T) {
	rowOf := func(target string, p99s ...float64) *row {
		r := &row{Target: target}
		for _, p := range p99s {
			r.Samples = append(r.Samples, sample{OpsPerSec: 1000, P99: p})
		}
		r.Median = median(r.Samples)
		return r
	}
	half := func(sp, nc *row) criterion {
		rep := &report{Tables: []*table{{Load: load{Name: "memcache-p1-half"}, Rows: []*row{sp, nc}}}}
		for _, c := range evaluate(rep) {
			if strings.HasPrefix(c.What, "memcache-p1-half:") {
				return c
			}
		}
		t.Fatal("no half-load goal")
		return criterion{}
	}
	// The median p99s are 4,000 against 3,500, but round by round
	// shardproxy's is lower in three of five: 0.99, 1.14, 2.00, 0.92, 0.80.
	c := half(rowOf(shardproxy, 2000, 4000, 6000, 17000, 3300), rowOf(nutcracker, 2020, 3500, 3000, 18500, 4125))
	want := "0.99× (median of the rounds: 0.99, 1.14, 2.00, 0.92, 0.80; ratio of the medians 1.14×); medians 4,000 µs vs 3,500 µs"
	if c.Measured != want || c.Status != "met" {
		t.Errorf("got %q, %s; want %q, met", c.Measured, c.Status, want)
	}
	c = half(rowOf(shardproxy, 2100, 4000, 6000), rowOf(nutcracker, 2000, 3500, 3000))
	if c.Status != "NOT MET" {
		t.Errorf("higher in every round: %s (%s)", c.Status, c.Measured)
	}
	if c = half(rowOf(shardproxy), rowOf(nutcracker, 1)); c.Status != "not measured" || c.Measured != "" {
		t.Errorf("no rounds: got %q, %s", c.Measured, c.Status)
	}
}

// TestV2Goals checks that issue 25's goals compare the V2 route with the
// right rows, and stay "not measured" without memcached's proxy.
func TestV2Goals(t *testing.T) {
	rowOf := func(target string, ops, cpu float64) *row {
		r := &row{Target: target, Samples: []sample{{OpsPerSec: ops, ProxyCPU: cpu}}}
		r.Median = median(r.Samples)
		return r
	}
	rep := &report{Tables: []*table{{Load: load{Name: "lua-v2-p1"}, Rows: []*row{
		rowOf(direct, 200, nan), rowOf(shardproxyV2, 90, 4), rowOf(shardproxyV2Meta, 110, 4.5), rowOf(shardproxy, 120, 2),
		rowOf(mcProxy, 100, 5)}},
		{Load: load{Name: "lua-v2-p16"}, Rows: []*row{rowOf(shardproxyV2, 90, 4), rowOf(shardproxy, 100, 2)}}}}
	got := map[string]criterion{}
	for _, c := range v2Goals(rep) {
		got[c.What] = c
	}
	for what, want := range map[string]string{
		"lua-v2-p1: req/s, shardproxy-v2 ÷ memcached-proxy (issue 25)":                      "0.90× NOT MET",
		"lua-v2-p1: proxy CPU per request, shardproxy-v2 ÷ memcached-proxy (issue 25)":      "0.80× met",
		"lua-v2-p1: req/s, shardproxy-v2 ÷ shardproxy's native pool (issue 25)":             "0.75× met",
		"lua-v2-p16: req/s, shardproxy-v2 ÷ memcached-proxy (issue 25)":                     " not measured",
		"lua-v2-p16: proxy CPU per request, shardproxy-v2 ÷ memcached-proxy (issue 25)":     " not measured",
		"lua-v2-p16: req/s, shardproxy-v2 ÷ shardproxy's native pool (issue 25)":            "0.90× met",
		"lua-v2-p1: req/s, shardproxy-v2-meta ÷ memcached-proxy (issue 25)":                 "1.10× met",
		"lua-v2-p1: proxy CPU per request, shardproxy-v2-meta ÷ memcached-proxy (issue 25)": "0.90× met",
		"lua-v2-p1: req/s, shardproxy-v2-meta ÷ shardproxy's native pool (issue 25)":        "0.92× met",
		"lua-v2-p16: req/s, shardproxy-v2-meta ÷ shardproxy's native pool (issue 25)":       " not measured",
	} {
		c, ok := got[what]
		if !ok {
			t.Errorf("no goal %q", what)
			continue
		}
		if s := c.Measured + " " + c.Status; s != want {
			t.Errorf("%s: got %q, want %q", what, s, want)
		}
	}
}

// TestV2Route checks the route file both proxies run: the backend's host
// and port and the pools' timeout in seconds.
func TestV2Route(t *testing.T) {
	f := &fleet{work: t.TempDir(), routes: map[string]string{}}
	srv := proc.New(proc.Config{Name: "memcached", Addr: "127.0.0.1:25501"})
	path, err := f.v2RouteFile(srv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`mcp.backend("b1", "127.0.0.1", 25501)`, "mcp.backend_read_timeout(5)",
		"rctx:enqueue_and_wait(r, handle)", "mcp.attach(mcp.CMD_ANY_STORAGE, fgen)"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("route file lacks %q:\n%s", want, b)
		}
	}
	if again, _ := f.v2RouteFile(srv); again != path {
		t.Errorf("second call wrote %s, not the first file %s", again, path)
	}
}

// TestNearConfig: shardproxy-near is shardproxy's pool with a near cache,
// over the same servers with the same server_protocol.
func TestNearConfig(t *testing.T) {
	f := &fleet{work: t.TempDir(), routes: map[string]string{}}
	srv := []*proc.Process{proc.New(proc.Config{Name: "memcached", Addr: "127.0.0.1:25501"})}
	read := func(kind string) string {
		t.Helper()
		path, err := f.proxyConfig(kind, "127.0.0.1:25600", false, srv, benchSP)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	plain, near := read(shardproxy), read(shardproxyNear)
	if want := plain + fmt.Sprintf("  near_cache: %d\n", nearCacheMiB); near != want {
		t.Errorf("shardproxy-near's YAML:\n%s\nwant:\n%s", near, want)
	}
	for _, l := range loads() {
		if l.Name == "memcache-near" && !slices.Equal(l.Targets, nearTargets) {
			t.Errorf("memcache-near rows %v", l.Targets)
		}
	}
}

// TestHarnessRunsV2 runs the V2 load end to end: without -memcached-proxy
// its row is absent and the table says so; with MEMCACHED_PROXY set in the
// environment (a memcached built with its proxy) the row is there.
func TestHarnessRunsV2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the harness runs real servers")
	}
	dir := buildTools(t)
	mcp := os.Getenv("MEMCACHED_PROXY")
	out := filepath.Join(dir, "report")
	args := []string{"-only", "loads", "-loads", "lua-v2-p1", "-rounds", "1", "-duration", "300ms",
		"-warmup", "100ms", "-out", out,
		"-shardproxy", filepath.Join(dir, "shardproxy"), "-shardbench", filepath.Join(dir, "shardbench")}
	if mcp != "" {
		args = append(args, "-memcached-proxy", mcp)
	}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Loads []struct {
			Absent string
			Rows   []struct {
				Target  string
				Samples []struct {
					OpsPerSec float64 `json:"ops_per_sec"`
					ProxyCPU  float64 `json:"proxy_cpu_us"`
				}
			}
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	want := []string{direct, shardproxyV2, shardproxyV2Meta, shardproxy, shardproxyText}
	if mcp != "" {
		want = append(want, mcProxy)
	}
	if len(rep.Loads) != 1 || len(rep.Loads[0].Rows) != len(want) {
		t.Fatalf("want one load with rows %v:\n%s", want, b)
	}
	for i, r := range rep.Loads[0].Rows {
		if r.Target != want[i] || len(r.Samples) != 1 || r.Samples[0].OpsPerSec <= 0 {
			t.Errorf("row %d: %+v, want %s with one sample", i, r, want[i])
		}
	}
	if absent := rep.Loads[0].Absent; (mcp == "") != strings.Contains(absent, "memcached-proxy: not run") {
		t.Errorf("MEMCACHED_PROXY=%q, absent note %q", mcp, absent)
	}
}
