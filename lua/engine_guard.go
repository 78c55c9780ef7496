package lua

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// Route code is bounded in time and in memory, per run: from a handler's
// start or resume to its next wait or its end, one call of a function
// generator or a cron, one stage of the setup. gopher-lua can only stop
// running code through the context of its state, which it checks between
// two VM instructions, so every bound ends in cancelling that context:
//
//   - At request time, nothing is done per run but two atomic stores
//     (beginRun, endRun); the router's watchdog goroutine looks at each
//     worker every tick and cancels the run it has seen in progress for
//     MaxRun, or during which the process allocated more than MaxAlloc
//     since it first saw it. The cost on the hot path is gopher-lua's
//     check of the context between instructions (about 2.5ns each, 15% of
//     a handler that computes, nothing measurable on one that calls a
//     pool; BenchmarkRouteCPU/compute).
//   - At setup, each run has a context with a deadline (SetupTimeout) and
//     a goroutine that polls the allocations as the watchdog does.
//
// Memory is measured as the growth of the process's heap (runtime/metrics
// heap objects and live bytes; allocCounter.over), since neither Go nor
// gopher-lua count it per state: a run that spans ticks is charged with
// the heap's growth meanwhile. Garbage does not count: gopher-lua boxes
// numbers, so a loop that only computes allocates hundreds of MB a
// second, which the collector takes back as it goes; counted as
// allocations (/gc/heap/allocs:bytes), such a loop was stopped as greedy
// before it was stopped as slow, and a long setup (a reload while the
// proxy is busy) could be refused for the proxy's own churn. What counts is the growth of the live heap (a table
// a run fills, a string it doubles), which the watchdog has the collector
// measure once the heap's objects grew by the budget. A handler runs
// microseconds and spans no tick; one that does shares the measure with
// the rest of the process, whose heap stays far below the budget for the
// few milliseconds a tick lasts. The `..`
// operator concatenates in one instruction, which cannot be interrupted:
// a run that doubles a string is stopped at the first instruction after
// the tick that saw it over budget, so what it holds at most is a few
// times MaxAlloc, never the host's memory.

// Defaults of the bounds.
const (
	// DefaultMaxAlloc is how many bytes one run of route code may
	// allocate.
	DefaultMaxAlloc = 256 << 20
	// guardTick is the watchdog's longest tick: how late it sees a run
	// over its memory budget.
	guardTick = 10 * time.Millisecond
)

// Bits of worker.runState; a run's number counts in steps of runStep.
const (
	runActive  = 1
	runStopped = 2
	runMemory  = 4
	runStep    = 8
)

// stopError is why the watchdog stopped a run.
type stopError struct {
	memory bool          // allocated more than limit bytes; else ran longer than d
	d      time.Duration // MaxRun or SetupTimeout
	limit  int64         // MaxAlloc
}

// explain prefixes msg, the error gopher-lua raised where the run was
// stopped ("routes.lua:12: context canceled"), with the reason.
func (e *stopError) explain(msg string) string {
	return e.Error() + ": " + msg
}

func (e *stopError) Error() string {
	if e.memory {
		return fmt.Sprintf("allocated more than %s", sizeString(e.limit))
	}
	return "ran longer than " + e.d.String()
}

// wire is what the client is told.
func (e *stopError) wire() error {
	if e.memory {
		return errLuaMemory
	}
	return errLuaTimeout
}

// sizeString renders n bytes in MiB when it is a whole number of them.
func sizeString(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// beginRun marks the start of a run the watchdog watches; co.cancel stops
// it. It returns the run's number for endRun. The caller holds the state.
func (w *worker) beginRun(co *coroutine) uint64 {
	w.runCo.Store(co)
	gen := w.runState.Load()&^(runStep-1) + runStep
	w.runState.Store(gen | runActive)
	return gen
}

// endRun marks the end of run gen and returns why the watchdog stopped it,
// or nil. A stopped run's context is cancelled (or being cancelled): it
// cannot run Lua again.
func (w *worker) endRun(gen uint64) *stopError {
	s := w.runState.Swap(gen)
	if s&runStopped == 0 {
		return nil
	}
	stop := &stopError{memory: s&runMemory != 0, d: w.r.cfg.MaxRun, limit: w.r.cfg.MaxAlloc}
	if stop.memory {
		w.r.memoryStops.Add(1)
	} else {
		w.r.timeouts.Add(1)
	}
	return stop
}

// callBounded calls fn with args on the worker's main thread (a cron, a
// function generator at request time), watched by the watchdog as a
// handler's run is. The caller holds the state.
func (w *worker) callBounded(fn glua.LValue, nret int, args ...glua.LValue) ([]glua.LValue, error) {
	L := w.L
	base := L.Context()
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	L.SetContext(ctx)
	defer L.SetContext(base)
	top := L.GetTop()
	w.luaGen.Add(1) // Lua runs: what a direct handler calls may change (direct_fast.go)
	gen := w.beginRun(&coroutine{cancel: cancel})
	err := L.CallByParam(glua.P{Fn: fn, NRet: nret, Protect: true}, args...)
	if stop := w.endRun(gen); stop != nil && err != nil {
		L.SetTop(top)
		return nil, &boundError{err: err, stop: stop}
	}
	if err != nil {
		return nil, err
	}
	out := make([]glua.LValue, 0, nret)
	for i := top + 1; i <= L.GetTop(); i++ {
		out = append(out, L.Get(i))
	}
	L.SetTop(top)
	return out, nil
}

// boundError is a run stopped by its time or memory bound.
type boundError struct {
	err  error
	stop *stopError
}

func (e *boundError) Error() string { return e.err.Error() }

func (e *boundError) Unwrap() error { return e.err }

// watchdog stops the runs that take longer than MaxRun or allocate more
// than MaxAlloc, until done is closed. It reads the allocation counter
// only when a run spans a tick.
func (r *Router) watchdog(done <-chan struct{}) {
	tick := min(max(r.cfg.MaxRun/4, time.Millisecond), guardTick)
	limit := max(int(r.cfg.MaxRun/tick), 1) // ticks that make MaxRun
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var allocs allocCounter
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
		}
		allocs.stale = true
		for _, w := range r.workers {
			s := w.runState.Load()
			if s&runActive == 0 || s != w.seen {
				w.seen, w.strikes = s, 0
				continue
			}
			w.strikes++
			var why uint64
			switch {
			case w.strikes == 1:
				w.allocBase = allocs.read()
			case allocs.over(&w.allocBase, uint64(r.cfg.MaxAlloc)):
				why = runStopped | runMemory
			case w.strikes > limit:
				why = runStopped
			}
			// The run was still s: runCo is its coroutine, which the
			// worker will not reuse.
			if co := w.runCo.Load(); why != 0 && co != nil && w.runState.CompareAndSwap(s, s|why) {
				co.cancel()
			}
		}
	}
}

// heapSample is the process's heap at one moment.
type heapSample struct {
	objects uint64 // the heap's objects, live or not yet swept
	live    uint64 // live bytes as the last collection marked them
}

// allocCounter reads the process's heap at most once per tick: again only
// after stale is set (a new counter reads at once).
type allocCounter struct {
	sample []metrics.Sample
	value  heapSample
	stale  bool
}

func (a *allocCounter) read() heapSample {
	if a.stale || a.sample == nil {
		if a.sample == nil {
			a.sample = []metrics.Sample{
				{Name: "/memory/classes/heap/objects:bytes"},
				{Name: "/gc/heap/live:bytes"},
			}
		}
		metrics.Read(a.sample)
		a.value = heapSample{a.sample[0].Value.Uint64(), a.sample[1].Value.Uint64()}
		a.stale = false
	}
	return a.value
}

// over reports whether the heap grew by more than limit bytes since base
// in what a run keeps, not in garbage. It lowers base to the heap where
// the heap is lower (garbage of earlier runs, swept during this one, must
// not hide its growth). Live bytes beyond limit tell at once; they are
// known only at each collection, which on a big heap may be far apart,
// so objects (live or not yet swept) beyond limit make it collect now
// and look at what stays live. A run that only churns costs a collection
// per limit bytes it allocates while it spans ticks (gopher-lua boxes
// numbers: a loop that computes allocates hundreds of MB a second); one
// that keeps what it allocates is seen by the next.
func (a *allocCounter) over(base *heapSample, limit uint64) bool {
	h := a.read()
	base.objects, base.live = min(base.objects, h.objects), min(base.live, h.live)
	if h.live-base.live > limit {
		return true
	}
	if h.objects-base.objects <= limit {
		return false
	}
	runtime.GC()
	a.stale = true
	h = a.read()
	base.objects, base.live = h.objects, min(base.live, h.live)
	return h.live-base.live > limit
}

// guardSetup cancels a setup run (ctx) that allocates more than limit
// bytes, polling every guardTick until ctx is done, and reports through
// the returned function, once ctx is done, whether it did.
func guardSetup(ctx context.Context, cancel context.CancelFunc, limit int64) func() bool {
	stopped := make(chan bool, 1)
	go func() {
		var a allocCounter
		base := a.read()
		t := time.NewTicker(guardTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				stopped <- false
				return
			case <-t.C:
			}
			a.stale = true
			if a.over(&base, uint64(limit)) {
				cancel()
				stopped <- true
				return
			}
		}
	}()
	return func() bool { return <-stopped }
}
