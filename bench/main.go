package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"shardproxy/internal/proc"
)

// options are the harness's flags.
type options struct {
	quick         bool
	rounds        int
	duration      time.Duration // measured time of one load run
	warmup        time.Duration
	scaleDuration time.Duration // measured time of one scaling point
	idleConns     int
	out           string
	only          map[string]bool // sections to run
	loads         map[string]bool // load names to run; empty = all
	bins          binaries
	verbose       bool
	// fixedRate is the fixed-rate loads' requests per second; 0 is half of
	// nutcracker's peak in the same run.
	fixedRate float64
}

// sections of a run, in run order.
var sections = []string{"crosscheck", "loads", "idle", "scaling"}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quickDefault := os.Getenv("BENCH_QUICK") != "" && os.Getenv("BENCH_QUICK") != "0"
	fs.BoolVar(&o.quick, "quick", quickDefault, "smoke run of a few minutes: 1 round, 0.8 s runs (memtier: 1 s), 2 points per scaling run "+
		"(default true when BENCH_QUICK=1); its report goes to a temporary directory unless -out is given")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds per load; each round runs every target once, tables show medians")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of one run of a load")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured time before each run")
	fs.DurationVar(&o.scaleDuration, "scale-duration", 2*time.Second, "measured time of one scaling point")
	fs.IntVar(&o.idleConns, "idle-conns", 10000, "idle client connections for the RSS-per-connection figure")
	fs.StringVar(&o.out, "out", "", "report directory (default bench/report)")
	only := fs.String("only", strings.Join(sections, ","), "comma-separated sections to run: "+strings.Join(sections, ", "))
	loadNames := fs.String("loads", "", "comma-separated loads to run (default all): "+strings.Join(loadNameList(), ", "))
	fs.StringVar(&o.bins.shardproxy, "shardproxy", "bin/shardproxy", "shardproxy binary")
	fs.StringVar(&o.bins.shardbench, "shardbench", "bin/shardbench", "shardbench binary")
	fs.StringVar(&o.bins.baseline, "baseline", "", "another shardproxy binary (an earlier build), run with the shardproxy row's "+
		"options right after it in every load that has it (row shardproxy-baseline), and judged against it: no regression")
	fs.StringVar(&o.bins.memcachedProxy, "memcached-proxy", "", "a memcached built with its proxy (1.6.45, --enable-proxy), "+
		"measured in the lua-v2 loads beside shardproxy's V2 route; empty leaves those rows out")
	fs.StringVar(&o.bins.memtier, "memtier", "", "memtier_benchmark (2.3.0), the second load generator of the goal loads; "+
		"empty: memtier_benchmark on PATH, else those loads run under shardbench only; off: never")
	fs.Float64Var(&o.fixedRate, "fixed-rate", 0, "requests per second of the fixed-rate loads (*-half), over all "+
		"connections; 0: half of nutcracker's peak in the same run's unpaced load")
	fs.BoolVar(&o.verbose, "v", false, "print every shardbench and redis-benchmark command")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		o.quickDefaults(set)
	}
	if o.out == "" {
		o.out = o.defaultOut()
	}
	var err error
	if o.only, err = parseList(*only, sections); err != nil {
		return nil, fmt.Errorf("-only: %w", err)
	}
	if o.loads, err = parseList(*loadNames, loadNameList()); err != nil {
		return nil, fmt.Errorf("-loads: %w", err)
	}
	if o.rounds < 1 || o.duration <= 0 || o.scaleDuration <= 0 || o.warmup < 0 || o.idleConns < 1 || o.fixedRate < 0 {
		return nil, errors.New("-rounds, -duration, -scale-duration and -idle-conns must be positive, -fixed-rate not negative")
	}
	return o, nil
}

// quickDefaults shortens a -quick run: the rounds and times of the flags
// not in set (the flags given) to a smoke run's.
func (o *options) quickDefaults(set map[string]bool) {
	if !set["rounds"] {
		o.rounds = 1
	}
	if !set["duration"] {
		o.duration = 800 * time.Millisecond
	}
	if !set["warmup"] {
		o.warmup = 200 * time.Millisecond
	}
	if !set["scale-duration"] {
		o.scaleDuration = 800 * time.Millisecond
	}
}

// defaultOut is the report directory without -out: bench/report, or a
// temporary directory for a -quick run.
func (o *options) defaultOut() string {
	if o.quick {
		return filepath.Join(os.TempDir(), "shardproxy-bench-quick")
	}
	return filepath.Join("bench", "report")
}

// parseList parses a comma-separated subset of known.
func parseList(s string, known []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		found := false
		for _, k := range known {
			found = found || k == name
		}
		if !found {
			return nil, fmt.Errorf("unknown %q (known: %s)", name, strings.Join(known, ", "))
		}
		out[name] = true
	}
	return out, nil
}

func loadNameList() []string {
	var names []string
	for _, l := range loads() {
		names = append(names, l.Name)
	}
	return names
}

// harness is one run of the benchmark suite.
type harness struct {
	opt    *options
	fleet  *fleet
	stdout io.Writer

	extraMC []*proc.Process // memcached started for the backends scaling run

	mu       sync.Mutex
	failures []string // what makes the exit status 1
}

// logf prints progress; commands only with -v.
func (h *harness) logf(format string, args ...any) {
	if strings.HasPrefix(format, "    ") && !h.opt.verbose {
		return
	}
	fmt.Fprintf(h.stdout, format+"\n", args...)
}

// fail records a failure: wrong replies, a target that did not run, a
// cross-check off by too much.
func (h *harness) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.failures = append(h.failures, msg)
	h.mu.Unlock()
	fmt.Fprintf(h.stdout, "  FAILED: %s\n", msg)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole harness; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	opt, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	h := &harness{opt: opt, stdout: stdout}
	rep, err := h.execute()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	if err := rep.write(opt.out); err != nil {
		fmt.Fprintf(stderr, "bench: write report: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(opt.out, "README.md"))
	if len(h.failures) > 0 {
		fmt.Fprintf(stderr, "bench: %d failure(s):\n  %s\n", len(h.failures), strings.Join(h.failures, "\n  "))
		return 1
	}
	return 0
}

// execute starts the fleet and runs the selected sections.
func (h *harness) execute() (*report, error) {
	bins, err := findBinaries(h.opt.bins)
	if err != nil {
		return nil, err
	}
	limit, err := raiseFileLimit()
	if err != nil {
		return nil, fmt.Errorf("raise RLIMIT_NOFILE: %w", err)
	}
	work, err := os.MkdirTemp("", "shardproxy-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	rep := newReport(h.opt, bins)
	h.logf("bench: %s; work directory %s; RLIMIT_NOFILE %d", rep.Settings, work, limit)

	// Ctrl-C and SIGTERM stop the servers before the harness exits.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	f, err := newFleet(work, bins, 4)
	if err != nil {
		return nil, err
	}
	h.fleet = f
	defer f.close()
	go func() {
		select {
		case <-sig:
			fmt.Fprintln(h.stdout, "bench: interrupted; stopping the servers")
			f.close()
			_ = os.RemoveAll(work)
			os.Exit(130)
		case <-ctx.Done():
		}
	}()

	h.runSections(rep, limit)
	rep.finish(h.failures)
	fmt.Fprint(h.stdout, "\n"+rep.criteriaText())
	if rep.Noise != "" {
		fmt.Fprintf(h.stdout, "%s\n", rep.Noise)
	}
	return rep, nil
}

// runSections runs the selected sections in order, adding to rep and
// printing each table as it is done.
func (h *harness) runSections(rep *report, fileLimit uint64) {
	if h.opt.only["crosscheck"] {
		h.logf("\n== cross-check: shardbench vs redis-benchmark on a direct redis-server")
		rep.Cross = h.runCrosscheck()
	}
	if h.opt.only["loads"] {
		for _, l := range loads() {
			if len(h.opt.loads) > 0 && !h.opt.loads[l.Name] {
				continue
			}
			h.logf("\n== %s (%s)", l.Title, l.Name)
			t := h.runLoad(l, rep.Tables)
			rep.Tables = append(rep.Tables, t)
			fmt.Fprint(h.stdout, t.text())
		}
	}
	if h.opt.only["idle"] {
		n := h.opt.idleConns
		if spare := int(fileLimit) - 200; n > spare {
			h.fail("idle: RLIMIT_NOFILE %d allows only %d idle connections, not %d", fileLimit, spare, n)
			n = spare
		}
		h.logf("\n== %d idle client connections", n)
		rep.Idle = h.runIdle(n)
		fmt.Fprint(h.stdout, idleText(rep.Idle))
		h.logf("\n== idle Lua worker states")
		li := h.runLuaIdle()
		rep.LuaIdle = &li
		fmt.Fprint(h.stdout, luaIdleText(li))
	}
	if h.opt.only["scaling"] {
		for _, sp := range scalingPlans(h.opt.quick) {
			h.logf("\n== scaling: %s", sp.title)
			sc := h.runScaling(sp)
			rep.Scaling = append(rep.Scaling, sc)
			fmt.Fprint(h.stdout, sc.text())
		}
	}
}

// findBinaries resolves every program a run needs, or says how to get it.
func findBinaries(b binaries) (binaries, error) {
	var errs []error
	look := func(dst *string, name string) {
		p, err := proc.LookPath(name)
		errs = append(errs, err)
		*dst = p
	}
	look(&b.memcached, "memcached")
	look(&b.redisServer, "redis-server")
	look(&b.redisBenchmark, "redis-benchmark")
	look(&b.nutcracker, "nutcracker")
	if b.memcachedProxy != "" {
		p, err := proc.LookPath(b.memcachedProxy)
		if err == nil {
			p, err = filepath.Abs(p)
		}
		if err == nil && !strings.Contains(commandOutput(p, "-h"), "proxy_config") {
			err = fmt.Errorf("-memcached-proxy %s: its -h lists no proxy_config; build memcached with ./configure --enable-proxy", p)
		}
		errs = append(errs, err)
		b.memcachedProxy = p
	}
	switch b.memtier {
	case "off":
		b.memtier = ""
	case "":
		b.memtier, _ = proc.LookPath("memtier_benchmark")
	default:
		p, err := proc.LookPath(b.memtier)
		if err == nil {
			p, err = filepath.Abs(p)
		}
		errs = append(errs, err)
		b.memtier = p
	}
	for _, p := range []*string{&b.shardproxy, &b.shardbench} {
		abs, err := filepath.Abs(*p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (make bench builds it)", *p, err))
		}
		*p = abs
	}
	return b, errors.Join(errs...)
}
