package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseMemtierJSON reads --json-out-file outputs of memtier_benchmark
// 2.3.0 captured against memcached and redis-server.
func TestParseMemtierJSON(t *testing.T) {
	for _, tc := range []struct {
		file            string
		count           int64
		ops, p50, p999  float64 // p50, p99.9 in ms
		miss            float64
		wantErrContains string
	}{
		{file: "memcache-p1.json", count: 84850, ops: 84474.51, p50: 0.495, p999: 4.351, miss: 75199.74 / (806.42 + 75199.74)},
		{file: "redis-p16.json", count: 455712, ops: 453881.5, p50: 1.647, p999: 8.255, miss: 89198.26 / (319275.36 + 89198.26)},
		{file: "memcache-rate.json", count: 46050, ops: 22947.67, p50: 0.927, p999: 5.855},
		// memtier exits 0 and writes zeros when it cannot connect.
		{file: "refused.json", wantErrContains: "no request answered"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "memtier", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := parseMemtierJSON(b)
		if tc.wantErrContains != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrContains) {
				t.Errorf("%s: error %v, want one with %q", tc.file, err, tc.wantErrContains)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		tot := r.Totals
		if tot.Count != tc.count || tot.OpsPerSec != tc.ops || *tot.Percentiles.P50 != tc.p50 || *tot.Percentiles.P999 != tc.p999 {
			t.Errorf("%s: count %d ops %v p50 %v p99.9 %v; want %d %v %v %v", tc.file, tot.Count, tot.OpsPerSec,
				*tot.Percentiles.P50, *tot.Percentiles.P999, tc.count, tc.ops, tc.p50, tc.p999)
		}
		if m := r.missRatio(); math.Abs(m-tc.miss) > 1e-9 {
			t.Errorf("%s: miss ratio %v, want %v", tc.file, m, tc.miss)
		}
	}
}

// TestMemtierRate: a run's rate is memtier's, and a run with none (a
// prefill that finished, by memtier's clock, before it started) is parsed
// with its count but has no rate.
func TestMemtierRate(t *testing.T) {
	for _, tc := range []struct {
		file  string
		count int64
		ops   float64 // 0: rate fails
	}{
		{file: "memcache-p1.json", count: 84850, ops: 84474.51},
		{file: "prefill-1000c.json", count: 10000},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "memtier", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := parseMemtierJSON(b)
		if err != nil || r.Totals.Count != tc.count {
			t.Errorf("%s: count %d, %v; want %d", tc.file, r.Totals.Count, err, tc.count)
			continue
		}
		ops, err := r.rate()
		switch {
		case tc.ops == 0 && (err == nil || !strings.Contains(err.Error(), "no request rate")):
			t.Errorf("%s: rate %v, %v; want no request rate", tc.file, ops, err)
		case tc.ops != 0 && (err != nil || ops != tc.ops):
			t.Errorf("%s: rate %v, %v; want %v", tc.file, ops, err, tc.ops)
		}
	}
	nan := `{"ALL STATS": {"Runtime": {"Total duration": 3000}, "Totals": {"Count": 10, "Ops/sec": -nan, ` +
		`"Percentile Latencies": {"p50.00": 1, "p99.00": 1, "p99.90": 1}}}}`
	r, err := parseMemtierJSON([]byte(nan))
	if err != nil {
		t.Fatal(err)
	}
	if ops, err := r.rate(); err == nil {
		t.Errorf("Ops/sec -nan: rate %v, want an error", ops)
	}
}

func TestParseMemtierJSONBad(t *testing.T) {
	for _, in := range []string{
		``, `{}`, `{"ALL STATS": {}}`, `[1]`,
		`{"ALL STATS": {"Totals": {"Count": 10, "Ops/sec": 5}}}`, // no percentiles
		`{"ALL STATS": {"Totals": {"Count": 0, "Ops/sec": 0, "Percentile Latencies": {"p50.00": 1, "p99.00": 1, "p99.90": 1}}}}`,
	} {
		if _, err := parseMemtierJSON([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	good := `{"ALL STATS": {"Totals": {"Count": 10, "Ops/sec": 5, "Average Latency": -nan, ` +
		`"Percentile Latencies": {"p50.00": 1, "p99.00": 2, "p99.90": inf}}}}`
	r, err := parseMemtierJSON([]byte(good))
	if err == nil || r.Totals.Count != 10 {
		t.Errorf("nan and inf: %+v, %v; want parsed, with p99.9 missing", r, err)
	}
}

// FuzzParseMemtierJSON: the parser never panics, and what it accepts has
// the figures a sample needs (its rate is judged apart, by rate).
func FuzzParseMemtierJSON(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "memtier", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"ALL STATS": {"Totals": {"Count": 1, "Ops/sec": nan}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseMemtierJSON(b)
		if err != nil {
			return
		}
		p := r.Totals.Percentiles
		if r.Totals.Count <= 0 || p.P50 == nil || p.P99 == nil || p.P999 == nil {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func TestMemtierLoad(t *testing.T) {
	l, err := memtierLoad(common("resp", "-pipeline", "16", "-rate", "25000"))
	if err != nil {
		t.Fatal(err)
	}
	want := mtLoad{protocol: "redis", conns: 50, pipeline: 16, value: 100, ratio: "1:9", keys: 10000, rate: 25000}
	if l != want {
		t.Errorf("got %+v, want %+v", l, want)
	}
	args, err := memtierArgs("127.0.0.1:11211", l)
	if err != nil || !slices.Equal(args[:6], []string{"-s", "127.0.0.1", "-p", "11211", "-P", "redis"}) {
		t.Errorf("memtierArgs: %q, %v", args, err)
	}
	for _, bad := range [][]string{
		{"-proto", "meta"},
		{"-proto", "text", "-mget", "100"},
		{"-proto", "text", "-dist", "zipf"},
		{"-proto", "text", "-conns", "0"},
		{"-proto", "text", "-procs"},
		{"-conns", "5"},
	} {
		if _, err := memtierLoad(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// Every goal load runs under both generators; the others under
	// shardbench, as memtier cannot send them.
	for _, l := range loads() {
		_, err := memtierLoad(l.Args)
		if l.Memtier && err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
	}
}

// TestFixedRate checks the arithmetic that makes both generators pace the
// same load: memtier's per-connection budget, refilled at most 50 times a
// second in whole requests over whole microseconds.
func TestFixedRate(t *testing.T) {
	for _, tc := range []struct {
		perConn int
		want    float64
	}{
		{500, 500},              // 10 every 20,000 µs
		{461, 10 * 1e6 / 21739}, // ceil(461/50) = 10 a tick, 46 ticks: 460.0
		{540, 11 * 1e6 / 20408}, // 11 a tick, 49 ticks: 539.0
		{30, 1e6 / 33333},       // one a tick
		{1, 1},
		{0, 0},
	} {
		if got := memtierRate(tc.perConn); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("memtierRate(%d) = %v, want %v", tc.perConn, got, tc.want)
		}
	}
	for _, tc := range []struct {
		total   float64
		conns   int
		perConn int
		eff     float64
	}{
		{25000, 50, 500, 25000},
		{23050, 50, 461, 50 * 10 * 1e6 / 21739},
		{10, 50, 1, 50},  // at least one a second per connection
		{0, 50, 0, 0},    // no rate
		{25000, 0, 0, 0}, // no connections
	} {
		p, eff := fixedRate(tc.total, tc.conns)
		if p != tc.perConn || math.Abs(eff-tc.eff) > 1e-6 {
			t.Errorf("fixedRate(%v, %d) = %d, %v; want %d, %v", tc.total, tc.conns, p, eff, tc.perConn, tc.eff)
		}
	}
	if n := flagInt(common("text"), "-conns", 1); n != 50 {
		t.Errorf("flagInt -conns = %d", n)
	}
	if n := flagInt(nil, "-conns", 7); n != 7 {
		t.Errorf("flagInt default = %d", n)
	}
}

func TestDisagreement(t *testing.T) {
	sb := sample{OpsPerSec: 100000, P50: 500, P99: 2000, P999: 4000, ProxyCPU: 10, BackendCPU: 9}
	mt := sample{OpsPerSec: 86000, P50: 600, P99: 2200, P999: 2000, ProxyCPU: nan, BackendCPU: 10.5}
	got := disagreement(sb, mt)
	// req/s -14% and p99 +10% are within; p50 +20%, p99.9 -50% and backend
	// CPU +16.7% are not; the proxy CPU is missing on one side.
	want := []string{"p50 +20%", "p99.9 -50%", "backend CPU +17%"}
	if !slices.Equal(got, want) {
		t.Errorf("disagreement = %q, want %q", got, want)
	}
	if d := disagreement(sb, sb); d != nil {
		t.Errorf("a sample disagrees with itself: %q", d)
	}
	tab := &table{Rows: []*row{
		{Target: direct, Median: sb},
		{Target: shardproxy, Median: sb, MemtierMedian: &mt, Disagree: got},
		{Target: nutcracker, Median: sb, MemtierErr: "memtier: 3 connection errors"},
	}}
	h, rows := tab.generatorCells()
	if len(rows) != 2 || len(rows[0]) != len(h) {
		t.Fatalf("generatorCells: %q %q", h, rows)
	}
	if rows[0][1] != "100,000 / 86,000" || rows[0][2] != "500 / 600 ⚑" || !strings.HasPrefix(rows[0][7], "⚑ p50 +20%") {
		t.Errorf("shardproxy's row: %q", rows[0])
	}
	if !strings.Contains(rows[1][7], "connection errors") {
		t.Errorf("nutcracker's row: %q", rows[1])
	}
}

// TestProductionGoals checks that issue 44's goals are judged by each
// generator on its own samples.
// twoGenerators is a row of one round under each generator: shardbench's
// sample sb and memtier's mt.
func twoGenerators(target string, sb, mt sample) *row {
	r := &row{Target: target, Samples: []sample{sb}, Memtier: []sample{mt}}
	r.Median = median(r.Samples)
	m := median(r.Memtier)
	r.MemtierMedian = &m
	return r
}

func TestProductionGoals(t *testing.T) {
	rowOf := func(target string, sbCPU, mtCPU float64) *row {
		return twoGenerators(target, sample{OpsPerSec: 1000, ProxyCPU: sbCPU}, sample{OpsPerSec: 1000, ProxyCPU: mtCPU})
	}
	// shardbench reads 8 against 10 (0.80×: met), memtier 9.5 against 10
	// (0.95×: not met).
	rep := &report{Tables: []*table{{Load: load{Name: "redis-p1-half"},
		Rows: []*row{rowOf(shardproxyDefaults, 8, 9.5), rowOf(nutcracker, 10, 10)}}}}
	got := map[string]criterion{}
	for _, c := range productionGoals(rep) {
		got[c.What] = c
	}
	const what = "redis-p1-half: proxy CPU per request, shardproxy-defaults ÷ nutcracker (issue 44, "
	if c := got[what+"shardbench)"]; c.Status != "met" || c.Measured != "0.80×" {
		t.Errorf("shardbench: %+v", c)
	}
	if c := got[what+"memtier)"]; c.Status != "NOT MET" || c.Measured != "0.95×" {
		t.Errorf("memtier: %+v", c)
	}
	if c := got["lua-v2-p1-half: p99, shardproxy-defaults ÷ memcached-proxy (issue 44, memtier)"]; c.Status != "not measured" {
		t.Errorf("a load not run: %+v", c)
	}
	if memtierRow(&row{Samples: []sample{{}}}) != nil {
		t.Error("a row without memtier's samples gives a memtier row")
	}
}

func TestMemtierComplaint(t *testing.T) {
	out := "[RUN #1 0%,   0 secs]  1 threads 50 conns:  0 ops\rConnection error: Connection refused\n" +
		"Thread 0 finished due to connection failures, requesting restart.\n\nSaving JSON output file: x.json\nJson file closed.\n"
	if got := lastLine(out); got != "Thread 0 finished due to connection failures, requesting restart." {
		t.Errorf("got %q", got)
	}
	if got := lastLine("a\nb\n"); got != "b" {
		t.Errorf("got %q", got)
	}
	if got := lastLine(""); got != "" {
		t.Errorf("got %q", got)
	}
}

// TestJudgeCross: tools that disagree fail the run unless redis-benchmark's
// one thread was busy; the figures are the rows of the run of 2026-11-30.
func TestJudgeCross(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sb, rb, rbUS float64 // req/s, req/s, redis-benchmark's µs of CPU a request
		fails, bound bool
	}{
		{name: "SET -P 1, redis-benchmark's thread busy", sb: 128789, rb: 86515, rbUS: 11.29, bound: true},
		{name: "GET -P 16, off with its thread at 0.85 cores", sb: 1093304, rb: 942658, rbUS: 0.9, fails: true},
		{name: "SET -P 16, within", sb: 934806, rb: 825695, rbUS: 0.81},
		{name: "off with an idle tool", sb: 120000, rb: 60000, rbUS: 5, fails: true},
	} {
		h := &harness{opt: &options{}, stdout: io.Discard}
		cr := &crossRow{Test: "SET", Pipeline: 1, Shardbench: []float64{tc.sb}, RedisBenchmark: []float64{tc.rb},
			SBCPU: []float64{7.4}, RBCPU: []float64{tc.rbUS}, SBServer: []float64{7}, RBServer: []float64{9},
			SBCounted: []float64{1}, RBCounted: []float64{1}}
		h.judgeCross(cr)
		if got := len(h.failures) > 0; got != tc.fails || cr.RBBound != tc.bound {
			t.Errorf("%s: failed %v (%q), bound %v (%.2f cores); want failed %v, bound %v",
				tc.name, got, h.failures, cr.RBBound, cr.RBCores, tc.fails, tc.bound)
		}
		if v := (&report{}).crossVerdict(cr); tc.bound != strings.Contains(v, "busy") {
			t.Errorf("%s: verdict %q", tc.name, v)
		}
	}
}

// TestCrossGoal: the Goals table's cross-check line leaves out a row
// bound by redis-benchmark's thread, as the run's failures do, and still
// fails on a row off with the tool less busy.
func TestCrossGoal(t *testing.T) {
	bound := &crossRow{Test: "SET", Pipeline: 1, Ratio: 1.49, RBBound: true}
	within := &crossRow{Test: "SET", Pipeline: 16, Ratio: 1.13, OK: true}
	off := &crossRow{Test: "GET", Pipeline: 16, Ratio: 1.16}
	for _, tc := range []struct {
		rows     []*crossRow
		status   string
		measured string
	}{
		{rows: []*crossRow{bound, within}, status: "met",
			measured: "SET -P 1: 1.49 (redis-benchmark's thread busy: not asserted), SET -P 16: 1.13"},
		{rows: []*crossRow{bound, within, off}, status: "NOT MET",
			measured: "SET -P 1: 1.49 (redis-benchmark's thread busy: not asserted), SET -P 16: 1.13, GET -P 16: 1.16"},
		{rows: nil, status: "not measured"},
	} {
		c := crossGoal(&report{Cross: tc.rows})
		if c.Status != tc.status || c.Measured != tc.measured {
			t.Errorf("got %q %q; want %q %q", c.Status, c.Measured, tc.status, tc.measured)
		}
	}
}

// TestBaseline: the baseline row follows shardproxy's where a load has
// it, and the saturation loads judge shardproxy against it by each
// generator.
func TestBaseline(t *testing.T) {
	if got := withBaseline(defaultsTargets, "old/shardproxy"); !slices.Equal(got,
		[]string{direct, shardproxy, shardproxyBaseline, shardproxyDefaults, nutcracker}) {
		t.Errorf("withBaseline: %q", got)
	}
	if got := withBaseline(defaultsTargets, ""); !slices.Equal(got, defaultsTargets) {
		t.Errorf("without a baseline: %q", got)
	}
	if got := withBaseline(nearTargets[:1], "old"); !slices.Equal(got, []string{direct}) {
		t.Errorf("a load without shardproxy: %q", got)
	}
	rowOf := func(target string, sbOps, mtOps float64) *row {
		return twoGenerators(target, sample{OpsPerSec: sbOps}, sample{OpsPerSec: mtOps})
	}
	// shardbench reads 96,000 against 100,000 (0.96×: no regression),
	// memtier 90,000 against 100,000 (0.90×: a regression).
	rep := &report{Tables: []*table{{Load: load{Name: "redis-p16"},
		Rows: []*row{rowOf(shardproxy, 96000, 90000), rowOf(shardproxyBaseline, 100000, 100000)}}}}
	got := map[string]criterion{}
	for _, c := range baselineGoals(rep) {
		got[c.What] = c
	}
	if len(got) != 2 {
		t.Fatalf("criteria %+v, want the one load's two", got)
	}
	if c := got["redis-p16: req/s, shardproxy ÷ shardproxy-baseline (shardbench)"]; c.Status != "met" {
		t.Errorf("shardbench: %+v", c)
	}
	if c := got["redis-p16: req/s, shardproxy ÷ shardproxy-baseline (memtier)"]; c.Status != "NOT MET" || c.Measured != "0.90×" {
		t.Errorf("memtier: %+v", c)
	}
	if len(baselineGoals(&report{Tables: []*table{{Load: load{Name: "redis-p16"}, Rows: []*row{rowOf(shardproxy, 1, 1)}}}})) != 0 {
		t.Error("criteria without a baseline row")
	}
}
