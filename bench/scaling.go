package main

import (
	"fmt"
	"strconv"

	"shardproxy/internal/proc"
)

// scaling is one scaling run: one figure of merit against one variable.
type scaling struct {
	Name    string   `json:"name"`  // file name stem: scaling-NAME-ops.png
	Title   string   `json:"title"` // what is varied
	XLabel  string   `json:"x_label"`
	Load    string   `json:"load"` // the fixed part, in words
	Targets []string `json:"targets"`
	Points  []point  `json:"points"`
	// LogOps draws throughput on a log scale (it spans orders of magnitude).
	LogOps bool `json:"log_ops,omitempty"`
}

// point is one target's sample at one value of the variable.
type point struct {
	X      float64 `json:"x"`
	Target string  `json:"target"`
	Sample sample  `json:"sample"`
	// RSSKiB is the proxy's peak RSS (VmHWM) over the point, which it
	// alone ran (every point starts fresh proxies); for direct, the
	// server's RSS after it.
	RSSKiB int64  `json:"rss_kib,omitempty"`
	Err    string `json:"error,omitempty"`
}

// scalingPlan describes the three scaling runs: the variable's values and
// how a value becomes a load.
type scalingPlan struct {
	name, title, xlabel, load string
	logOps                    bool
	targets                   []string
	xs                        []int
	// setup returns shardbench's flags and the backends for value x.
	setup func(h *harness, x int) (args []string, backends []*proc.Process, err error)
}

// The backends series starts up to 100 memcached processes (one thread,
// 64 MiB each, allocated as used): idle ones cost the machine little, and
// real servers show what a proxy pays per server (connections, pollers,
// the ketama ring) better than one server behind many ports would.
func scalingPlans(quick bool) []scalingPlan {
	conns := []int{10, 50, 200, 1000, 2000, 10000}
	servers := []int{1, 2, 4, 10, 32, 100}
	depths := []int{1, 4, 16, 64}
	values := []int{100, 1024, 4096, 16384, 65536, 262144}
	if quick {
		conns, servers, depths, values = []int{50, 1000}, []int{1, 10}, []int{1, 16}, []int{100, 262144}
	}
	return []scalingPlan{
		{name: "conns", title: "client connections", xlabel: "client connections",
			load:    "memcache text, pipeline 1, 100 B values, set:get 1:9, 10,000 keys, 4 servers",
			targets: targetNames, xs: conns,
			setup: func(h *harness, x int) ([]string, []*proc.Process, error) {
				args := []string{"-proto", "text", "-conns", strconv.Itoa(x), "-pipeline", "1",
					"-value", "100", "-ratio", "1:9", "-keys", "10000"}
				return args, h.fleet.backends(false, 4), nil
			}},
		{name: "backends", title: "backend servers", xlabel: "memcached servers behind the proxy",
			load:    "memcache text, 50 connections, pipeline 16, 100 B values, set:get 1:9, 10,000 keys",
			targets: []string{shardproxy, nutcracker}, xs: servers,
			setup: func(h *harness, x int) ([]string, []*proc.Process, error) {
				b, err := h.memcachedServers(x)
				return common("text", "-pipeline", "16"), b, err
			}},
		{name: "pipeline", title: "pipeline depth", xlabel: "requests in flight per connection (pipeline)",
			load:    "memcache text, 50 connections, 100 B values, set:get 1:9, 10,000 keys, 4 servers",
			targets: targetNames, xs: depths,
			setup: func(h *harness, x int) ([]string, []*proc.Process, error) {
				return common("text", "-pipeline", strconv.Itoa(x)), h.fleet.backends(false, 4), nil
			}},
		{name: "values", title: "value size", xlabel: "value size (bytes)", logOps: true,
			load: "memcache text, 50 connections, pipeline 1, set:get 1:9, 4 servers, " +
				"10,000 keys or 64 MiB of values, whichever is fewer",
			targets: targetNames, xs: values,
			setup: func(h *harness, x int) ([]string, []*proc.Process, error) {
				keys := max(100, min(10000, (64<<20)/x))
				args := []string{"-proto", "text", "-conns", "50", "-pipeline", "1", "-value", strconv.Itoa(x),
					"-ratio", "1:9", "-keys", strconv.Itoa(keys)}
				return args, h.fleet.backends(false, 4), nil
			}},
	}
}

// runScaling runs one plan, one sample per target and value.
func (h *harness) runScaling(sp scalingPlan) *scaling {
	sc := &scaling{Name: sp.name, Title: sp.title, XLabel: sp.xlabel, Load: sp.load, Targets: sp.targets,
		LogOps: sp.logOps}
	for i, x := range sp.xs {
		h.logf("  %s = %d", sp.title, x)
		if err := h.fleet.flush(); err != nil {
			h.fail("scaling %s: %v", sp.name, err)
			return sc
		}
		args, backends, err := sp.setup(h, x)
		if err != nil {
			h.fail("scaling %s %d: %v", sp.name, x, err)
			continue
		}
		tg := h.startTargets(sp.targets, false, backends, benchSP)
		for j := range sp.targets {
			target := sp.targets[(i+j)%len(sp.targets)]
			pt := point{X: float64(x), Target: target}
			if err := tg.err[target]; err != nil {
				pt.Err = "did not start: " + err.Error()
			} else if s, err := h.runTarget(tg, target, backends, args, h.opt.scaleDuration, h.opt.warmup); err != nil {
				pt.Err = err.Error()
			} else {
				pt.Sample = s
				pt.RSSKiB = rssOf(tg.proc(target, backends), target)
				if s.Errors > 0 {
					h.fail("scaling %s %d: %s: %d wrong replies: %v", sp.name, x, target, s.Errors, s.ErrorNotes)
				}
			}
			if pt.Err != "" {
				h.fail("scaling %s %d: %s: %s", sp.name, x, target, pt.Err)
			}
			sc.Points = append(sc.Points, pt)
		}
		tg.stop()
	}
	return sc
}

// rssOf returns a scaling point's memory figure: a proxy's VmHWM (it
// ran this point only), a direct server's VmRSS (it serves every point).
func rssOf(p *proc.Process, target string) int64 {
	if p == nil || !p.Running() {
		return 0
	}
	field := "VmHWM"
	if target == direct {
		field = "VmRSS"
	}
	kib, _ := proc.Status(p.Pid(), field)
	return kib
}

// memcachedServers returns n memcached backends: the main ones first, then
// extra single-threaded ones started for the backends scaling run (stopped
// when the fleet closes).
func (h *harness) memcachedServers(n int) ([]*proc.Process, error) {
	out := append([]*proc.Process(nil), h.fleet.mc[:min(n, len(h.fleet.mc))]...)
	for len(h.extraMC) < n-len(out) {
		p, err := h.fleet.startMemcached(1, 64)
		if err != nil {
			return nil, fmt.Errorf("extra memcached: %w", err)
		}
		h.extraMC = append(h.extraMC, h.fleet.track(p))
	}
	for _, p := range h.extraMC[:n-len(out)] {
		if err := proc.Expect(p.Addr(), "flush_all\r\n", "OK"); err != nil {
			return nil, err
		}
	}
	return append(out, h.extraMC[:n-len(out)]...), nil
}

// series returns target's points in x order, skipping failed ones.
func (sc *scaling) series(target string) []point {
	var out []point
	for _, p := range sc.Points {
		if p.Target == target && p.Err == "" {
			out = append(out, p)
		}
	}
	return out
}
