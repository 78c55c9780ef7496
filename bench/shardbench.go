package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"shardproxy/internal/proc"
)

// sbResult is the part of shardbench's -json output the harness uses.
type sbResult struct {
	Requests     int64    `json:"requests"`
	Answered     int64    `json:"answered"` // every reply, warm-up and prefill included
	KeysRead     int64    `json:"keys_read"`
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"error_samples"`
	OpsPerSec    float64  `json:"ops_per_sec"`
	KeysPerSec   float64  `json:"keys_per_sec"`
	LatencyUS    struct {
		P50, P90, P99, P999, Max, Mean float64
	} `json:"latency_us"`
	ClientCPUPerOp float64 `json:"client_cpu_us_per_op"`
	PacingLateUS   *struct {
		P99 float64
	} `json:"pacing_late_us"`
	Servers []struct {
		PID      int     `json:"pid"`
		CPUPerOp float64 `json:"cpu_us_per_op"`
		Error    string  `json:"error"`
	} `json:"servers"`
}

// sample is one shardbench run against one target.
type sample struct {
	OpsPerSec  float64 `json:"ops_per_sec"`
	KeysPerSec float64 `json:"keys_per_sec"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
	P999       float64 `json:"p999_us"`
	// ProxyCPU is the proxy's CPU per request (NaN for direct), BackendCPU
	// the backends' together, ClientCPU shardbench's own; all µs.
	ProxyCPU   float64 `json:"proxy_cpu_us"`
	BackendCPU float64 `json:"backend_cpu_us"`
	ClientCPU  float64 `json:"client_cpu_us"`
	// OtherCores is how many cores, on average, processes outside the
	// benchmark kept busy during the run: noise on a shared machine.
	OtherCores float64 `json:"other_cores"`
	// PacingLate is, in a paced run, the p99 of how late shardbench
	// started a batch after sleeping to its start: the generator's own
	// part of the latency, which counts from the schedule (µs; 0 unpaced).
	PacingLate float64  `json:"pacing_late_p99_us,omitempty"`
	Requests   int64    `json:"requests"`
	Answered   int64    `json:"answered"`
	Errors     int64    `json:"errors"`
	ErrorNotes []string `json:"error_samples,omitempty"`
}

// MarshalJSON writes figures that were not measured (NaN) as null;
// encoding/json refuses NaN.
func (s sample) MarshalJSON() ([]byte, error) {
	type plain sample
	n := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		OpsPerSec  *float64 `json:"ops_per_sec"`
		KeysPerSec *float64 `json:"keys_per_sec"`
		P50        *float64 `json:"p50_us"`
		P99        *float64 `json:"p99_us"`
		P999       *float64 `json:"p999_us"`
		ProxyCPU   *float64 `json:"proxy_cpu_us"`
		BackendCPU *float64 `json:"backend_cpu_us"`
		ClientCPU  *float64 `json:"client_cpu_us"`
		OtherCores *float64 `json:"other_cores"`
	}{plain(s), n(s.OpsPerSec), n(s.KeysPerSec), n(s.P50), n(s.P99), n(s.P999),
		n(s.ProxyCPU), n(s.BackendCPU), n(s.ClientCPU), n(s.OtherCores)})
}

// runShardbench runs one shardbench process against addr with args and
// returns its result. proxy is the process in front of the backends (nil
// for a direct run), whose CPU is counted apart from the backends'.
func (h *harness) runShardbench(addr string, args []string, proxy *proc.Process, backends []*proc.Process, d, warmup time.Duration) (sample, error) {
	var pids []string
	if proxy != nil {
		pids = append(pids, strconv.Itoa(proxy.Pid()))
	}
	for _, b := range backends {
		pids = append(pids, strconv.Itoa(b.Pid()))
	}
	// One load thread (-procs 1), as in the measurements and as
	// redis-benchmark runs: on a 2-core machine a second generator thread
	// mostly spins, taking CPU from the servers it measures.
	full := append([]string{"-addr", addr, "-json", "-duration", d.String(), "-warmup", warmup.String(),
		"-procs", "1", "-server-pid", strings.Join(pids, ",")}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), d+warmup+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.fleet.bins.shardbench, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	meter := h.startMeter()
	err := cmd.Run()
	var client time.Duration
	if cmd.ProcessState != nil {
		client = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	other := meter.otherCores(h, client)
	h.logf("    shardbench %s: %s", strings.Join(full, " "), firstLine(stderr.String()))
	var res sbResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		if err == nil {
			err = jerr
		}
		return sample{}, fmt.Errorf("shardbench: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && res.Errors > 0) {
		return sample{}, fmt.Errorf("shardbench: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	s := toSample(&res, proxy != nil)
	s.OtherCores = other
	return s, nil
}

// toSample condenses a result; withProxy says its first server is the proxy.
func toSample(r *sbResult, withProxy bool) sample {
	s := sample{
		OpsPerSec: r.OpsPerSec, KeysPerSec: r.KeysPerSec,
		P50: r.LatencyUS.P50, P99: r.LatencyUS.P99, P999: r.LatencyUS.P999,
		ProxyCPU: math.NaN(), BackendCPU: 0, ClientCPU: r.ClientCPUPerOp,
		Requests: r.Requests, Answered: r.Answered, Errors: r.Errors, ErrorNotes: r.ErrorSamples,
	}
	if r.PacingLateUS != nil {
		s.PacingLate = r.PacingLateUS.P99
	}
	servers := r.Servers
	if withProxy && len(servers) > 0 {
		s.ProxyCPU = cpuOf(servers[0].CPUPerOp, servers[0].Error)
		servers = servers[1:]
	}
	for _, sv := range servers {
		s.BackendCPU += cpuOf(sv.CPUPerOp, sv.Error)
	}
	return s
}

// nan marks a figure that was not measured.
var nan = math.NaN()

func cpuOf(v float64, err string) float64 {
	if err != "" {
		return math.NaN()
	}
	return v
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return "ok"
	}
	return s
}

// median returns the median of the samples, metric by metric; errors are
// summed and requests too.
func median(ss []sample) sample {
	if len(ss) == 0 {
		return sample{OpsPerSec: nan, KeysPerSec: nan, P50: nan, P99: nan, P999: nan,
			ProxyCPU: nan, BackendCPU: nan, ClientCPU: nan, OtherCores: nan}
	}
	pick := func(f func(*sample) float64) float64 {
		v := make([]float64, 0, len(ss))
		for i := range ss {
			v = append(v, f(&ss[i]))
		}
		return medianOf(v)
	}
	m := sample{
		OpsPerSec:  pick(func(s *sample) float64 { return s.OpsPerSec }),
		KeysPerSec: pick(func(s *sample) float64 { return s.KeysPerSec }),
		P50:        pick(func(s *sample) float64 { return s.P50 }),
		P99:        pick(func(s *sample) float64 { return s.P99 }),
		P999:       pick(func(s *sample) float64 { return s.P999 }),
		ProxyCPU:   pick(func(s *sample) float64 { return s.ProxyCPU }),
		BackendCPU: pick(func(s *sample) float64 { return s.BackendCPU }),
		ClientCPU:  pick(func(s *sample) float64 { return s.ClientCPU }),
		OtherCores: pick(func(s *sample) float64 { return s.OtherCores }),
		PacingLate: pick(func(s *sample) float64 { return s.PacingLate }),
	}
	for _, s := range ss {
		m.Requests += s.Requests
		m.Answered += s.Answered
		m.Errors += s.Errors
		m.ErrorNotes = append(m.ErrorNotes, s.ErrorNotes...)
	}
	return m
}

// medianOf returns the median of v (the mean of the middle two for an even
// count), ignoring NaNs; NaN when there is nothing else.
func medianOf(v []float64) float64 {
	var xs []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
