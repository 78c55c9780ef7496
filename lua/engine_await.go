package lua

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
)

// call is one request sent to one backend on behalf of an await.
type call struct {
	backend.Call
	w       *worker
	aw      *await
	be      *beRef
	first   bool // sent to the first pool of the await (AWAIT_FIRST)
	idx     int  // the order it was sent in among its await's calls
	sent    time.Time
	elapsed time.Duration
	doneFn  func(*backend.Call)
	phase   atomic.Uint32 // see callSent
	rc      *rctx         // V2: the request context whose slot this call fills (v2_rctx.go)
	handle  int           // V2: the slot; timerHandle for a wait's timer
	gen     uint64        // V2 timer: the wait it belongs to
}

// Phases of a call, as Done finds it.
const (
	callSent    = iota // with the backend: the reply is queued for the worker
	callSending        // the state's holder is in backend.Send
	callEarly          // answered during Send: the holder handles the reply
)

// onDone runs on whichever goroutine answers the call (a backend's reader
// or writer, Close, or the sender when the call fails at once). It
// timestamps the reply and queues it for the worker goroutine; it never
// runs Lua. A reply that comes while the call is still being sent is left
// to the sender, which holds the state and takes it when the handler
// yields (worker.send): a backend down or marked bad costs no hand-off.
func (c *call) onDone(*backend.Call) {
	c.elapsed = time.Since(c.sent)
	if c.phase.CompareAndSwap(callSending, callEarly) {
		return
	}
	c.w.submit(event{kind: evReply, call: c}, false)
}

// await is a set of calls a coroutine waits on: pool(r) (one call, the
// response itself is the result) or mcp.await (a table of responses).
// It follows memcached's mcplib_await_return exactly.
type await struct {
	t         *task
	mode      int
	waitFor   int // 0: all
	pending   int
	completed bool // the coroutine has been resumed (or never waits)
	single    bool // pool(r)
	borrowed  bool // the calls send the client's own request
	hold      bool // the task finished while borrowed calls were out: answer it when they return
	holdV     glua.LValue
	holdErr   error
	sent      int    // calls sent
	answered  uint64 // bit i: call i (of the first 64) was answered
	logErr    bool   // mcp.await_logerrors
	detail    string
	results   []*response
}

func (w *worker) newCall() *call {
	if n := len(w.callFree); n > 0 {
		c := w.callFree[n-1]
		w.callFree = w.callFree[:n-1]
		return c
	}
	c := &call{w: w}
	c.doneFn = c.onDone
	return c
}

func (w *worker) putCall(c *call) {
	c.Call = backend.Call{}
	c.aw, c.be, c.rc = nil, nil, nil
	if len(w.callFree) < 4096 {
		w.callFree = append(w.callFree, c)
	}
}

func (w *worker) newAwait(t *task, mode, waitFor int) *await {
	var aw *await
	if n := len(w.awFree); n > 0 {
		aw = w.awFree[n-1]
		w.awFree = w.awFree[:n-1]
	} else {
		aw = &await{}
	}
	aw.t, aw.mode, aw.waitFor = t, mode, waitFor
	return aw
}

func (w *worker) putAwait(aw *await) {
	clear(aw.results)
	*aw = await{results: aw.results[:0]}
	if len(w.awFree) < 4096 {
		w.awFree = append(w.awFree, aw)
	}
}

// send sends req to be for aw.
func (w *worker) send(aw *await, be *beRef, req *codec.Request, hint uint32, first bool) {
	c := w.newCall()
	c.aw, c.first, c.idx = aw, first, aw.sent
	aw.sent++
	aw.pending++
	w.sendCall(c, be, req, hint)
}

// sendCall sends req to be as c; its reply comes back to reply.
func (w *worker) sendCall(c *call, be *beRef, req *codec.Request, hint uint32) {
	c.be = be
	c.Req = req
	c.Done = c.doneFn
	c.Over = w.r.overBuffer
	c.sent = time.Now()
	c.phase.Store(callSending)
	be.send(&c.Call, hint, nil)
	if !c.phase.CompareAndSwap(callSending, callSent) {
		w.early = append(w.early, c) // handle runs it after this event
	}
}

// yieldable returns the running task, raising a Lua error when the
// coroutine cannot wait here: outside a handler, or inside a Go function
// that calls back into Lua (pcall, xpcall, table.sort, string.gsub), which
// gopher-lua cannot suspend. (A metamethod that waits cannot be caught
// here; gopher-lua then panics, and recoverPanic answers the request with
// "lua failure".)
func (w *worker) yieldable(L *glua.LState, what string) *task {
	t := w.cur
	if t == nil || t.co == nil || t.co.th != L {
		L.RaiseError("%s can only be called from a route handler", what)
	}
	if w.nested > 0 {
		L.RaiseError("%s cannot wait inside pcall, xpcall, table.sort or string.gsub", what)
	}
	return t
}

// countCalls charges n backend calls to t.
func countCalls(L *glua.LState, t *task, n int) {
	t.calls += n
	if t.calls > maxCallsPerRequest {
		L.RaiseError("a request may make at most %d backend calls", maxCallsPerRequest)
	}
}

// reply handles a completed call: it counts the response towards its
// await and resumes the waiting coroutine when the await is satisfied.
func (w *worker) reply(c *call) {
	if c.rc != nil {
		w.rctxReply(c)
		return
	}
	aw := c.aw
	if t := aw.t; t != nil && t.fast {
		aw.pending--
		w.fastReply(c, t)
		return
	}
	res := w.newResponse(c)
	first, req, idx := c.first, c.Req, c.idx
	if !aw.single && !aw.completed {
		w.takeEarlier(aw, idx, res, first)
	}
	if idx < 64 {
		aw.answered |= 1 << idx
	}
	aw.pending--
	w.putCall(c)
	if aw.logErr && aw.completed && !res.ok() {
		// memcached logs the failures that come after the handler
		// resumed: the ones it never saw.
		w.r.logRequest(req, res, aw.detail)
		w.r.watchRequest(req, res, aw.detail, 0)
	}
	if aw.completed {
		w.lateReply(aw)
		return
	}
	if aw.count(res, first) {
		w.resumeAwait(aw)
	}
}

// takeEarlier handles, ahead of the reply to call idx of aw (mcp.await),
// the replies at hand to the calls of aw sent before it and not answered
// yet, in the order they were sent. memcached's proxy reads its
// backends' replies in the order they arrive; replies that arrive
// together reach the worker from their sockets' readers in any order.
// When res, the reply at hand, would end the wait (ends), which replies
// count depends on that order (a hit that came second must not end the
// wait before the miss that came first), so the replies of those calls
// that come within arrivalWindow are waited for. Only the first 64 calls
// of an await are put in order; ends is asked only of a reply out of it.
func (w *worker) takeEarlier(aw *await, idx int, res *response, first bool) {
	if idx == 0 || idx >= 64 {
		return
	}
	before := uint64(1)<<idx - 1
	if aw.answered&before == before {
		return // in order
	}
	var taken []*call
	have := aw.answered
	take := func(evs []event) {
		for i := range evs {
			if e := &evs[i]; e.kind == evReply && e.call.aw == aw && e.call.rc == nil && e.call.idx < idx {
				taken = append(taken, e.call)
				have |= 1 << e.call.idx
				e.kind = evTaken
			}
		}
	}
	take(w.batch[w.batchNext:])
	ends := have&before != before && aw.ends(res, first)
	for deadline := time.Now().Add(arrivalWindow); ends && have&before != before && time.Now().Before(deadline); {
		runtime.Gosched() // the readers of the replies that came with this one queue them
		w.mu.Lock()
		take(w.events)
		w.mu.Unlock()
	}
	slices.SortFunc(taken, func(a, b *call) int { return a.idx - b.idx })
	for _, e := range taken {
		w.reply(e)
	}
}

// ends reports whether res, a response to the pool sent to first or not,
// would end aw's wait.
func (aw *await) ends(res *response, first bool) bool {
	if aw.waitFor <= 0 {
		return false
	}
	probe := *aw
	good, _ := probe.tally(res, first)
	return probe.waitFor <= 0 || good && probe.waitFor == 1
}

// arrivalWindow is how long a reply that would end an mcp.await waits for
// the replies to the calls sent before it (takeEarlier): replies that
// arrive together (memcached reads them at one wake-up) reach the worker
// well within it, but for a machine loaded far beyond its cores. Only an
// await that a later pool's reply ends before an earlier pool answered
// pays it.
const arrivalWindow = 5 * time.Millisecond

// fastReply answers t, a key of a multi-get sent without Lua
// (routeDirect), with c's reply.
func (w *worker) fastReply(c *call, t *task) {
	aw, reply := c.aw, c.Reply
	w.putCall(c)
	t.aw = nil
	w.putAwait(aw)
	w.finishReply(t, reply)
}

// lateReply handles a reply that comes after aw's coroutine was resumed
// (or when it never waited): the last one frees aw and answers a task
// that finished while its calls were out (await.hold).
func (w *worker) lateReply(aw *await) {
	if aw.pending > 0 {
		return
	}
	if aw.hold {
		t, v, failure := aw.t, aw.holdV, aw.holdErr
		w.putAwait(aw)
		w.finish(t, v, failure)
		return
	}
	w.putAwait(aw)
}

// count adds res, a response to the pool sent to first or not, to aw's
// results as its mode says, and reports whether aw is now satisfied: its
// wait_for reached, or every call answered.
func (aw *await) count(res *response, first bool) bool {
	valid, completing := true, false
	if aw.waitFor > 0 {
		var good bool
		good, valid = aw.tally(res, first)
		if good {
			aw.waitFor--
		}
		completing = aw.waitFor <= 0
	}
	if aw.pending == 0 {
		completing = true
	}
	if valid {
		aw.results = append(aw.results, res)
	}
	return completing
}

// tally reports whether res counts towards aw's wait_for in aw's mode,
// and whether it is one of the results (AWAIT_FIRST keeps the first
// pool's alone). In AWAIT_FASTGOOD a hit ends the wait at once.
func (aw *await) tally(res *response, first bool) (good, valid bool) {
	switch aw.mode {
	case awaitGood:
		return res.hit(), true
	case awaitAny:
		return true, true
	case awaitOK:
		return res.ok(), true
	case awaitFirst:
		return first, first
	case awaitFastGood:
		if !res.ok() {
			return false, true
		}
		if res.hit() {
			aw.waitFor = 0
			return false, true
		}
		return true, true
	}
	return false, true
}

// resumeAwait resumes aw's coroutine with its results: the response
// itself for pool(r), a table of them for mcp.await.
func (w *worker) resumeAwait(aw *await) {
	aw.completed = true
	t := aw.t
	aw.t = nil
	var v glua.LValue
	if aw.single {
		v = w.responseValue(aw.results[0])
	} else {
		tbl := w.L.CreateTable(len(aw.results), 0)
		for _, r := range aw.results {
			tbl.Append(w.responseValue(r))
		}
		v = tbl
	}
	clear(aw.results)
	aw.results = aw.results[:0]
	if aw.pending == 0 {
		w.putAwait(aw)
	}
	t.state, t.aw = taskRunning, nil
	w.run(t, v)
}

// newResponse builds the response of a completed call.
func (w *worker) newResponse(c *call) *response {
	return &response{
		raw: c.Reply.Raw, kind: c.Reply.Kind, err: c.Reply.Err, errKind: codec.ErrServer, hdr: headerOf(c.Req),
		elapsed: c.elapsed, be: c.be, redis: w.r.cfg.Redis,
	}
}

// responseValue wraps res for Lua: in the userdata res carries (one
// allocation for both), or, if that one is taken, in a new one, so each
// call gives a userdata of its own as it always has.
func (w *worker) responseValue(res *response) glua.LValue {
	ud := &res.ud
	if ud.Value != nil {
		ud = w.L.NewUserData()
	}
	*ud = glua.LUserData{Value: res, Env: w.L.Env, Metatable: w.resMT} // as L.NewUserData makes it
	return ud
}
