package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"shardproxy/internal/proc"
)

// crossTolerance is how far shardbench's throughput may be from
// redis-benchmark's under equivalent settings.
const crossTolerance = 0.15

// crossRow compares shardbench with redis-benchmark on one test.
type crossRow struct {
	Test           string    `json:"test"` // SET or GET
	Pipeline       int       `json:"pipeline"`
	Shardbench     []float64 `json:"shardbench_ops"` // per round
	RedisBenchmark []float64 `json:"redis_benchmark_ops"`
	SB             float64   `json:"shardbench_median"`
	RB             float64   `json:"redis_benchmark_median"`
	Ratio          float64   `json:"ratio"` // SB / RB
	// Each tool's own CPU per request (utime+stime), per round and
	// median: on a machine the server shares, the cheaper tool leaves
	// the server more.
	SBCPU    []float64 `json:"shardbench_cpu_us"`
	RBCPU    []float64 `json:"redis_benchmark_cpu_us"`
	SBCPUMed float64   `json:"shardbench_cpu_us_median"`
	RBCPUMed float64   `json:"redis_benchmark_cpu_us_median"`
	// redis-server's CPU per request under each tool: equal when both
	// send the same traffic, whatever each tool itself costs.
	SBServer    []float64 `json:"server_cpu_us_shardbench"`
	RBServer    []float64 `json:"server_cpu_us_redis_benchmark"`
	SBServerMed float64   `json:"server_cpu_us_shardbench_median"`
	RBServerMed float64   `json:"server_cpu_us_redis_benchmark_median"`
	// What redis-server itself counted (INFO's total_commands_processed)
	// over each tool's run, divided by what the tool says it sent and got
	// answered: 1 when the tool counts right.
	SBCounted []float64 `json:"server_counted_shardbench"`
	RBCounted []float64 `json:"server_counted_redis_benchmark"`
	OK        bool      `json:"ok"`
	// RBBound is set when the rates disagree and redis-benchmark's one
	// thread was busy (RBCores of at least busyThread): its rate is then
	// its own limit, not the server's, and the row does not fail the run.
	RBBound bool    `json:"redis_benchmark_bound,omitempty"`
	RBCores float64 `json:"redis_benchmark_cores"` // its CPU over its run, in cores
	Err     string  `json:"error,omitempty"`
}

// busyThread is the share of a core above which a one-thread tool counts
// as the bottleneck of its own run. redis-benchmark runs one thread by
// default; unpipelined on 2 cores it spends about 11 µs of CPU a request
// where shardbench spends 7.4, and so reaches about two thirds of
// shardbench's rate with its thread busy (0.98 cores).
const busyThread = 0.9

// countTolerance is how far a tool's count of its requests may be from
// the server's count of the commands it ran: a margin for set-up commands
// a tool may send besides its requests.
const countTolerance = 0.01

// commandsProcessed returns redis-server's count of the commands it has
// run, INFO's total_commands_processed; the INFO itself is counted by the
// next call.
func commandsProcessed(addr string) (int64, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "INFO stats\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(head), "$"))
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("INFO: unexpected reply %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO stats has no total_commands_processed")
}

// counted runs f, which reports how many requests its tool sent, and
// returns what redis-server at addr counted over it divided by that.
func counted(addr string, f func() (int64, error)) (float64, error) {
	before, err := commandsProcessed(addr)
	if err != nil {
		return 0, err
	}
	sent, err := f()
	if err != nil {
		return 0, err
	}
	after, err := commandsProcessed(addr)
	if err != nil {
		return 0, err
	}
	return float64(after-before-1) / float64(max(sent, 1)), nil
}

// runCrosscheck runs shardbench and redis-benchmark against the same direct
// redis-server with equivalent settings (50 connections, 100-byte values,
// 10,000 keys, SET then GET, pipeline 1 and 16): one unrecorded warm-up
// pair, then rounds alternating which goes first; it compares their median
// throughputs.
func (h *harness) runCrosscheck() []*crossRow {
	srv := h.fleet.rd[0]
	var out []*crossRow
	for _, pipeline := range []int{1, 16} {
		for _, test := range []string{"SET", "GET"} {
			cr := &crossRow{Test: test, Pipeline: pipeline}
			if err := h.crosscheckOne(srv, cr); err != nil {
				cr.Err = err.Error()
				h.fail("cross-check %s -P %d: %v", test, pipeline, err)
			}
			out = append(out, cr)
		}
	}
	return out
}

// crosscheckOne measures one row: an unrecorded warm-up pair, then the
// rounds, then the verdict.
func (h *harness) crosscheckOne(srv *proc.Process, cr *crossRow) error {
	ratio := "1:0"
	if cr.Test == "GET" {
		ratio = "0:1"
	}
	run := &crossRun{h: h, srv: srv, cr: cr,
		args: []string{"-proto", "resp", "-conns", "50", "-pipeline", strconv.Itoa(cr.Pipeline),
			"-value", "100", "-keys", "10000", "-ratio", ratio}}
	// A warm-up pair, not recorded: the server's key space and memory are
	// in place before either tool is measured, so the first one measured
	// is not penalised.
	warm := *cr
	if err := run.shardbench(); err != nil {
		return err
	}
	if err := run.redisBenchmark(); err != nil {
		return err
	}
	*cr = warm
	if err := run.rounds(h.opt.rounds); err != nil {
		return err
	}
	h.judgeCross(cr)
	return nil
}

// crossRun is one cross-check row being measured: shardbench and
// redis-benchmark take turns against srv and add their figures to cr.
type crossRun struct {
	h        *harness
	srv      *proc.Process
	cr       *crossRow
	args     []string // shardbench's
	requests int      // redis-benchmark's: set by the last shardbench run
}

// rounds runs n rounds, alternating which tool runs first.
func (run *crossRun) rounds(n int) error {
	for round := range n {
		first, second := run.shardbench, run.redisBenchmark
		if round%2 == 1 {
			first, second = run.redisBenchmark, run.shardbench
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	return nil
}

// shardbench runs shardbench once and records its figures.
func (run *crossRun) shardbench() error {
	h, srv, cr, d := run.h, run.srv, run.cr, run.h.opt.duration
	var s sample
	ratio, err := counted(srv.Addr(), func() (int64, error) {
		var err error
		s, err = h.runShardbench(srv.Addr(), run.args, nil, []*proc.Process{srv}, d, h.opt.warmup)
		return s.Answered, err
	})
	if err != nil {
		return err
	}
	if s.Errors > 0 {
		return fmt.Errorf("shardbench: %d wrong replies: %v", s.Errors, s.ErrorNotes)
	}
	cr.SBCounted = append(cr.SBCounted, ratio)
	cr.Shardbench = append(cr.Shardbench, s.OpsPerSec)
	cr.SBCPU = append(cr.SBCPU, s.ClientCPU)
	cr.SBServer = append(cr.SBServer, s.BackendCPU)
	// redis-benchmark takes a request count: as many as shardbench
	// answered in its measured time, so both run about as long.
	run.requests = max(10000, int(s.OpsPerSec*d.Seconds()))
	return nil
}

// redisBenchmark runs redis-benchmark once and records its figures and
// the server's CPU over its run.
func (run *crossRun) redisBenchmark() error {
	h, srv, cr, requests := run.h, run.srv, run.cr, run.requests
	before, err := procCPU(srv.Pid())
	if err != nil {
		return err
	}
	var ops float64
	var cpu time.Duration
	ratio, err := counted(srv.Addr(), func() (int64, error) {
		var err error
		ops, cpu, err = h.redisBenchmark(srv.Addr(), cr.Test, cr.Pipeline, requests)
		return int64(requests), err
	})
	if err != nil {
		return err
	}
	cr.RBCounted = append(cr.RBCounted, ratio)
	after, err := procCPU(srv.Pid())
	if err != nil {
		return err
	}
	cr.RBServer = append(cr.RBServer, float64((after-before).Microseconds())/float64(requests))
	cr.RedisBenchmark = append(cr.RedisBenchmark, ops)
	cr.RBCPU = append(cr.RBCPU, float64(cpu.Microseconds())/float64(requests))
	return nil
}

// judgeCross takes a measured row's medians and ratio, logs them, and
// fails the run when a tool's count is off or, outside a quick run, when
// the tools disagree beyond crossTolerance.
func (h *harness) judgeCross(cr *crossRow) {
	cr.SB, cr.RB = medianOf(cr.Shardbench), medianOf(cr.RedisBenchmark)
	cr.SBCPUMed, cr.RBCPUMed = medianOf(cr.SBCPU), medianOf(cr.RBCPU)
	cr.SBServerMed, cr.RBServerMed = medianOf(cr.SBServer), medianOf(cr.RBServer)
	cr.Ratio = cr.SB / cr.RB
	cr.OK = math.Abs(cr.Ratio-1) <= crossTolerance
	cr.RBCores = cr.RB * cr.RBCPUMed / 1e6
	cr.RBBound = !cr.OK && cr.RBCores >= busyThread
	h.logf("  %s -P %d: shardbench %.0f req/s, redis-benchmark %.0f req/s, ratio %.3f; own CPU %.2f vs %.2f µs/req; server CPU %.2f vs %.2f µs/req; server's count ÷ tool's %s vs %s",
		cr.Test, cr.Pipeline, cr.SB, cr.RB, cr.Ratio, cr.SBCPUMed, cr.RBCPUMed, cr.SBServerMed, cr.RBServerMed,
		worstCount(cr.SBCounted), worstCount(cr.RBCounted))
	for _, c := range [][]float64{cr.SBCounted, cr.RBCounted} {
		if i := slices.IndexFunc(c, func(r float64) bool { return math.Abs(r-1) > countTolerance }); i >= 0 {
			h.fail("cross-check %s -P %d: redis-server counted %.4f× the requests a tool sent (round %d)", cr.Test, cr.Pipeline, c[i], i+1)
		}
	}
	switch {
	case cr.OK:
	case cr.RBBound:
		h.logf("  %s -P %d: off by more than %.0f%%, with redis-benchmark's one thread %.2f cores busy: its own limit, not asserted",
			cr.Test, cr.Pipeline, 100*crossTolerance, cr.RBCores)
	case h.opt.quick:
		h.logf("  %s -P %d: off by more than %.0f%%; not asserted in a quick run (too short to be steady)",
			cr.Test, cr.Pipeline, 100*crossTolerance)
	default:
		h.fail("cross-check %s -P %d: shardbench %.0f req/s vs redis-benchmark %.0f req/s: off by more than %.0f%%",
			cr.Test, cr.Pipeline, cr.SB, cr.RB, 100*crossTolerance)
	}
}

// redisBenchmark runs redis-benchmark's test (SET or GET) and returns its
// requests per second and the CPU time it used.
func (h *harness) redisBenchmark(addr, test string, pipeline, requests int) (float64, time.Duration, error) {
	host, port, _ := strings.Cut(addr, ":")
	args := []string{"-h", host, "-p", port, "-c", "50", "-n", strconv.Itoa(requests), "-P", strconv.Itoa(pipeline),
		"-t", strings.ToLower(test), "-d", "100", "-r", "10000", "--csv"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.fleet.bins.redisBenchmark, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	h.logf("    redis-benchmark %s: %v", strings.Join(args, " "), firstLine(stderr.String()))
	if err != nil {
		return 0, 0, fmt.Errorf("redis-benchmark: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	ops, err := parseRedisBenchmarkCSV(stdout.Bytes(), test)
	return ops, cpu, err
}

// parseRedisBenchmarkCSV finds test's rps in redis-benchmark --csv output:
// a header line ("test","rps",...) and one line per test.
func parseRedisBenchmarkCSV(out []byte, test string) (float64, error) {
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark output: %w", err)
	}
	for _, rec := range recs {
		if len(rec) >= 2 && strings.EqualFold(rec[0], test) {
			return strconv.ParseFloat(rec[1], 64)
		}
	}
	return 0, fmt.Errorf("redis-benchmark output has no %s line: %q", test, out)
}
