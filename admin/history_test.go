package admin

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"shardproxy/proxy"
)

// nopSource is never read: the tests add samples themselves.
type nopSource struct{}

func (nopSource) Stats() proxy.Stats { panic("not read") }
func (nopSource) Info() proxy.Info   { return proxy.Info{} }

func TestQuantile(t *testing.T) {
	b := proxy.LatencyBuckets
	n := len(b) + 1
	counts := func(kv ...int64) []int64 {
		c := make([]int64, n)
		for i := 0; i < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		return c
	}
	tests := []struct {
		name   string
		counts []int64
		q      float64
		want   float64 // NaN: none
	}{
		{"empty", counts(), 0.5, math.NaN()},
		{"first bucket, linear from 0", counts(0, 10), 0.5, b[0].Seconds() / 2},
		{"all in one bucket", counts(3, 4), 0.99, b[2].Seconds() + (b[3]-b[2]).Seconds()*0.99},
		{"median in the second of two", counts(0, 1, 1, 3), 0.5, b[0].Seconds() + (b[1]-b[0]).Seconds()/3},
		{"p99 in the slowest bucket", counts(0, 98, int64(n-1), 2), 0.99, b[len(b)-1].Seconds()},
		{"a count went backwards", counts(0, 5, 1, -1), 0.5, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quantile(tt.counts, tt.q)
			switch {
			case math.IsNaN(tt.want) && got != nil:
				t.Errorf("quantile = %v, want none", *got)
			case !math.IsNaN(tt.want) && (got == nil || math.Abs(*got-tt.want) > 1e-12):
				t.Errorf("quantile = %v, want %v", got, tt.want)
			}
		})
	}
}

// stats is one sample: pool p with servers a and b, at t.
func stats(t time.Time, req, errs int64, fast, slow int64) proxy.Stats {
	s := func(name string) proxy.ServerStats {
		ss := proxy.ServerStats{Name: name, Addr: name, Requests: req, ServerTimedout: errs}
		ss.Latency.Counts[0], ss.Latency.Counts[5] = fast, slow
		return ss
	}
	return proxy.Stats{Now: t, Pools: []proxy.PoolStats{{Name: "p", Requests: 2 * req, ForwardError: errs,
		Servers: []proxy.ServerStats{s("a"), s("b")}}}}
}

// TestHistoryRates: the page's rates and quantiles are over the span of
// the samples kept, and its graphs have one point per sample.
func TestHistoryRates(t *testing.T) {
	h := newHistory(nopSource{})
	t0 := time.Unix(1700000000, 0)
	h.add(stats(t0, 0, 0, 0, 0))
	v := h.view(proxy.Info{})
	if rps := v.Pools[0].Rates.RPS; !math.IsNaN(float64(rps)) {
		t.Errorf("one sample: rps %v, want none", rps)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("one sample's view does not encode: %v", err)
	}
	h.add(stats(t0.Add(100*time.Millisecond), 1, 0, 0, 0)) // too soon after: dropped
	for i := 1; i <= 20; i++ {
		h.add(stats(t0.Add(time.Duration(i)*time.Second), int64(100*i), int64(i/10), int64(98*i), int64(2*i)))
	}
	v = h.view(proxy.Info{})
	if v.Window != 10 {
		t.Errorf("window %v s, want 10", v.Window)
	}
	p := v.Pools[0]
	if p.Rates.RPS != 200 || p.Servers[0].Rates.RPS != 100 {
		t.Errorf("rps: pool %v, server %v; want 200, 100", p.Rates.RPS, p.Servers[0].Rates.RPS)
	}
	if e := p.Servers[1].Errors[1]; e.Kind != "timeout" || e.Total != 2 || e.PerSec != 0.1 {
		t.Errorf("server b timeouts %+v, want 2 in all, 1 in 10 s", e)
	}
	if p.Errors[1].Kind != "forward" || p.Errors[1].PerSec != 0.1 {
		t.Errorf("pool forward errors %+v", p.Errors[1])
	}
	b := proxy.LatencyBuckets
	if p50 := p.Servers[0].Rates.P50; p50 == nil || *p50 > b[0].Seconds() {
		t.Errorf("p50 %v, want within the first bucket", p50)
	}
	if p99 := p.Servers[0].Rates.P99; p99 == nil || *p99 <= b[4].Seconds() || *p99 > b[5].Seconds() {
		t.Errorf("p99 %v, want within the sixth bucket", p99)
	}
	if len(p.Graph) != 21 || !math.IsNaN(float64(p.Graph[0].RPS)) || p.Graph[20].RPS != 200 {
		t.Errorf("graph: %d points, first %v, last %v", len(p.Graph), p.Graph[0].RPS, p.Graph[len(p.Graph)-1].RPS)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("view does not encode: %v", err)
	}
	// A reload that resets the counters: no negative rates.
	h.add(stats(t0.Add(21*time.Second), 0, 0, 0, 0))
	if g := h.view(proxy.Info{}).Pools[0].Graph; !math.IsNaN(float64(g[len(g)-1].RPS)) {
		t.Errorf("after a reset the point is %v, want a gap", g[len(g)-1].RPS)
	}
}

// TestHistoryBounded: the history keeps graphLen points per series and
// forgets a server graphLen samples after it last appeared, so reloads
// that change the servers do not grow it.
func TestHistoryBounded(t *testing.T) {
	h := newHistory(nopSource{})
	t0 := time.Unix(1700000000, 0)
	for i := range 3 * graphLen {
		st := proxy.Stats{Now: t0.Add(time.Duration(i) * time.Second)}
		var servers []proxy.ServerStats
		for j := range 10 { // ten servers, renamed every sample
			servers = append(servers, proxy.ServerStats{Name: fmt.Sprintf("s%d-%d", i, j)})
		}
		st.Pools = []proxy.PoolStats{{Name: "p", Servers: servers}}
		h.add(st)
		if len(h.series) > 1+10*graphLen {
			t.Fatalf("sample %d: %d series", i, len(h.series))
		}
	}
	// The pool, and the servers of the samples still on the graph.
	if n := len(h.series); n != 1+10*graphLen {
		t.Errorf("%d series, want %d", n, 1+10*graphLen)
	}
	g := h.view(proxy.Info{}).Pools[0].Graph
	if len(g) != graphLen {
		t.Errorf("graph of %d points, want %d", len(g), graphLen)
	}
	path, _ := graphPath(g, func(p graphPoint) optFloat { return p.RPS })
	if !strings.HasPrefix(path, "M0 ") || strings.Count(path, "M") != 1 {
		t.Errorf("path %.40q...: want one line from x=0", path)
	}
}

// TestHistoryGap: a series missing from some samples shows gaps there.
func TestHistoryGap(t *testing.T) {
	h := newHistory(nopSource{})
	t0 := time.Unix(1700000000, 0)
	for i := range 6 {
		st := stats(t0.Add(time.Duration(i)*time.Second), int64(10*i), 0, 0, 0)
		if i == 2 || i == 3 {
			st.Pools[0].Servers = st.Pools[0].Servers[:1] // b gone for two samples
		}
		h.add(st)
	}
	h.mu.Lock()
	g := h.graph(seriesKey{"p", "b"})
	h.mu.Unlock()
	var got []string
	for _, p := range g {
		got = append(got, fmt.Sprint(float64(p.RPS)))
	}
	if want := "NaN 10 NaN NaN NaN 10"; strings.Join(got, " ") != want {
		t.Errorf("b's graph %v, want %s", got, want)
	}
	path, _ := graphPath(g, func(p graphPoint) optFloat { return p.RPS })
	if strings.Count(path, "M") != 2 {
		t.Errorf("path %q: want two lines", path)
	}
}

// BenchmarkStatusPage: one sample and one render of the page for 10 pools
// of 20 servers with full graphs, as the admin does each second for each
// open page.
func BenchmarkStatusPage(b *testing.B) {
	h := newHistory(nopSource{})
	t0 := time.Unix(1700000000, 0)
	sample := func(i int) proxy.Stats {
		st := proxy.Stats{Now: t0.Add(time.Duration(i) * time.Second)}
		for p := range 10 {
			ps := proxy.PoolStats{Name: fmt.Sprintf("pool%d", p), Requests: int64(i * 100)}
			for s := range 20 {
				// Requests that vary from second to second, as real ones do.
				n := int64(i*50 + (i*7919+s*104729)%97)
				ss := proxy.ServerStats{Name: fmt.Sprintf("s%d", s), Requests: n}
				ss.Latency.Counts[2] = n
				ps.Servers = append(ps.Servers, ss)
			}
			st.Pools = append(st.Pools, ps)
		}
		return st
	}
	for i := range graphLen {
		h.add(sample(i))
	}
	var buf strings.Builder
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h.add(sample(graphLen + i))
		buf.Reset()
		if err := pageTemplate.ExecuteTemplate(&buf, "page", h.view(proxy.Info{})); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
	io.WriteString(zw, buf.String())
	zw.Close()
	b.ReportMetric(float64(buf.Len()), "page-bytes")
	b.ReportMetric(float64(zb.Len()), "gzip-bytes")
}
