package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"time"

	"shardproxy/internal/proc"
)

// load is one table of the report: the same shardbench flags against
// direct (the first backend alone), shardproxy and nutcracker, or against
// the load's own Targets.
type load struct {
	Name    string   `json:"name"`
	Title   string   `json:"title"`
	Redis   bool     `json:"redis"`
	Servers int      `json:"servers"` // backends behind the proxies
	Args    []string `json:"args"`    // shardbench flags
	// ServerProtocol is shardproxy's server_protocol in a memcache load;
	// loads sets "meta" where a load leaves it empty.
	ServerProtocol string `json:"server_protocol,omitempty"`
	// Threads is shardproxy's -threads; loads sets benchThreads where a
	// load leaves it 0.
	Threads int `json:"threads,omitempty"`
	// Targets, when set, are the load's rows instead of targetNames: the
	// V2 loads compare shardproxy's Lua route (shardproxyV2) with its
	// native pool and memcached's proxy.
	Targets []string `json:"targets,omitempty"`
	// Memtier runs the load under memtier_benchmark too, in the same
	// rounds, when its binary is there (-memtier).
	Memtier bool `json:"memtier,omitempty"`
	// rate, when set, returns the -rate to run at from the tables so far
	// and the options (0 and a reason when it cannot).
	rate func(done []*table, o *options) (float64, string)
}

// Target names, in the order tables list them.
const (
	direct     = "direct"
	shardproxy = "shardproxy"
	nutcracker = "nutcracker"
	// shardproxyV2 is shardproxy with a Lua pool running v2Route.
	shardproxyV2 = "shardproxy-v2"
	// shardproxyV2Meta is shardproxyV2 with server_protocol meta: the
	// gets its route forwards untouched reach memcached as mg.
	shardproxyV2Meta = "shardproxy-v2-meta"
	// shardproxyText is shardproxy's native pool with server_protocol
	// text: requests reach memcached as the client sent them, as they do
	// from a Lua pool.
	shardproxyText = "shardproxy-text"
	// shardproxyNear is shardproxy's native pool with a near cache
	// (near_cache: nearCacheMiB, the default near_cache_ttl and fill).
	shardproxyNear = "shardproxy-near"
	// shardproxyDefaults is shardproxy as it comes: the pool with no
	// server_protocol (auto) and no -threads flag (the default threads),
	// beside the tuned shardproxy row (benchServerProtocol, benchThreads).
	shardproxyDefaults = "shardproxy-defaults"
	// mcProxy is memcached's own proxy running the same route file; it
	// runs only when its binary is given (-memcached-proxy).
	mcProxy = "memcached-proxy"
	// shardproxyBaseline is another shardproxy binary (-baseline, an
	// earlier build) run as the shardproxy row is, right after it in
	// every load that has that row: the two side by side in the same
	// rounds tell a change from the host's drift.
	shardproxyBaseline = "shardproxy-baseline"
)

// withBaseline returns names with shardproxyBaseline after shardproxy,
// when a baseline binary is given.
func withBaseline(names []string, baseline string) []string {
	i := slices.Index(names, shardproxy)
	if baseline == "" || i < 0 {
		return names
	}
	return slices.Insert(slices.Clone(names), i+1, shardproxyBaseline)
}

var targetNames = []string{direct, shardproxy, nutcracker}

// nearTargets are the rows of the near-cache load: the same pool of the
// same memcached servers without and with near_cache, and the first
// server alone.
var nearTargets = []string{direct, shardproxy, shardproxyNear}

// nearCacheMiB is shardproxy-near's near_cache: room for every key of
// the load many times over, so that the figures show the cache, not its
// evictions.
const nearCacheMiB = 64

// defaultsTargets are the rows of the loads that also show shardproxy's
// defaults (issue 27's goal: the defaults beat nutcracker too).
var defaultsTargets = []string{direct, shardproxy, shardproxyDefaults, nutcracker}

// v2Targets are the rows of the V2 loads: the Lua route (as it comes, and
// with server_protocol meta), the native pool of the same backend (with
// the bench's server_protocol, and with text, which sends what a Lua pool
// sends by default), and memcached's proxy with the same route file.
var v2Targets = []string{direct, shardproxyV2, shardproxyV2Meta, shardproxy, shardproxyText, mcProxy}

// v2BigTargets are the rows of the V2 load with 100 KB values: the Lua
// route as it comes, the native pool of the same memcached, and
// memcached's proxy running the same route file.
var v2BigTargets = []string{direct, shardproxyV2, shardproxy, mcProxy}

// v2FixedTargets are the rows of the fixed-rate V2 load: shardproxy's
// defaults and its native pool, its V2 route as it comes and with meta,
// and memcached's proxy running the same route, over one memcached.
var v2FixedTargets = []string{direct, shardproxyDefaults, shardproxy, shardproxyV2, shardproxyV2Meta, mcProxy}

// targets returns the load's rows.
func (l load) targets() []string {
	if l.Targets != nil {
		return l.Targets
	}
	return targetNames
}

// common is the base load: 50 connections, 100-byte values, 1:9
// set:get over 10,000 keys.
func common(proto string, more ...string) []string {
	return append([]string{"-proto", proto, "-conns", "50", "-value", "100", "-ratio", "1:9", "-keys", "10000"}, more...)
}

// benchServerProtocol is the server_protocol shardproxy's memcache pools
// run with: meta, which docs/configuration.md recommends for memcached 1.6 and later.
const benchServerProtocol = "meta"

// benchThreads is shardproxy's -threads: one, as twemproxy has. The
// machine's cores are shared with the backends and the load generator; a
// second thread there mostly spins and steals work (see docs/benchmarks.md, "Where
// the time goes").
const benchThreads = 1

// loads returns the loads of the issue, in run order. shardproxy runs its
// memcache pools with benchServerProtocol, except in memcache-p1-text,
// which shows what text gives, and with benchThreads, except in
// memcache-p1-threads, which runs it on every core. memcache-p1 and
// memcache-100k add the row shardproxy-defaults: no server_protocol, no
// -threads.
func loads() []load {
	ls := []load{
		{Name: "memcache-p1", Title: "memcache text, pipeline 1", Servers: 4,
			Args: common("text", "-pipeline", "1"), Targets: defaultsTargets, Memtier: true},
		{Name: "memcache-p1-text", Title: "memcache text, pipeline 1, shardproxy with server_protocol text", Servers: 4,
			Args: common("text", "-pipeline", "1"), ServerProtocol: "text"},
		{Name: "memcache-p1-threads", Title: "memcache text, pipeline 1, shardproxy on every core", Servers: 4,
			Args: common("text", "-pipeline", "1"), Threads: runtime.NumCPU()},
		{Name: "memcache-p16", Title: "memcache text, pipeline 16", Servers: 4,
			Args: common("text", "-pipeline", "16"), Memtier: true},
		{Name: "redis-p1", Title: "Redis, pipeline 1", Redis: true, Servers: 4,
			Args: common("resp", "-pipeline", "1"), Memtier: true},
		{Name: "redis-p16", Title: "Redis, pipeline 16", Redis: true, Servers: 4,
			Args: common("resp", "-pipeline", "16"), Memtier: true},
		{Name: "memcache-mget100", Title: "memcache text, 100-key multi-get over 4 servers", Servers: 4,
			Args: []string{"-proto", "text", "-conns", "50", "-pipeline", "1", "-value", "100",
				"-ratio", "0:1", "-mget", "100", "-keys", "10000"}},
		{Name: "memcache-1k", Title: "memcache text, 1 KB values", Servers: 4,
			Args: []string{"-proto", "text", "-conns", "50", "-pipeline", "1", "-value", "1024",
				"-ratio", "1:9", "-keys", "10000"}, Memtier: true},
		{Name: "memcache-100k", Title: "memcache text, 100 KB values", Servers: 4,
			Args: []string{"-proto", "text", "-conns", "50", "-pipeline", "1", "-value", "102400",
				"-ratio", "1:9", "-keys", "200"}, Targets: defaultsTargets, Memtier: true},
		{Name: "memcache-1000c", Title: "memcache text, 1,000 connections", Servers: 4,
			Args: []string{"-proto", "text", "-conns", "1000", "-pipeline", "1", "-value", "100",
				"-ratio", "1:9", "-keys", "10000"}, Memtier: true},
		{Name: "memcache-p1-half", Title: "memcache text, pipeline 1, fixed rate (half of nutcracker's peak)", Servers: 4,
			Args: common("text", "-pipeline", "1"), Targets: defaultsTargets, Memtier: true,
			rate: halfOfNutcracker("memcache-p1")},
		{Name: "redis-p1-half", Title: "Redis, pipeline 1, fixed rate (half of nutcracker's peak)", Redis: true, Servers: 4,
			Args: common("resp", "-pipeline", "1"), Targets: defaultsTargets, Memtier: true,
			rate: halfOfNutcracker("redis-p1")},
		{Name: "memcache-near", Title: "memcache text, pipeline 1, zipf keys (theta 0.99), shardproxy with and without near_cache",
			Servers: 4, Args: common("text", "-pipeline", "1", "-dist", "zipf"), Targets: nearTargets},
		{Name: "lua-v2-p1", Title: "memcache text, pipeline 1, V2 Lua route to one memcached", Servers: 1,
			Args: common("text", "-pipeline", "1"), Targets: v2Targets, Memtier: true},
		{Name: "lua-v2-p16", Title: "memcache text, pipeline 16, V2 Lua route to one memcached", Servers: 1,
			Args: common("text", "-pipeline", "16"), Targets: v2Targets, Memtier: true},
		{Name: "lua-v2-100k", Title: "memcache text, 100 KB values, V2 Lua route to one memcached", Servers: 1,
			Args: []string{"-proto", "text", "-conns", "50", "-pipeline", "1", "-value", "102400",
				"-ratio", "1:9", "-keys", "200"}, Targets: v2BigTargets, Memtier: true},
		{Name: "lua-v2-p1-half", Title: "memcache text, pipeline 1, V2 Lua route to one memcached, fixed rate " +
			"(half of nutcracker's peak in memcache-p1)", Servers: 1,
			Args: common("text", "-pipeline", "1"), Targets: v2FixedTargets, Memtier: true,
			rate: halfOfNutcracker("memcache-p1")},
	}
	for i := range ls {
		if !ls[i].Redis && ls[i].ServerProtocol == "" {
			ls[i].ServerProtocol = benchServerProtocol
		}
		if ls[i].Threads == 0 {
			ls[i].Threads = benchThreads
		}
	}
	return ls
}

// halfOfNutcracker paces a load at -fixed-rate when given, else at half
// the rate nutcracker reached in the named load of the same run.
func halfOfNutcracker(name string) func([]*table, *options) (float64, string) {
	return func(done []*table, o *options) (float64, string) {
		if o.fixedRate > 0 {
			return o.fixedRate, ""
		}
		for _, t := range done {
			if t.Load.Name != name {
				continue
			}
			if r := t.row(nutcracker); r != nil && r.Err == "" && r.Median.OpsPerSec > 0 {
				return math.Round(r.Median.OpsPerSec / 2), ""
			}
		}
		return 0, "needs nutcracker's figure from " + name + " in the same run, or -fixed-rate"
	}
}

// table is one load's results.
type table struct {
	Load load `json:"load"`
	// Rate is a fixed-rate load's requests per second over all
	// connections, PerConn its share of one connection.
	Rate    float64 `json:"rate,omitempty"`
	PerConn int     `json:"rate_per_conn,omitempty"`
	Rounds  int     `json:"rounds"`
	Rows    []*row  `json:"rows"`
	Note    string  `json:"note,omitempty"` // why the load did not run
	// Absent says which rows are left out and why (memcached-proxy
	// without its binary).
	Absent string `json:"absent,omitempty"`
	// NoMemtier says why a load marked Memtier ran under shardbench only.
	NoMemtier string `json:"no_memtier,omitempty"`
}

// row is one target's results in a table.
type row struct {
	Target  string   `json:"target"`
	Samples []sample `json:"samples"`
	Median  sample   `json:"median"`
	PeakKiB int64    `json:"peak_rss_kib"` // VmHWM of the proxy (direct: the backend)
	Err     string   `json:"error,omitempty"`
	// Memtier holds memtier_benchmark's samples of the same target in
	// the same rounds, MemtierMedian their median and MemtierErr what
	// stopped them; Disagree the figures on which the two generators'
	// medians are more than disagreeTolerance apart.
	Memtier       []sample `json:"memtier_samples,omitempty"`
	MemtierMedian *sample  `json:"memtier_median,omitempty"`
	MemtierErr    string   `json:"memtier_error,omitempty"`
	Disagree      []string `json:"disagree,omitempty"`
}

func (t *table) row(target string) *row {
	for _, r := range t.Rows {
		if r.Target == target {
			return r
		}
	}
	return nil
}

// runLoad runs l: fresh proxies, then rounds of direct / shardproxy /
// nutcracker, the order rotating from round to round.
func (h *harness) runLoad(l load, done []*table) *table {
	t := &table{Load: l, Rounds: h.opt.rounds}
	args := l.Args
	if l.rate != nil {
		rate, why := l.rate(done, h.opt)
		if rate <= 0 {
			t.Note = "not run: " + why
			return t
		}
		// Both generators run at the rate memtier can pace: a whole
		// number of requests per second per connection.
		t.PerConn, t.Rate = fixedRate(rate, flagInt(args, "-conns", 1))
		args = append(append([]string(nil), args...), "-rate", strconv.FormatFloat(t.Rate, 'f', 0, 64))
	}
	if err := h.fleet.flush(); err != nil {
		t.Note = "not run: " + err.Error()
		h.fail("%s: %v", l.Name, err)
		return t
	}
	backends := h.fleet.backends(l.Redis, l.Servers)
	names := withBaseline(l.targets(), h.fleet.bins.baseline)
	if slices.Contains(names, mcProxy) && h.fleet.bins.memcachedProxy == "" {
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == mcProxy })
		t.Absent = mcProxy + ": not run, no binary given (make bench MEMCACHED_PROXY=/path/to/memcached, " +
			"a memcached 1.6.45 built with --enable-proxy; Debian's memcached lacks the proxy)"
	}
	tg := h.startTargets(names, l.Redis, backends, spOptions{serverProtocol: l.ServerProtocol, threads: l.Threads})
	defer tg.stop()
	for _, name := range names {
		r := &row{Target: name}
		if err := tg.err[name]; err != nil {
			r.Err = "did not start: " + err.Error()
			h.fail("%s: %s %s", l.Name, name, r.Err)
		}
		t.Rows = append(t.Rows, r)
	}
	var mt *mtLoad
	if l.Memtier {
		mt, t.NoMemtier = h.memtierFor(args)
	}
	h.runRounds(t, tg, backends, args, mt)
	for _, r := range t.Rows {
		r.Median = median(r.Samples)
		if len(r.Memtier) > 0 {
			m := median(r.Memtier)
			r.MemtierMedian = &m
			r.Disagree = disagreement(r.Median, m)
		}
		if p := tg.proc(r.Target, backends); p != nil && p.Running() {
			r.PeakKiB, _ = proc.Status(p.Pid(), "VmHWM")
		}
	}
	return t
}

// runRounds runs the rounds of t's load with args: each target that
// started runs once a round, the order rotating from round to round, and
// each run adds a sample to its row or ends the row with an error. With
// mt, each target runs under memtier too, right before or after
// shardbench, the generators' order alternating from round to round.
func (h *harness) runRounds(t *table, tg *targets, backends []*proc.Process, args []string, mt *mtLoad) {
	name := t.Load.Name
	prefilled := map[string]bool{}
	for round := range h.opt.rounds {
		for i := range t.Rows {
			r := t.Rows[(i+round)%len(t.Rows)]
			for g := range 2 {
				if (g+round)%2 == 0 {
					h.shardbenchRound(name, r, tg, backends, args)
				} else if mt != nil {
					h.memtierRound(name, r, tg, backends, *mt, prefilled)
				}
			}
		}
	}
}

// shardbenchRound runs shardbench once against r's target.
func (h *harness) shardbenchRound(name string, r *row, tg *targets, backends []*proc.Process, args []string) {
	if r.Err != "" {
		return
	}
	s, err := h.runTarget(tg, r.Target, backends, args, h.opt.duration, h.opt.warmup)
	if err != nil {
		r.Err = err.Error()
		h.fail("%s: %s: %v", name, r.Target, err)
		return
	}
	if s.Errors > 0 {
		h.fail("%s: %s: %d wrong replies: %v", name, r.Target, s.Errors, s.ErrorNotes)
	}
	r.Samples = append(r.Samples, s)
}

// memtierRound runs memtier once against r's target, after setting its
// keys through that target the first time (prefilled).
func (h *harness) memtierRound(name string, r *row, tg *targets, backends []*proc.Process, l mtLoad, prefilled map[string]bool) {
	if r.MemtierErr != "" || (r.Err != "" && len(r.Samples) == 0) {
		return
	}
	p := tg.proc(r.Target, backends)
	var err error
	var s sample
	switch {
	case p == nil || !p.Running():
		err = fmt.Errorf("%s is not running", r.Target)
	case !prefilled[r.Target]:
		err = h.memtierPrefill(p.Addr(), l)
		prefilled[r.Target] = err == nil
	}
	if err == nil {
		proxy, bs := p, backends
		if r.Target == direct {
			proxy, bs = nil, backends[:1]
		}
		s, err = h.runMemtier(p.Addr(), l, proxy, bs, h.opt.duration)
	}
	if err != nil {
		r.MemtierErr = err.Error()
		h.fail("%s: %s under memtier: %v", name, r.Target, err)
		return
	}
	if s.Errors > 0 {
		h.fail("%s: %s under memtier: %v", name, r.Target, s.ErrorNotes)
	}
	r.Memtier = append(r.Memtier, s)
}

// memtierFor returns memtier's version of a load's shardbench flags, or
// nil and why the load runs under shardbench only.
func (h *harness) memtierFor(args []string) (*mtLoad, string) {
	if h.fleet.bins.memtier == "" {
		return nil, "memtier_benchmark not run: no binary (make bench builds one; -memtier names it)"
	}
	l, err := memtierLoad(args)
	if err != nil {
		return nil, "memtier_benchmark not run: " + err.Error()
	}
	return &l, ""
}

// flagInt returns the integer value of a shardbench flag in args, or def.
func flagInt(args []string, name string, def int) int {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			if n, err := strconv.Atoi(args[i+1]); err == nil {
				return n
			}
		}
	}
	return def
}

// targets are the ways a load reaches the backends.
type targets struct {
	proxies map[string]*proc.Process // every target but direct
	err     map[string]error         // targets that did not start
}

// startTargets starts every proxy of names (direct needs none) over
// backends; shardproxy runs with sp (see fleet.startProxy).
func (h *harness) startTargets(names []string, redis bool, backends []*proc.Process, sp spOptions) *targets {
	tg := &targets{proxies: map[string]*proc.Process{}, err: map[string]error{}}
	for _, name := range names {
		if name == direct {
			continue
		}
		p, err := h.fleet.startProxy(name, redis, backends, sp)
		if err != nil {
			tg.err[name] = err
			continue
		}
		tg.proxies[name] = p
	}
	return tg
}

// proc returns the process a target's clients talk to.
func (tg *targets) proc(target string, backends []*proc.Process) *proc.Process {
	if target == direct {
		return backends[0]
	}
	return tg.proxies[target]
}

func (tg *targets) stop() {
	for _, p := range tg.proxies {
		p.Stop()
	}
}

// runTarget runs shardbench once against target.
func (h *harness) runTarget(tg *targets, target string, backends []*proc.Process, args []string, d, warmup time.Duration) (sample, error) {
	p := tg.proc(target, backends)
	if p == nil || !p.Running() {
		return sample{}, fmt.Errorf("%s is not running", target)
	}
	if target == direct {
		return h.runShardbench(p.Addr(), args, nil, backends[:1], d, warmup)
	}
	s, err := h.runShardbench(p.Addr(), args, p, backends, d, warmup)
	if err == nil && !p.Running() {
		err = fmt.Errorf("%s exited during the run: %s", target, p.Tail(4))
	}
	return s, err
}
