package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is everything a run measured; it is written as README.md (tables
// and plots) and results.json (every sample) into the report directory.
type report struct {
	Date     string            `json:"date"`
	Settings string            `json:"settings"`
	Machine  map[string]string `json:"machine"`
	Versions map[string]string `json:"versions"`

	Cross    []*crossRow  `json:"crosscheck,omitempty"`
	Tables   []*table     `json:"loads,omitempty"`
	Idle     []idleResult `json:"idle,omitempty"`
	LuaIdle  *luaIdle     `json:"lua_idle,omitempty"`
	Scaling  []*scaling   `json:"scaling,omitempty"`
	Criteria []criterion  `json:"criteria,omitempty"`
	Failures []string     `json:"failures,omitempty"`
	// Noise sums up the other load of every sample.
	Noise string `json:"noise,omitempty"`

	opt *options
}

func newReport(opt *options, bins binaries) *report {
	r := &report{
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Settings: fmt.Sprintf("%d round(s) of %v (after %v warmup) per load and target; scaling points %v",
			opt.rounds, opt.duration, opt.warmup, opt.scaleDuration),
		opt:     opt,
		Machine: machineInfo(),
		Versions: map[string]string{
			"memcached":    firstLine(commandOutput(bins.memcached, "-V")),
			"redis-server": firstLine(commandOutput(bins.redisServer, "-v")),
			"nutcracker":   firstLine(commandOutput(bins.nutcracker, "-V")),
			"shardproxy":   binaryInfo(bins.shardproxy),
		},
	}
	if bins.baseline != "" {
		r.Versions["shardproxy-baseline"] = binaryInfo(bins.baseline)
	}
	if bins.memcachedProxy != "" {
		r.Versions["memcached-proxy"] = firstLine(commandOutput(bins.memcachedProxy, "-V")) + " (" + bins.memcachedProxy + ")"
	} else {
		r.Versions["memcached-proxy"] = "not given (-memcached-proxy; make bench MEMCACHED_PROXY=...): its rows are absent"
	}
	if bins.memtier != "" {
		r.Versions["memtier_benchmark"] = firstLine(commandOutput(bins.memtier, "--version")) + " (" + bins.memtier + ")"
	} else {
		r.Versions["memtier_benchmark"] = "not found (make bench builds it; -memtier): the loads ran under shardbench only"
	}
	if opt.quick {
		r.Settings = "BENCH_QUICK smoke run: " + r.Settings
	}
	return r
}

// machineInfo describes the host: CPU, cores, kernel, load.
func machineInfo() map[string]string {
	m := map[string]string{"cores": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	m["load before"] = loadAverage()
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func commandOutput(path string, args ...string) string {
	out, _ := exec.Command(path, args...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// binaryInfo describes the shardproxy binary measured: its version, when it
// was built, and the source tree it was built in.
func binaryInfo(path string) string {
	s := firstLine(commandOutput(path, "-V"))
	if st, err := os.Stat(path); err == nil {
		s += ", built " + st.ModTime().UTC().Format("2006-01-02 15:04 UTC")
	}
	return s + "; tree at " + gitRevision()
}

// gitRevision names the shardproxy source measured: commit and whether the
// tree had changes.
func gitRevision() string {
	rev := strings.TrimSpace(commandOutput("git", "rev-parse", "--short", "HEAD"))
	if rev == "" || strings.Contains(rev, " ") {
		return "unknown (not a git checkout)"
	}
	if strings.TrimSpace(commandOutput("git", "status", "--porcelain", "--untracked-files=no")) != "" {
		rev += " with uncommitted changes"
	}
	return rev
}

// finish evaluates the goals and records the failures.
func (r *report) finish(failures []string) {
	r.Machine["load after"] = loadAverage()
	r.Criteria = evaluate(r)
	r.Failures = failures
	r.Noise = r.noise()
}

// busyMachine is the median other load above which the report warns that
// its figures were taken on a busy machine.
const busyMachine = 0.2

// noise describes the other load over every sample of the run.
func (r *report) noise() string {
	var v []float64
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			for _, s := range row.Samples {
				v = append(v, s.OtherCores)
			}
		}
	}
	for _, sc := range r.Scaling {
		for _, p := range sc.Points {
			if p.Err == "" {
				v = append(v, p.Sample.OtherCores)
			}
		}
	}
	med := medianOf(v)
	if math.IsNaN(med) {
		return ""
	}
	most := 0.0
	for _, x := range v {
		if !math.IsNaN(x) {
			most = max(most, x)
		}
	}
	s := fmt.Sprintf("other load during the runs: median %.2f cores, max %.2f cores", med, most)
	if med > busyMachine {
		s += " — WARNING: the machine was busy with other work; these figures are noisy, rerun on a quiet machine"
	}
	return s
}

// write stores README.md, results.json and the plots in dir.
func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, sc := range r.Scaling {
		if err := sc.plot(dir); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(r.markdown()), 0o644)
}

// columns of a load table.
var tableHeader = []string{"target", "req/s", "× direct", "p50 µs", "p99 µs", "p99.9 µs",
	"proxy CPU µs/req", "backend CPU µs/req", "client CPU µs/req", "peak RSS", "other load", "wrong replies"}

// cells returns a table's rows as strings, for text and markdown alike.
func (t *table) cells() [][]string {
	var base float64
	if d := t.row(direct); d != nil {
		base = d.Median.OpsPerSec
	}
	var out [][]string
	for _, r := range t.Rows {
		if r.Err != "" && len(r.Samples) == 0 {
			out = append(out, []string{r.Target, "—", "—", "—", "—", "—", "—", "—", "—", "—", "—", short(r.Err, 90)})
			continue
		}
		m := r.Median
		out = append(out, []string{
			r.Target, fmtInt(m.OpsPerSec), fmtRatio(m.OpsPerSec, base), fmtInt(m.P50), fmtInt(m.P99), fmtInt(m.P999),
			fmtFloat(m.ProxyCPU), fmtFloat(m.BackendCPU), fmtFloat(m.ClientCPU), fmtKiB(r.PeakKiB),
			fmtCores(m.OtherCores), fmt.Sprint(m.Errors),
		})
	}
	return out
}

// caption describes a table's load.
func (t *table) caption() string {
	s := fmt.Sprintf("%s over %d %s; shardbench %s", t.Load.Title, t.Load.Servers,
		map[bool]string{false: "memcached", true: "redis-server"}[t.Load.Redis], strings.Join(t.Load.Args, " "))
	if t.Rate > 0 {
		s += fmt.Sprintf(" -rate %.0f (memtier: --rate-limiting %d per connection)", t.Rate, t.PerConn)
	}
	if t.Load.ServerProtocol != "" {
		s += "; shardproxy with server_protocol " + t.Load.ServerProtocol
	}
	if t.Load.Threads > 0 {
		s += fmt.Sprintf("; shardproxy -threads %d", t.Load.Threads)
	}
	if slices.Contains(t.Load.Targets, shardproxyDefaults) {
		s += "; shardproxy-defaults runs with neither (server_protocol auto, the default threads)"
	}
	if slices.Contains(t.Load.Targets, shardproxyV2) {
		s += fmt.Sprintf("; shardproxy-v2 and memcached-proxy run the same V2 route file (one function generator, "+
			"enqueue_and_wait to one pool of the one memcached), memcached-proxy with -t %d", max(t.Load.Threads, 1))
	}
	s += fmt.Sprintf("; median of %d round(s)", t.Rounds)
	if t.Absent != "" {
		s += ". " + t.Absent
	}
	if t.NoMemtier != "" {
		s += ". " + t.NoMemtier
	}
	if t.Rate > 0 {
		var parts []string
		for _, r := range t.Rows {
			if len(r.Samples) > 0 {
				parts = append(parts, fmt.Sprintf("%s %s µs", r.Target, fmtInt(r.Median.PacingLate)))
			}
		}
		if len(parts) > 0 {
			s += ". The generator's own lateness, p99 of how late a batch started after sleeping to its" +
				" scheduled start (part of the latency, which counts from the schedule): " + strings.Join(parts, ", ")
		}
	}
	return s
}

// text renders the table for the terminal.
func (t *table) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", t.caption())
	if t.Note != "" {
		fmt.Fprintf(&b, "  %s\n", t.Note)
		return b.String()
	}
	writeTabs(&b, tableHeader, t.cells())
	if h, rows := t.generatorCells(); rows != nil {
		fmt.Fprintf(&b, "by both generators, shardbench / memtier_benchmark:\n")
		writeTabs(&b, h, rows)
	}
	return b.String()
}

// generatorHeader is the header of a load's side-by-side table.
var generatorHeader = []string{"target", "req/s", "p50 µs", "p99 µs", "p99.9 µs", "proxy CPU µs/req",
	"backend CPU µs/req", fmt.Sprintf("apart > %.0f%%", 100*disagreeTolerance)}

// generatorCells returns the side-by-side table of a load run under both
// generators: each cell "shardbench / memtier", marked ⚑ where the two are
// more than disagreeTolerance apart, and the last column naming those
// figures with memtier's deviation. Nil rows when no row has memtier's
// figures.
func (t *table) generatorCells() ([]string, [][]string) {
	var rows [][]string
	for _, r := range t.Rows {
		if r.MemtierMedian == nil && r.MemtierErr == "" {
			continue
		}
		if r.MemtierMedian == nil {
			rows = append(rows, []string{r.Target, "—", "—", "—", "—", "—", "—", "memtier: " + short(r.MemtierErr, 90)})
			continue
		}
		sb, mt := r.Median, *r.MemtierMedian
		cells := []string{r.Target}
		for _, f := range comparedFigures {
			format := fmtInt
			if strings.HasSuffix(f.name, "CPU") {
				format = fmtFloat
			}
			c := format(f.get(&sb)) + " / " + format(f.get(&mt))
			for _, d := range r.Disagree {
				if strings.HasPrefix(d, f.name+" ") {
					c += " ⚑"
				}
			}
			cells = append(cells, c)
		}
		flag := "—"
		if len(r.Disagree) > 0 {
			flag = "⚑ " + strings.Join(r.Disagree, ", ")
		}
		rows = append(rows, append(cells, flag))
	}
	return generatorHeader, rows
}

// writeTabs writes aligned columns.
func writeTabs(b *strings.Builder, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(b, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t\n", strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// markdownTable renders rows as a GitHub table, first column left-aligned.
func markdownTable(b *strings.Builder, header []string, rows [][]string) {
	fmt.Fprintf(b, "| %s |\n|", strings.Join(header, " | "))
	for i := range header {
		if i == 0 {
			b.WriteString(" :-- |")
		} else {
			b.WriteString(" --: |")
		}
	}
	b.WriteByte('\n')
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}

// idleText renders the idle-connection figures.
func idleText(res []idleResult) string {
	var b strings.Builder
	writeTabs(&b, idleHeader, idleCells(res))
	return b.String()
}

var idleHeader = []string{"proxy", "idle clients", "RSS before", "RSS after", "per connection", "peak RSS", "open fds"}

func idleCells(res []idleResult) [][]string {
	var out [][]string
	for _, r := range res {
		if r.Err != "" {
			out = append(out, []string{r.Target, fmt.Sprint(r.Conns), "—", "—", short(r.Err, 90), "—", "—"})
			continue
		}
		out = append(out, []string{r.Target, fmt.Sprint(r.Conns), fmtKiB(r.BeforeKiB), fmtKiB(r.AfterKiB),
			fmt.Sprintf("%.2f KiB", r.PerConnKiB), fmtKiB(r.PeakKiB), fmt.Sprint(r.FDs)})
	}
	return out
}

// scaling tables: one row per x, req/s and CPU per target.
func (sc *scaling) cells() ([]string, [][]string) {
	header := []string{sc.XLabel}
	for _, t := range sc.Targets {
		header = append(header, t+" req/s")
	}
	for _, t := range sc.Targets {
		header = append(header, t+" "+cpuLabel(t))
	}
	for _, t := range sc.Targets {
		header = append(header, t+" "+rssLabel(t))
	}
	var xs []float64
	for _, p := range sc.Points {
		if len(xs) == 0 || xs[len(xs)-1] != p.X {
			xs = append(xs, p.X)
		}
	}
	header = append(header, "other load (max)")
	var rows [][]string
	for _, x := range xs {
		row := []string{fmtInt(x)}
		var cpus, rsss []string
		other := nan
		for _, t := range sc.Targets {
			ops, cpu, rss := "—", "—", "—"
			for _, p := range sc.Points {
				if p.X == x && p.Target == t && p.Err == "" {
					ops, cpu, rss = fmtInt(p.Sample.OpsPerSec), fmtFloat(cpuOfTarget(t, p.Sample)), fmtKiB(p.RSSKiB)
					if o := p.Sample.OtherCores; math.IsNaN(other) || o > other {
						other = o
					}
				}
			}
			row = append(row, ops)
			cpus = append(cpus, cpu)
			rsss = append(rsss, rss)
		}
		rows = append(rows, append(append(append(row, cpus...), rsss...), fmtCores(other)))
	}
	return header, rows
}

// cpuOfTarget is the CPU figure plotted for a target: the proxy's own, or
// for direct the server's.
func cpuOfTarget(target string, s sample) float64 {
	if target == direct {
		return s.BackendCPU
	}
	return s.ProxyCPU
}

func rssLabel(target string) string {
	if target == direct {
		return "server RSS"
	}
	return "peak RSS"
}

func cpuLabel(target string) string {
	if target == direct {
		return "server CPU µs/req"
	}
	return "CPU µs/req"
}

func (sc *scaling) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", sc.Title, sc.Load)
	h, rows := sc.cells()
	writeTabs(&b, h, rows)
	return b.String()
}

func fmtInt(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	s := fmt.Sprintf("%.0f", v)
	// Thousands separators.
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func fmtFloat(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtCores formats a number of busy cores.
func fmtCores(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f cores", v)
}

func fmtRatio(v, base float64) string {
	if base <= 0 || math.IsNaN(v) || math.IsNaN(base) {
		return "—"
	}
	return fmt.Sprintf("%.2f", v/base)
}

func fmtKiB(kib int64) string {
	if kib <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", float64(kib)/1024)
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "/")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
