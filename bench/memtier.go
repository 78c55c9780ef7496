package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"shardproxy/internal/proc"
)

// memtier_benchmark (Redis Ltd., github.com/RedisLabs/memtier_benchmark)
// is the second load generator: the goal loads run under it and under
// shardbench in the same rounds, and the report flags any figure on which
// the two disagree by more than disagreeTolerance. A figure only one
// generator shows is not judged.

// disagreeTolerance is how far memtier's figure may be from shardbench's
// before the report flags it.
const disagreeTolerance = 0.15

// memtierPrefix is the key prefix of memtier's runs; their keys live
// beside shardbench's, which have a fresh prefix every run.
const memtierPrefix = "mt:"

// mtStats is one line of memtier's ALL STATS ("Totals", "Gets", "Sets")
// in its --json-out-file (format version 2, memtier 2.3.0). Latencies are
// in milliseconds.
type mtStats struct {
	Count            int64   `json:"Count"`
	OpsPerSec        float64 `json:"Ops/sec"`
	HitsPerSec       float64 `json:"Hits/sec"`
	MissesPerSec     float64 `json:"Misses/sec"`
	ConnectionErrors int64   `json:"Connection Errors"`
	Percentiles      struct {
		P50  *float64 `json:"p50.00"`
		P99  *float64 `json:"p99.00"`
		P999 *float64 `json:"p99.90"`
	} `json:"Percentile Latencies"`
}

// mtResult is what the harness takes from one memtier run.
type mtResult struct {
	Totals, Gets mtStats
	// DurationMS is memtier's own measure of the run.
	DurationMS float64
}

// nonFinite matches the nan and inf memtier's printf-based JSON writer
// can print for a figure it could not compute; encoding/json refuses them.
var nonFinite = regexp.MustCompile(`(:\s*)-?(nan|inf)\b`)

// parseMemtierJSON parses memtier's --json-out-file. It fails when the run
// answered nothing or lost connections: memtier exits 0 even when it could
// not connect at all. Its rate is judged apart (mtResult.rate): a prefill
// needs none.
func parseMemtierJSON(b []byte) (mtResult, error) {
	b = nonFinite.ReplaceAll(b, []byte("${1}null"))
	var doc struct {
		All *struct {
			Runtime struct {
				Duration float64 `json:"Total duration"`
			} `json:"Runtime"`
			Totals *mtStats `json:"Totals"`
			Gets   *mtStats `json:"Gets"`
		} `json:"ALL STATS"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return mtResult{}, fmt.Errorf("memtier JSON: %w", err)
	}
	if doc.All == nil || doc.All.Totals == nil {
		return mtResult{}, errors.New("memtier JSON: no ALL STATS Totals")
	}
	r := mtResult{Totals: *doc.All.Totals, DurationMS: doc.All.Runtime.Duration}
	if doc.All.Gets != nil {
		r.Gets = *doc.All.Gets
	}
	t := r.Totals
	switch {
	case t.ConnectionErrors > 0:
		return r, fmt.Errorf("memtier: %d connection errors", t.ConnectionErrors)
	case t.Count <= 0:
		return r, errors.New("memtier: no request answered")
	case t.Percentiles.P50 == nil || t.Percentiles.P99 == nil || t.Percentiles.P999 == nil:
		return r, errors.New("memtier JSON: no p50/p99/p99.9 latency")
	}
	return r, nil
}

// rate is the run's requests per second, and an error when memtier gave
// none. A run shorter than its connects can come out with a finish time
// before its start time, a negative duration and 0 requests per second
// however many it answered: a prefill of 10,000 keys over 1,000
// connections, about one in six times on a 2-core machine.
func (r mtResult) rate() (float64, error) {
	if !(r.Totals.OpsPerSec > 0) || !(r.DurationMS > 0) {
		return 0, fmt.Errorf("memtier: no request rate (%d answered, %.0f ms by its clock)", r.Totals.Count, r.DurationMS)
	}
	return r.Totals.OpsPerSec, nil
}

// missRatio is the share of memtier's gets that missed; after its prefill
// every key is set, so a miss is a lost or wrong reply.
func (r mtResult) missRatio() float64 {
	total := r.Gets.HitsPerSec + r.Gets.MissesPerSec
	if total <= 0 {
		return 0
	}
	return r.Gets.MissesPerSec / total
}

// maxMissRatio is the share of missed gets above which a memtier run
// counts as wrong.
const maxMissRatio = 0.001

// mtLoad is the part of a load's shardbench flags memtier can run.
type mtLoad struct {
	protocol string // memtier's -P
	conns    int
	pipeline int
	value    int
	ratio    string
	keys     int
	rate     float64 // requests per second over all connections; 0 unpaced
}

// memtierLoad translates shardbench flags into memtier's load. Flags
// memtier has no equivalent for (multi-gets, zipf keys, meta) are refused:
// such a load runs under shardbench only.
func memtierLoad(args []string) (mtLoad, error) {
	l := mtLoad{conns: 50, pipeline: 1, value: 100, ratio: "1:9", keys: 10000}
	for i := 0; i < len(args); i++ {
		name := args[i]
		if i+1 >= len(args) {
			return l, fmt.Errorf("shardbench flag %s without a value", name)
		}
		v := args[i+1]
		i++
		var err error
		switch name {
		case "-proto":
			switch v {
			case "text":
				l.protocol = "memcache_text"
			case "resp":
				l.protocol = "redis"
			default:
				err = fmt.Errorf("memtier has no -proto %s", v)
			}
		case "-conns":
			l.conns, err = positive(v)
		case "-pipeline":
			l.pipeline, err = positive(v)
		case "-value":
			l.value, err = positive(v)
		case "-keys":
			l.keys, err = positive(v)
		case "-ratio":
			l.ratio = v
		case "-rate":
			l.rate, err = strconv.ParseFloat(v, 64)
		case "-mget":
			if v != "1" {
				err = errors.New("memtier runs no multi-get load")
			}
		case "-dist":
			if v != "uniform" {
				err = fmt.Errorf("memtier runs no -dist %s load", v)
			}
		default:
			err = fmt.Errorf("memtier has no equivalent of shardbench's %s", name)
		}
		if err != nil {
			return l, fmt.Errorf("%s %s: %w", name, v, err)
		}
	}
	if l.protocol == "" {
		return l, errors.New("no -proto")
	}
	return l, nil
}

func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err == nil && n < 1 {
		err = errors.New("not positive")
	}
	return n, err
}

// memtierTicks is how many times a second memtier refills a rate-limited
// connection's budget at most (memtier_benchmark.cpp: request_per_interval
// = ceil(rate / 50)).
const memtierTicks = 50

// memtierRate returns the rate memtier really paces one connection to
// with --rate-limiting perConn: it sends ceil(perConn/50) requests every
// 1e6 / (perConn / that) µs, both rounded down to integers.
func memtierRate(perConn int) float64 {
	if perConn <= 0 {
		return 0
	}
	perTick := (perConn + memtierTicks - 1) / memtierTicks
	ticks := perConn / perTick
	intervalUS := 1_000_000 / ticks
	return float64(perTick) * 1e6 / float64(intervalUS)
}

// fixedRate splits a total request rate over conns connections as memtier
// takes it (an integer --rate-limiting per connection, at least 1) and
// returns that and the total both generators then run at: shardbench's
// -rate is set to what memtier really sends, so that both pace the same load.
func fixedRate(total float64, conns int) (perConn int, effective float64) {
	if conns < 1 || !(total > 0) {
		return 0, 0
	}
	perConn = max(1, int(math.Round(total/float64(conns))))
	return perConn, memtierRate(perConn) * float64(conns)
}

// memtierArgs returns memtier's command line against addr for l: one
// thread (as shardbench runs with -procs 1), keys mt:1..mt:keys.
func memtierArgs(addr string, l mtLoad) ([]string, error) {
	host, port, err := splitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return []string{"-s", host, "-p", port, "-P", l.protocol, "-t", "1", "-c", strconv.Itoa(l.conns),
		"-d", strconv.Itoa(l.value), "--key-prefix", memtierPrefix, "--key-minimum", "1",
		"--key-maximum", strconv.Itoa(l.keys), "--hide-histogram"}, nil
}

func splitHostPort(addr string) (string, string, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", "", fmt.Errorf("address %q has no port", addr)
	}
	return addr[:i], addr[i+1:], nil
}

// memtierPrefill sets every key of l once through addr (--key-pattern
// P:P -n allkeys: each connection its own part of the range), so that the
// measured run's gets hit as shardbench's do after its prefill.
func (h *harness) memtierPrefill(addr string, l mtLoad) error {
	base, err := memtierArgs(addr, l)
	if err != nil {
		return err
	}
	args := append(base, "--ratio", "1:0", "--key-pattern", "P:P", "-n", "allkeys",
		"--pipeline", strconv.Itoa(max(l.pipeline, 16)))
	res, _, err := h.execMemtier(args, 2*time.Minute)
	if err == nil && res.Totals.Count < int64(l.keys) {
		err = fmt.Errorf("memtier prefill: %d of %d keys set", res.Totals.Count, l.keys)
	}
	return err
}

// execMemtier runs memtier with args and a --json-out-file and returns
// its parsed result and its own CPU time.
func (h *harness) execMemtier(args []string, timeout time.Duration) (mtResult, time.Duration, error) {
	out, err := os.CreateTemp(h.fleet.work, "memtier-*.json")
	if err != nil {
		return mtResult{}, 0, err
	}
	out.Close()
	defer os.Remove(out.Name())
	args = append(args, "--json-out-file", out.Name())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.fleet.bins.memtier, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	h.logf("    memtier_benchmark %s", strings.Join(args, " "))
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return mtResult{}, cpu, fmt.Errorf("memtier_benchmark: %w: %s", err, lastLine(stderr.String()))
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		return mtResult{}, cpu, err
	}
	res, err := parseMemtierJSON(b)
	if err != nil {
		err = fmt.Errorf("%w: %s", err, lastLine(stderr.String()))
	}
	return res, cpu, err
}

// lastLine is memtier's complaint in its progress output: the last line
// that names an error, else the last line.
func lastLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\r' || r == '\n' })
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.ToLower(lines[i]); strings.Contains(l, "error") || strings.Contains(l, "refused") ||
			strings.Contains(l, "fail") {
			return short(strings.TrimSpace(lines[i]), 200)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return short(strings.TrimSpace(lines[len(lines)-1]), 200)
}

// memtierSeconds is memtier's --test-time for a run of d: whole seconds,
// at least one.
func memtierSeconds(d time.Duration) int {
	return max(1, int(math.Round(d.Seconds())))
}

// runMemtier runs memtier once against addr with l for about d and
// returns its sample. The proxy's and the backends' CPU per request come
// from /proc over the whole run (memtier has no warm-up to leave out; its
// prefill ran before). proxy is nil for a direct run.
func (h *harness) runMemtier(addr string, l mtLoad, proxy *proc.Process, backends []*proc.Process, d time.Duration) (sample, error) {
	args, err := memtierArgs(addr, l)
	if err != nil {
		return sample{}, err
	}
	args = append(args, "--ratio", l.ratio, "--key-pattern", "R:R", "--distinct-client-seed",
		"--pipeline", strconv.Itoa(l.pipeline), "--test-time", strconv.Itoa(memtierSeconds(d)))
	if l.rate > 0 {
		perConn, _ := fixedRate(l.rate, l.conns)
		args = append(args, "--rate-limiting", strconv.Itoa(perConn))
	}
	procs := append([]*proc.Process{proxy}, backends...)
	before := make([]time.Duration, len(procs))
	for i, p := range procs {
		if p != nil {
			before[i], _ = procCPU(p.Pid())
		}
	}
	meter := h.startMeter()
	res, client, err := h.execMemtier(args, d+2*time.Minute)
	other := meter.otherCores(h, client)
	if err != nil {
		return sample{}, err
	}
	n := float64(res.Totals.Count)
	perReq := func(p *proc.Process, was time.Duration) float64 {
		now, err := procCPU(p.Pid())
		if err != nil {
			return nan
		}
		return float64((now - was).Microseconds()) / n
	}
	ops, err := res.rate()
	if err != nil {
		return sample{}, err
	}
	t := res.Totals
	s := sample{
		OpsPerSec: ops, KeysPerSec: ops,
		P50: *t.Percentiles.P50 * 1000, P99: *t.Percentiles.P99 * 1000, P999: *t.Percentiles.P999 * 1000,
		ProxyCPU: nan, ClientCPU: float64(client.Microseconds()) / n, OtherCores: other,
		Requests: t.Count, Answered: t.Count,
	}
	if proxy != nil {
		s.ProxyCPU = perReq(proxy, before[0])
	}
	for i, b := range backends {
		s.BackendCPU += perReq(b, before[i+1])
	}
	if m := res.missRatio(); m > maxMissRatio {
		s.Errors = int64(math.Round(m * float64(res.Gets.Count)))
		s.ErrorNotes = []string{fmt.Sprintf("memtier: %.2f%% of gets missed after its prefill", 100*m)}
	}
	return s, nil
}

// disagreement lists the figures on which memtier's median is more than
// disagreeTolerance away from shardbench's, each with memtier's deviation
// ("p99 +22%"). Figures either lacks are not compared.
func disagreement(sb, mt sample) []string {
	var out []string
	for _, f := range comparedFigures {
		a, b := f.get(&sb), f.get(&mt)
		if math.IsNaN(a) || math.IsNaN(b) || a <= 0 || b <= 0 {
			continue
		}
		if d := b/a - 1; math.Abs(d) > disagreeTolerance {
			out = append(out, fmt.Sprintf("%s %+.0f%%", f.name, 100*d))
		}
	}
	return out
}

// comparedFigures are the figures both generators measure, in table order.
var comparedFigures = []struct {
	name string
	get  func(*sample) float64
}{
	{"req/s", func(s *sample) float64 { return s.OpsPerSec }},
	{"p50", func(s *sample) float64 { return s.P50 }},
	{"p99", func(s *sample) float64 { return s.P99 }},
	{"p99.9", func(s *sample) float64 { return s.P999 }},
	{"proxy CPU", func(s *sample) float64 { return s.ProxyCPU }},
	{"backend CPU", func(s *sample) float64 { return s.BackendCPU }},
}
