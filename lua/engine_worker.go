package lua

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/lua/internal/bytecode"
)

// A worker is one Lua state, used by one goroutine at a time (whoever
// holds worker.state), and a goroutine of its own that runs the events
// queued for it. The rules:
//
//   - A client request runs at once on the goroutine that routes it (the
//     session's reader) when the state is free and no request is queued,
//     and that goroutine runs nothing else: not the queue, not other
//     clients' handlers. Otherwise the request is queued. Requests from one
//     client go to one worker, and a request runs inline only when none
//     is queued, so a client's requests start in its order.
//   - A backend reply is always queued: the goroutine that delivers it
//     (a backend's socket reader, its writer, or Close) never runs Lua, so
//     a long handler never holds up the replies behind it on that socket.
//     The one exception is a call answered while the holder of the state is
//     still sending it (a backend marked bad or down fails it at once):
//     the holder takes that reply itself, after the handler yields.
//   - The worker's goroutine, woken by a cap-1 kick after every enqueue,
//     takes the state and drains the queue, in order, until it is empty.
//
// Submitting never blocks. Each request runs its handler in a coroutine,
// which yields whenever it waits for backends, so many requests are in
// flight per state at once. shutdown stops the goroutine and answers
// everything still queued or in flight.

// evKind says what an event carries.
type evKind uint8

const (
	evRequest evKind = iota // a client request to route
	evReply                 // a backend call completed
	evCron                  // a cron is due (worker 0 only)
	evStart                 // a sub-generator's task to start (v2_subgen.go)
	evTaken                 // a reply handled ahead of its turn (takeEarlier): nothing left to do
)

// event is one entry of a worker's queue.
type event struct {
	kind evKind
	hint uint32
	req  *codec.Request
	c    Completion
	call *call
	cron *cronJob
	task *task
	// batch is the caller's backend.Batch of a request run at once by
	// tryRun (RouteBatch); nil on an event that is queued.
	batch *backend.Batch
	// tag is the request's listener tag (RouteTagged), or Config.Tag.
	tag string
}

// coroutine is a Lua thread parked in the runner loop between requests.
type coroutine struct {
	th      *glua.LState
	cancel  context.CancelFunc
	started bool
}

// worker is one Lua state and the queue of work for it. Its fields are
// grouped by who writes them, each group on cache lines of its own: other
// goroutines queue events all the time, and the state's holder should not
// miss its cache for that.
type worker struct {
	r      *Router
	id     int
	L      *glua.LState
	cancel context.CancelFunc
	parser codec.RequestParser
	hooks  *hooks

	runner    *glua.LFunction // loops calling handlers; see newWorker
	reqMT     *glua.LTable
	resMT     *glua.LTable
	proxyMT   *glua.LTable
	proxyCall *glua.LFunction                       // proxyMT's __call: pool(r)
	direct    map[*glua.LFunction]bytecode.PoolCall // attached handlers that are `return pool(r)`
	v2        v2State                               // the V2 API's objects (v2.go)

	kick   chan struct{} // cap 1: wakes loop after an enqueue
	quit   chan struct{} // closed by shutdown: loop returns
	exited chan struct{} // closed when loop has returned

	_     [64]byte
	state sync.Mutex // held while the Lua state is in use

	// The queue, written by any goroutine.
	_       [64]byte
	mu      sync.Mutex // guards the fields below but the atomics
	events  []event
	stopped bool
	queued  atomic.Int32 // requests queued and not yet started
	pending atomic.Int32 // len(events), written under mu

	// Guarded by state.
	_         [64]byte
	spare     []event
	batch     []event // the events drainQueue is handling, from batchNext on still to come
	batchNext int
	early     []*call // calls answered while being sent, for the holder
	starts    []*task // sub-generator tasks to start after the running event
	cur       *task   // the task whose coroutine is running
	coFree    []*coroutine
	taskFree  []*task
	awFree    []*await
	callFree  []*call
	active    *task // tasks started and not finished, linked by next/prev
	out       []byte
	hdr       codec.Request // scratch for AppendReply
	resumeTop int           // the main state's stack top before a Resume
	closed    bool
	stopping  bool   // shutdown is answering the tasks left
	inCron    bool   // a cron's function is running (mcp.server_stats)
	tag       string // the listener tag of the request being started
	nested    int    // Go functions that call back into Lua, running now (pcall, ...)

	// The watchdog stops a run that takes longer than MaxRun or
	// allocates more than MaxAlloc (engine_guard.go): it counts the ticks during
	// which the same run is in progress. runState is the run's number
	// times 8, plus runActive while it runs, plus runStopped (and
	// runMemory when memory was the reason) once the watchdog has
	// cancelled it; runCo holds the cancel function of its context.
	_         [64]byte
	runState  atomic.Uint64
	runCo     atomic.Pointer[coroutine]
	seen      uint64     // the watchdog's: the run state it saw last
	strikes   int        // the watchdog's: ticks it has seen that run
	allocBase heapSample // the watchdog's: the process's heap at the first strike

	// Read by the direct way of Route (direct_fast.go).
	_      [64]byte
	luaGen atomic.Uint64 // Lua runs and request contexts freed so far
	fast   fastTable
}

// runnerSource is the bottom of every coroutine: it calls a handler,
// hands its result to done (which yields it to the worker) and receives
// the next handler and request from the next resume, so one coroutine
// serves many requests.
const runnerSource = `local done = ...
return function(f, r)
  while true do
    f, r = done(f(r))
  end
end`

// tryRun runs the request ev now, on the calling goroutine, if the state
// is free and no request is queued (one of them may be the same client's,
// and must start first), and reports whether it did. It runs ev alone:
// what is queued, and what its run queues, is the worker goroutine's.
func (w *worker) tryRun(ev *event) bool {
	if !w.state.TryLock() {
		return false
	}
	if w.queued.Load() > 0 {
		w.state.Unlock()
		return false
	}
	w.handle(ev)
	w.state.Unlock()
	return true
}

// submit runs a request now if tryRun can, else queues ev for the worker
// goroutine; a reply is always queued. A request beyond the queue limit
// (limit true) is refused; submit reports whether ev was taken.
func (w *worker) submit(ev event, limit bool) bool {
	if ev.kind == evRequest && w.tryRun(&ev) {
		return true
	}
	if ev.batch != nil {
		// The worker's goroutine runs ev: the client's calls staged so
		// far go first, and ev must not use the caller's batch.
		ev.batch.Flush()
		ev.batch = nil
	}
	w.mu.Lock()
	if w.stopped || (limit && int(w.queued.Load()) >= w.r.cfg.Queue) {
		w.mu.Unlock()
		return false
	}
	if ev.kind == evRequest {
		w.queued.Add(1)
	}
	w.events = append(w.events, ev)
	w.pending.Add(1)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default: // a kick is pending: loop drains after it, ev included
	}
	return true
}

// loop is the worker's goroutine: at each kick it takes the state and
// drains the queue, until shutdown.
func (w *worker) loop() {
	defer close(w.exited)
	for {
		select {
		case <-w.kick:
		case <-w.quit:
			return
		}
		w.state.Lock()
		w.drainQueue()
		w.state.Unlock()
	}
}

// drainQueue handles queued events until there are none. A request stays
// counted in queued until it has started (its handler has sent its first
// calls, or finished): tryRun and routeFast wait for that.
func (w *worker) drainQueue() {
	for w.pending.Load() > 0 {
		w.mu.Lock()
		batch := w.events
		w.events = w.spare[:0]
		w.pending.Store(0)
		w.mu.Unlock()
		if len(batch) == 0 {
			w.spare = batch
			return
		}
		w.batch = batch
		for i := range batch {
			w.batchNext = i + 1
			w.handle(&batch[i])
			if batch[i].kind == evRequest {
				w.queued.Add(-1) // started: what it sends is on its way
			}
		}
		w.batch, w.batchNext = nil, 0
		clear(batch)
		w.spare = batch[:0]
	}
}

// handle processes ev, then the replies to calls that were answered while
// its run sent them (worker.send) and the sub-generator tasks it started.
// The caller holds the state.
func (w *worker) handle(ev *event) {
	w.handleOne(ev)
	for len(w.early) > 0 || len(w.starts) > 0 {
		for i := 0; i < len(w.early); i++ { // a resumed handler may add more
			c := w.early[i]
			w.early[i] = nil
			w.handleOne(&event{kind: evReply, call: c})
		}
		w.early = w.early[:0]
		for i := 0; i < len(w.starts); i++ {
			t := w.starts[i]
			w.starts[i] = nil
			w.handleOne(&event{kind: evStart, task: t})
		}
		w.starts = w.starts[:0]
	}
}

// handleOne processes one event. The caller holds the state.
func (w *worker) handleOne(ev *event) {
	if w.closed {
		if ev.kind == evRequest {
			w.r.settle(int64(len(ev.req.Wire)))
			w.r.reject(ev.req, ev.c, errClosed.Error())
		}
		return
	}
	defer w.recoverPanic()
	switch ev.kind {
	case evRequest:
		w.tag = ev.tag
		w.startRequest(ev.req, ev.hint, ev.c, ev.batch)
	case evReply:
		w.reply(ev.call)
	case evCron:
		w.runCron(ev.cron)
	case evStart:
		w.startChild(ev.task)
	}
}

// recoverPanic keeps a panic in handling one event from taking the process
// down with the state held (gopher-lua panics when a metamethod waits for a
// backend): it is logged, the main state's thread and stack are put back,
// and the task whose coroutine was running is answered "lua failure".
func (w *worker) recoverPanic() {
	p := recover()
	if p == nil {
		return
	}
	w.r.log.Error("lua worker panic", "err", fmt.Sprint(p))
	w.L.G.CurrentThread = w.L.G.MainThread
	w.L.SetTop(w.resumeTop)
	if t := w.cur; t != nil {
		w.cur = nil
		if t.co != nil {
			t.co.cancel()
			t.co = nil
		}
		w.finish(t, glua.LNil, errLuaFailure)
	}
}

// shutdown stops the worker goroutine, then handles what is still queued,
// answers every task still active and closes the state.
func (w *worker) shutdown() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	close(w.quit)
	<-w.exited
	w.state.Lock()
	w.drainQueue()
	w.stopping = true
	for w.active != nil {
		t := w.active
		if t.co != nil {
			t.co.cancel()
			t.co = nil
		}
		w.finish(t, glua.LNil, errClosed)
	}
	w.closed = true
	w.cancel()
	w.L.Close()
	w.state.Unlock()
}

// getCoroutine returns a parked coroutine or a new one.
func (w *worker) getCoroutine() *coroutine {
	if n := len(w.coFree); n > 0 {
		co := w.coFree[n-1]
		w.coFree = w.coFree[:n-1]
		return co
	}
	th, cancel := w.L.NewThread()
	return &coroutine{th: th, cancel: cancel}
}

// putCoroutine parks co for reuse; it sits in the runner loop.
func (w *worker) putCoroutine(co *coroutine) {
	if len(w.coFree) < 1024 {
		w.coFree = append(w.coFree, co)
		return
	}
	co.cancel()
}

// run starts or resumes t's coroutine with args (the handler and the
// request on a start, the awaited result on a resume) and acts on how it
// stops: a wait for backends, the handler's result, or an error.
func (w *worker) run(t *task, args ...glua.LValue) {
	co := t.co
	var fn *glua.LFunction
	if !co.started {
		fn, co.started = w.runner, true
	}
	w.cur = t
	w.resumeTop = w.L.GetTop()
	w.luaGen.Add(1) // the script may change what a direct handler calls
	gen := w.beginRun(co)
	st, err, ret := w.L.Resume(co.th, fn, args...)
	stop := w.endRun(gen)
	timedOut := stop != nil
	w.cur = nil
	switch {
	case err != nil:
		t.co = nil // the thread is dead
		co.cancel()
		w.scriptError(t, err, stop)
	case st == glua.ResumeYield && t.state == taskDone:
		t.co = nil
		if timedOut { // finished just in time; the watchdog cancels its context
			co.cancel()
		} else {
			w.putCoroutine(co)
		}
		w.finish(t, ret[0], nil)
	case st == glua.ResumeYield && t.state == taskWaiting && timedOut:
		// Waiting, but its context is being cancelled: it cannot be resumed.
		t.co = nil
		w.scriptError(t, errors.New("stopped while waiting"), stop)
	case st == glua.ResumeYield && t.state == taskWaiting:
		// parked until the await completes
	default:
		t.co = nil
		co.cancel()
		w.r.logScriptError("lua handler failed", "the handler's coroutine ended unexpectedly")
		w.finish(t, glua.LNil, errLuaFailure)
	}
}

// scriptError answers t after its handler raised an error or was stopped
// (stop, the watchdog's reason, is not nil).
func (w *worker) scriptError(t *task, err error, stop *stopError) {
	msg := luaMessage(err)
	if stop != nil {
		w.r.logScriptError("lua handler stopped", stop.explain(msg))
		w.finish(t, glua.LNil, stop.wire())
		return
	}
	w.r.logScriptError("lua handler failed", msg)
	w.finish(t, glua.LNil, errLuaFailure)
}

// handlerDone is the runner's done(...): it records that the handler returned and
// yields its result to the worker.
func (w *worker) handlerDone(L *glua.LState) int {
	if t := w.cur; t != nil {
		t.state = taskDone
	}
	return L.Yield(L.Get(1))
}
