package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadgen is one run: the shared state its workers read.
type loadgen struct {
	cfg  *config
	ks   *keyspace
	dist chooser
	rec  *recorder
	errs *errorLog
	stop atomic.Bool

	// Set before the load phase starts, read-only afterwards.
	loadStart   time.Time     // the load phase (warmup included) begins
	measureFrom time.Time     // batches starting from here are measured
	stopAt      time.Time     // duration mode: no batch starts from here
	interval    time.Duration // with -rate: one connection's time per batch
	lateRec     *recorder     // with -rate: how late each measured batch started
}

// prefillDepth is the smallest batch the prefill phase uses.
const prefillDepth = 16

// maxDialing bounds concurrent dials, so thousands of connections do not
// overflow the server's accept backlog at once.
const maxDialing = 64

// execute runs cfg's benchmark: dial every connection, prefill, warm up,
// measure. Cancelling ctx ends the load early; what was measured is
// returned. An error means the run could not start (no connection).
func execute(ctx context.Context, cfg *config) (*result, error) {
	g := &loadgen{
		cfg:  cfg,
		ks:   newKeyspace(cfg.Prefix, cfg.Keys, cfg.Value),
		dist: uniform(cfg.Keys),
		rec:  newRecorder(),
		errs: &errorLog{},
	}
	if cfg.Dist == "zipf" {
		g.dist = newZipfian(cfg.Keys, cfg.ZipfTheta)
	}
	stopWatch := context.AfterFunc(ctx, func() { g.stop.Store(true) })
	defer stopWatch()

	workers, err := g.dialAll()
	defer func() {
		for _, w := range workers {
			w.close()
		}
	}()
	if err != nil {
		return nil, err
	}
	res := &result{Config: cfg}
	if cfg.Prefill {
		t := time.Now()
		g.parallel(workers, func(w *worker) {
			var mine []int
			for k := w.id; k < cfg.Keys; k += cfg.Conns {
				mine = append(mine, k)
			}
			w.prefill(mine, max(cfg.Pipeline, prefillDepth))
		})
		res.PrefillS = time.Since(t).Seconds()
	}

	g.loadStart = time.Now()
	g.measureFrom = g.loadStart.Add(cfg.Warmup)
	g.stopAt = g.measureFrom.Add(cfg.Duration)
	if cfg.Rate > 0 {
		g.interval = time.Duration(float64(cfg.Conns*cfg.Pipeline) / cfg.Rate * float64(time.Second))
		g.lateRec = newRecorder()
	}
	startUsage := make(chan usage, 1)
	timer := time.AfterFunc(time.Until(g.measureFrom), func() {
		startUsage <- takeUsage(cfg.ServerPIDs)
	})
	g.parallel(workers, (*worker).load)
	end := time.Now()
	endUsage := takeUsage(cfg.ServerPIDs)
	begin := endUsage // stopped during the warmup: nothing was measured
	if !timer.Stop() {
		begin = <-startUsage
	}

	for _, w := range workers {
		res.add(w.st)
	}
	res.finish(g, end.Sub(g.measureFrom), begin, endUsage)
	return res, nil
}

// dialAll connects every worker, a few at a time.
func (g *loadgen) dialAll() ([]*worker, error) {
	workers := make([]*worker, g.cfg.Conns)
	errs := make([]error, g.cfg.Conns)
	sem := make(chan struct{}, maxDialing)
	var wg sync.WaitGroup
	for i := range workers {
		workers[i] = newWorker(g, i)
		wg.Add(1)
		sem <- struct{}{}
		go func(w *worker) {
			defer wg.Done()
			errs[w.id] = w.dial()
			<-sem
		}(workers[i])
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return workers, fmt.Errorf("connection %d of %d to %s: %w", i+1, g.cfg.Conns, g.cfg.Addr, err)
		}
	}
	return workers, nil
}

// parallel runs f on every worker, each in its own goroutine, and waits.
func (g *loadgen) parallel(workers []*worker, f func(*worker)) {
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { f(w) })
	}
	wg.Wait()
}

// quota returns connection id's share of -requests (0 in duration mode).
func (g *loadgen) quota(id int) int64 {
	n, conns := g.cfg.Requests, int64(g.cfg.Conns)
	q := n / conns
	if int64(id) < n%conns {
		q++
	}
	return q
}

// stopped reports whether the run was cancelled.
func (g *loadgen) stopped() bool { return g.stop.Load() }

func itoa(n int) string { return strconv.Itoa(n) }
