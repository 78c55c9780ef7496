package main

import (
	"fmt"
	"net"
	"sync"
	"time"

	"shardproxy/internal/proc"
)

// idleResult is the memory cost of idle client connections to one proxy.
type idleResult struct {
	Target     string  `json:"target"`
	Conns      int     `json:"conns"`
	BeforeKiB  int64   `json:"before_kib"` // VmRSS with no client
	AfterKiB   int64   `json:"after_kib"`  // VmRSS with Conns idle clients
	PeakKiB    int64   `json:"peak_kib"`   // VmHWM afterwards
	PerConnKiB float64 `json:"per_conn_kib"`
	FDs        int     `json:"fds"` // the proxy's open descriptors with the clients connected
	Err        string  `json:"error,omitempty"`
}

// runIdle opens n idle client connections to a fresh shardproxy and a fresh
// nutcracker (memcache pools over 4 servers), one proxy at a time, and
// reports the RSS each connection costs.
func (h *harness) runIdle(n int) []idleResult {
	var out []idleResult
	backends := h.fleet.backends(false, 4)
	for _, target := range []string{shardproxy, nutcracker} {
		res := idleResult{Target: target, Conns: n}
		if err := h.measureIdle(target, backends, &res); err != nil {
			res.Err = err.Error()
			h.fail("idle %s: %v", target, err)
		}
		out = append(out, res)
	}
	return out
}

func (h *harness) measureIdle(target string, backends []*proc.Process, res *idleResult) error {
	p, err := h.fleet.startProxy(target, false, backends, benchSP)
	if err != nil {
		return fmt.Errorf("did not start: %w", err)
	}
	defer p.Stop()
	// One request first, so that the baseline includes the backend
	// connections and the first session's setup.
	if err := proc.Expect(p.Addr(), "get idle-baseline\r\n", "END"); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	rss := func() (int64, error) { return proc.Status(p.Pid(), "VmRSS") }
	if res.BeforeKiB, err = settle(5*time.Second, 0.002, rss); err != nil {
		return err
	}
	conns, err := dialIdle(p.Addr(), res.Conns)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if err != nil {
		return err
	}
	// Wait until the proxy holds every connection, then until its RSS
	// stops moving.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res.FDs, err = openFDs(p.Pid()); err != nil {
			return err
		}
		if res.FDs >= res.Conns || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.FDs < res.Conns {
		return fmt.Errorf("the proxy holds %d descriptors, fewer than the %d clients", res.FDs, res.Conns)
	}
	if res.AfterKiB, err = settle(10*time.Second, 0.002, rss); err != nil {
		return err
	}
	// Every connection must still be served, or the figure means nothing.
	if err := proc.Expect(p.Addr(), "get idle-after\r\n", "END"); err != nil {
		return fmt.Errorf("proxy unresponsive with %d idle clients: %w", res.Conns, err)
	}
	res.PeakKiB, _ = proc.Status(p.Pid(), "VmHWM")
	res.PerConnKiB = float64(res.AfterKiB-res.BeforeKiB) / float64(res.Conns)
	return nil
}

// dialIdle opens n connections to addr, 64 at a time.
func dialIdle(addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conns[i], errs[i] = net.DialTimeout("tcp", addr, 10*time.Second)
		})
	}
	wg.Wait()
	var out []net.Conn
	var first error
	for i, c := range conns {
		if errs[i] != nil && first == nil {
			first = fmt.Errorf("idle connection %d of %d: %w", i+1, n, errs[i])
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out, first
}

// luaIdle is the memory an idle Lua worker state costs: shardproxy with a
// Lua pool (the V2 route) started with -threads 1 (one worker state) and
// with -threads Workers (Workers states, one per thread), no client.
type luaIdle struct {
	Workers      int     `json:"workers"`
	OneKiB       int64   `json:"one_kib"`  // VmRSS with one worker state
	ManyKiB      int64   `json:"many_kib"` // VmRSS with Workers states
	PerWorkerKiB float64 `json:"per_worker_kib"`
	Err          string  `json:"error,omitempty"`
}

// luaIdleWorkers is how many worker states the second proxy runs.
const luaIdleWorkers = 9

// runLuaIdle measures luaIdle.
func (h *harness) runLuaIdle() luaIdle {
	res := luaIdle{Workers: luaIdleWorkers}
	rss := func(threads int) (int64, error) {
		p, err := h.fleet.startProxy(shardproxyV2, false, h.fleet.backends(false, 1), spOptions{threads: threads})
		if err != nil {
			return 0, fmt.Errorf("did not start: %w", err)
		}
		defer p.Stop()
		return settle(5*time.Second, 0.002, func() (int64, error) { return proc.Status(p.Pid(), "VmRSS") })
	}
	var err error
	if res.OneKiB, err = rss(1); err == nil {
		res.ManyKiB, err = rss(luaIdleWorkers)
	}
	if err != nil {
		res.Err = err.Error()
		h.fail("idle lua workers: %v", err)
		return res
	}
	res.PerWorkerKiB = float64(res.ManyKiB-res.OneKiB) / float64(luaIdleWorkers-1)
	return res
}

// luaIdleText renders luaIdle for the terminal and the report.
func luaIdleText(r luaIdle) string {
	if r.Err != "" {
		return "idle Lua worker states: " + r.Err + "\n"
	}
	return fmt.Sprintf("idle Lua worker states: VmRSS %s with 1, %s with %d: %.0f KiB per worker state "+
		"(RSS, so the Go runtime's per-thread part is in it; the lua package's BenchmarkIdleWorkerMemory gives the heap alone)\n",
		fmtKiB(r.OneKiB), fmtKiB(r.ManyKiB), r.Workers, r.PerWorkerKiB)
}
