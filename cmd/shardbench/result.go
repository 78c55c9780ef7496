package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// result is what a run measured; -json prints it as is.
type result struct {
	Config *config `json:"config"`
	counters
	ErrorSamples []string `json:"error_samples,omitempty"`

	PrefillS   float64 `json:"prefill_s"`
	WarmupS    float64 `json:"warmup_s"`
	DurationS  float64 `json:"duration_s"` // the measured part
	OpsPerSec  float64 `json:"ops_per_sec"`
	KeysPerSec float64 `json:"keys_per_sec"` // keys read per second

	LatencyUS latency `json:"latency_us"`
	// PacingLateUS (with -rate) is how late the generator itself started
	// batches: included in LatencyUS, which counts from the schedule.
	PacingLateUS *latency `json:"pacing_late_us,omitempty"`

	// ClientCPUPerOp is this process's CPU time per measured request, in
	// microseconds: a check that the load generator was not the bottleneck.
	ClientCPUPerOp float64       `json:"client_cpu_us_per_op"`
	Servers        []serverUsage `json:"servers,omitempty"`
}

// latency holds percentiles of the measured requests, in microseconds.
type latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// serverUsage is one -server-pid's CPU time over the measured part.
type serverUsage struct {
	PID      int     `json:"pid"`
	CPUS     float64 `json:"cpu_s"`
	CPUPerOp float64 `json:"cpu_us_per_op"`
	Error    string  `json:"error,omitempty"`
}

// finish derives the rates, percentiles and CPU figures.
func (r *result) finish(g *loadgen, elapsed time.Duration, begin, end usage) {
	r.ErrorSamples = g.errs.list()
	r.WarmupS = g.cfg.Warmup.Seconds()
	r.DurationS = elapsed.Seconds()
	if r.DurationS > 0 {
		r.OpsPerSec = float64(r.Requests) / r.DurationS
		r.KeysPerSec = float64(r.KeysRead) / r.DurationS
	}
	r.LatencyUS = percentiles(g.rec.merged())
	if g.lateRec != nil {
		l := percentiles(g.lateRec.merged())
		r.PacingLateUS = &l
	}
	perOp := func(d time.Duration) float64 {
		if r.Requests == 0 {
			return 0
		}
		return float64(d) / 1e3 / float64(r.Requests)
	}
	r.ClientCPUPerOp = perOp(end.self - begin.self)
	for i, pid := range g.cfg.ServerPIDs {
		s := serverUsage{PID: pid}
		switch {
		case end.errs[i] != nil:
			s.Error = end.errs[i].Error()
		case begin.errs[i] != nil:
			s.Error = begin.errs[i].Error()
		default:
			d := end.servers[i] - begin.servers[i]
			s.CPUS, s.CPUPerOp = d.Seconds(), perOp(d)
		}
		r.Servers = append(r.Servers, s)
	}
}

// percentiles summarises h (ns) in microseconds.
func percentiles(h *hdrhistogram.Histogram) latency {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return latency{
		P50: us(h.ValueAtQuantile(50)), P90: us(h.ValueAtQuantile(90)),
		P99: us(h.ValueAtQuantile(99)), P999: us(h.ValueAtQuantile(99.9)),
		Max: us(h.Max()), Mean: h.Mean() / 1e3,
	}
}

// writeJSON prints r as one JSON object.
func (r *result) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText prints r for people.
func (r *result) writeText(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	dist := c.Dist
	if c.Dist == "zipf" {
		dist = fmt.Sprintf("zipf %.2f", c.ZipfTheta)
	}
	fmt.Fprintf(&b, "shardbench %s %s: %d conns, pipeline %d, %d keys (%s), %d B values, set:get %s",
		c.Proto, c.Addr, c.Conns, c.Pipeline, c.Keys, dist, c.Value, c.Ratio)
	if c.MGet > 1 {
		fmt.Fprintf(&b, ", %d-key multi-gets", c.MGet)
	}
	if c.Rate > 0 {
		fmt.Fprintf(&b, ", paced at %.0f req/s", c.Rate)
	}
	fmt.Fprintf(&b, "\n  measured   %.2fs after a %.2fs warmup (prefill %.2fs)\n", r.DurationS, r.WarmupS, r.PrefillS)
	fmt.Fprintf(&b, "  requests   %d (%d sets, %d gets): %.0f req/s", r.Requests, r.Sets, r.Gets, r.OpsPerSec)
	if c.MGet > 1 {
		fmt.Fprintf(&b, ", %.0f keys/s", r.KeysPerSec)
	}
	fmt.Fprintf(&b, "\n  gets       %d keys: %d hits, %d misses\n", r.KeysRead, r.Hits, r.Misses)
	l := r.LatencyUS
	fmt.Fprintf(&b, "  latency    p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s)\n",
		fmtUS(l.P50), fmtUS(l.P90), fmtUS(l.P99), fmtUS(l.P999), fmtUS(l.Max), fmtUS(l.Mean))
	if l := r.PacingLateUS; l != nil {
		fmt.Fprintf(&b, "  pacing     started late p50 %s  p99 %s  max %s (the generator's own, counted in latency)\n",
			fmtUS(l.P50), fmtUS(l.P99), fmtUS(l.Max))
	}
	fmt.Fprintf(&b, "  client CPU %.2f us/req\n", r.ClientCPUPerOp)
	for _, s := range r.Servers {
		if s.Error != "" {
			fmt.Fprintf(&b, "  server CPU pid %d: %s\n", s.PID, s.Error)
		} else {
			fmt.Fprintf(&b, "  server CPU pid %d: %.2f us/req (%.2fs)\n", s.PID, s.CPUPerOp, s.CPUS)
		}
	}
	fmt.Fprintf(&b, "  errors     %d wrong replies", r.Errors)
	if r.Reconnects > 0 {
		fmt.Fprintf(&b, ", %d reconnects", r.Reconnects)
	}
	b.WriteByte('\n')
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(&b, "    %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtUS formats microseconds with a sensible unit.
func fmtUS(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e4:
		return fmt.Sprintf("%.1fms", us/1e3)
	case us >= 1e3:
		return fmt.Sprintf("%.2fms", us/1e3)
	}
	return fmt.Sprintf("%.0fus", us)
}
