package lua

import (
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
	"shardproxy/lua/internal/bytecode"
)

// rctx is a request context (memcached's mcp.rcontext): one slot per
// handle of its generator, and the wait the handler is in. It serves one
// request at a time; it goes back to its generator's free list once the
// handler has returned and every call it sent has come back.
//
// The protocol follows memcached's proxy_luafgen.c. rctx:enqueue only
// marks slots queued; the queued slots are sent when the handler next
// waits (enqueue_and_wait, wait_cond, wait_handle), in handle order. A
// slot's result is kept, with its flags (RES_GOOD: ok and not a miss,
// RES_OK: a miss, RES_ANY plus an error bit: an error reply or no reply),
// whether or not anyone waits for it; a wait counts the slots that
// satisfy its mode (mcp_process_rctx_wait) and resumes the handler when
// enough did, when nothing is left in flight, or at once when
// WAIT_FASTGOOD sees a good result.
type rctx struct {
	fg    *funcgen
	ud    *glua.LUserData  // the context as the generator got it
	fn    *glua.LFunction  // the handler the generator returned for this context
	dir   bytecode.Enqueue // what bytecode.MatchEnqueueHandler found of fn (direct_v2.go)
	slots []slot

	t *task // the request being served; nil once its handler finished
	// cfd is the client connection's number (rctx:cfd()) from the start
	// of a request until rc is idle again: callbacks and logs of replies
	// that come after the handler returned still name the client.
	cfd     uint32
	serving bool
	pinned  bool // held by a parent context's slot, not by fg's free list
	pending int  // calls in flight
	mode    int  // waitIdle when not waiting
	count   int  // how many counted slots end the wait
	done    int  // slots counted so far
	handle  int  // the slot a waitHandle wait is for
	gen     uint64
	timer   *time.Timer // the running wait's timeout
	timerC  *call
	clone   *codec.Request // the client's request, copied once for the calls
	cloneOf *codec.Request
	objs    []glua.LValue // what rctx:request_new and response_new made, for its life
	// cloneStore is clone's storage, kept from request to request: rc is
	// reused only once every call it sent has come back, and a backend
	// reads a call's request no more once it has answered it.
	cloneStore codec.Request
}

// maxKeptClone bounds the request copy a context keeps for its next
// request; a bigger one (a large set) is left to the garbage collector.
const maxKeptClone = 16 << 10

// slot is one handle's queue entry in a request context.
type slot struct {
	pool  *pool           // a pool handle's pool
	child *funcgen        // a sub-generator handle's generator (v2_subgen.go)
	sub   *rctx           // child's context pinned to this slot (v2_subgen.go)
	cb    *glua.LFunction // rctx:handle_set_cb's callback (v2_rctx_cb.go)
	state uint8
	flags int
	rq    *request    // the request queued to it
	rqv   glua.LValue // rq's Lua value, for the callback
	res   glua.LValue // its response once complete
}

// Slot states (enum mcp_rqueue_state).
const (
	slotIdle     = iota
	slotQueued   // enqueued, not sent yet
	slotActive   // sent, no reply yet
	slotComplete // answered, not counted by a wait
	slotWaited   // answered and counted by a wait
)

// timerHandle marks a call that is a wait's timer, not a backend call.
const timerHandle = -1

// reset makes rc idle for its next request.
func (rc *rctx) reset() {
	for i := range rc.slots {
		s := &rc.slots[i]
		s.state, s.flags, s.rq, s.rqv, s.res = slotIdle, 0, nil, nil, nil
	}
	rc.t, rc.mode, rc.count, rc.done = nil, waitIdle, 0, 0
	rc.cfd, rc.serving = 0, false
	rc.clone, rc.cloneOf = nil, nil
	for _, v := range rc.objs {
		resetObject(v)
	}
	if cap(rc.cloneStore.Buf) > maxKeptClone {
		rc.cloneStore = codec.Request{}
	}
}

// rctxRetire detaches rc from its task, which has been answered, and
// frees it unless calls are still out.
func (w *worker) rctxRetire(rc *rctx) {
	rc.t = nil
	w.stopWait(rc)
	if rc.pending == 0 {
		w.putRctx(rc)
	}
}

// stopWait leaves the current wait, if any, and cancels its timer.
func (w *worker) stopWait(rc *rctx) {
	rc.mode, rc.count = waitIdle, 0
	rc.gen++
	if rc.timer != nil {
		if rc.timer.Stop() {
			w.putCall(rc.timerC) // it will not fire: the call is ours again
		}
		rc.timer, rc.timerC = nil, nil
	}
}

func checkRctx(L *glua.LState) *rctx {
	rc, ok := userValue[*rctx](L.Get(1))
	if !ok {
		L.ArgError(1, "request context expected")
	}
	return rc
}

// checkHandle returns argument n as a handle of rc, raising msg if it is
// not one.
func checkHandle(L *glua.LState, rc *rctx, n int, msg string) int {
	v, ok := L.Get(n).(glua.LNumber)
	h := int(v)
	if !ok || glua.LNumber(h) != v || h < 0 || h >= len(rc.slots) {
		L.RaiseError("%s", msg)
	}
	return h
}

// running returns rc's task, raising an error when rc is not serving the
// request whose handler is running (an rctx kept from another request) or,
// for a call that waits (yields), when the handler cannot wait here.
func (w *worker) running(L *glua.LState, rc *rctx, what string, yields bool) *task {
	t := w.cur
	if yields {
		t = w.yieldable(L, what)
	}
	if t == nil || rc.t != t {
		L.RaiseError("%s: this request context does not serve the running request", what)
	}
	return t
}

// rctxMethods are the methods of a request context.
func (w *worker) rctxMethods() map[string]glua.LGFunction {
	return map[string]glua.LGFunction{
		"enqueue":          w.rctxEnqueue,
		"enqueue_and_wait": w.rctxEnqueueAndWait,
		"wait_cond":        w.rctxWaitCond,
		"wait_handle":      w.rctxWaitHandle,
		"sleep":            w.rctxSleep,
		"res_good":         rctxRes(resGood),
		"res_ok":           rctxRes(resGood | resOK),
		"res_any":          rctxRes(resGood | resOK | resAny),
		"result":           rctxResult,
		"best_result":      rctxBestResult,
		"worst_result":     rctxWorstResult,
		"handle_set_cb":    rctxHandleSetCB,
		"request_new":      w.rctxRequestNew,
		"response_new":     w.rctxResponseNew,
		"cfd":              rctxCfd,
	}
}

// rctxCfd is rctx:cfd(): memcached gives the client's socket descriptor;
// shardproxy gives the number it keeps for the client connection, which,
// like a descriptor, is the same for all of one connection's requests
// (route files use it to tell clients apart, e.g. to sample or to pin).
// Outside a request it is nil; in a callback of a reply that came after
// the handler returned, it is still the client's (as in memcached).
func rctxCfd(L *glua.LState) int {
	rc := checkRctx(L)
	if !rc.serving {
		L.Push(glua.LNil)
		return 1
	}
	L.Push(glua.LNumber(rc.cfd))
	return 1
}

// serve makes rc the context of task t.
func (rc *rctx) serve(t *task) {
	t.rc, rc.t = rc, t
	rc.cfd, rc.serving = t.hint, true
}

// queue marks handle h queued with rq (argument 2 of the method being
// called); a slot already in use this request is left as it is (memcached
// ignores it too).
func (rc *rctx) queue(L *glua.LState, rq *request, h int) {
	if h < 0 || h >= len(rc.slots) {
		L.RaiseError("attempted to enqueue an invalid handle")
	}
	s := &rc.slots[h]
	if s.state != slotIdle {
		return
	}
	s.state, s.rq, s.rqv = slotQueued, rq, L.Get(2)
}

// checkQueueable returns argument 2 as a request that can be queued.
func checkQueueable(L *glua.LState) *request {
	rq := checkRequest(L, 2)
	if rq.key() == nil && rq.req.Route != codec.RouteAny {
		L.RaiseError("cannot queue requests without a key")
	}
	return rq
}

// rctxEnqueue is rctx:enqueue(r, handle | {handles}): queue, not send.
func (w *worker) rctxEnqueue(L *glua.LState) int {
	rc := checkRctx(L)
	rq := checkQueueable(L)
	w.running(L, rc, "enqueue", false)
	if rc.mode != waitIdle {
		L.RaiseError("enqueue: cannot enqueue new requests while in a wait")
	}
	switch v := L.Get(3).(type) {
	case glua.LNumber:
		rc.queue(L, rq, int(v))
	case *glua.LTable:
		for i := 1; i <= v.Len(); i++ {
			h, ok := v.RawGetInt(i).(glua.LNumber)
			if !ok {
				L.RaiseError("invalid handle passed to queue via array table")
			}
			rc.queue(L, rq, int(h))
		}
	default:
		L.RaiseError("must pass a handle or a table to queue")
	}
	return 0
}

// rctxEnqueueAndWait is rctx:enqueue_and_wait(r, handle[, timeout]): queue
// r to handle, send everything queued and wait for that handle; it returns
// its response (nil, true after the timeout).
func (w *worker) rctxEnqueueAndWait(L *glua.LState) int {
	rc := checkRctx(L)
	rq := checkQueueable(L)
	t := w.running(L, rc, "enqueue_and_wait", true)
	if rc.mode != waitIdle {
		L.RaiseError("wait_cond: cannot call while already in wait mode")
	}
	v, ok := L.Get(3).(glua.LNumber)
	if !ok {
		L.RaiseError("invalid handle passed to enqueue_and_wait")
	}
	rc.queue(L, rq, int(v))
	timeout := optTimeout(L, 4)
	return w.startWait(L, rc, t, waitHandle, 1, int(v), timeout)
}

// rctxWaitHandle is rctx:wait_handle(handle[, timeout]).
func (w *worker) rctxWaitHandle(L *glua.LState) int {
	rc := checkRctx(L)
	t := w.running(L, rc, "wait_handle", true)
	if rc.mode != waitIdle {
		L.RaiseError("wait: cannot call while already in wait mode")
	}
	h := checkHandle(L, rc, 2, "invalid handle passed to wait_handle")
	if rc.slots[h].state == slotIdle {
		L.RaiseError("wait_handle called on unqueued handle")
	}
	timeout := optTimeout(L, 3)
	return w.startWait(L, rc, t, waitHandle, 1, h, timeout)
}

// rctxWaitCond is rctx:wait_cond(n[, mode[, timeout]]): send everything
// queued and wait until n slots satisfy mode (WAIT_ANY by default). It
// returns how many did (and true after the timeout). n = 0 only sends.
func (w *worker) rctxWaitCond(L *glua.LState) int {
	rc := checkRctx(L)
	t := w.running(L, rc, "wait_cond", true)
	if rc.mode != waitIdle {
		L.RaiseError("wait_cond: cannot call while already in wait mode")
	}
	if L.GetTop() < 2 {
		L.RaiseError("must pass at least count to wait_cond")
	}
	n, ok := L.Get(2).(glua.LNumber)
	if !ok || n < 0 || glua.LNumber(int(n)) != n {
		L.RaiseError("wait count for wait_cond must be a positive integer")
	}
	mode := waitAny
	if L.GetTop() > 2 {
		// as memcached: a mode argument that is not a number reads as 0,
		// which is invalid
		m, _ := L.Get(3).(glua.LNumber)
		mode = int(m)
	}
	if mode < waitAny || mode > waitFastGood {
		L.RaiseError("invalid mode sent to wait_cond")
	}
	timeout := optTimeout(L, 4)
	return w.startWait(L, rc, t, mode, int(n), 0, timeout)
}

// rctxSleep is rctx:sleep(seconds): wait that long, with the request's
// calls still coming back into their slots. It returns true.
func (w *worker) rctxSleep(L *glua.LState) int {
	rc := checkRctx(L)
	t := w.running(L, rc, "sleep", true)
	if rc.mode != waitIdle {
		L.RaiseError("sleep: cannot call while already in wait mode")
	}
	d := optTimeout(L, 2)
	if L.Get(2) == glua.LNil {
		L.RaiseError("timeout argument to wait or sleep must be a number")
	}
	rc.mode = waitSleep
	w.armTimer(rc, d)
	t.state = taskWaiting
	return L.Yield()
}

// optTimeout reads an optional timeout in seconds (fractions allowed).
func optTimeout(L *glua.LState, n int) time.Duration {
	if L.GetTop() < n {
		return 0
	}
	v, ok := L.Get(n).(glua.LNumber)
	if !ok {
		L.RaiseError("timeout argument to wait or sleep must be a number")
	}
	return time.Duration(float64(v) * float64(time.Second))
}

// errObjectLimit is rctx:request_new or response_new past fgen:ready's u
// (memcached's wording, for both).
const errObjectLimit = "rctx request new: object count limit reached"

// rctxRequestNew is rctx:request_new(): an empty request (no command, no
// key) for a request mutator to fill, owned by the context. A context may
// make u (fgen:ready's) objects in its life, usually in the generator;
// they are reused by every request the context serves.
func (w *worker) rctxRequestNew(L *glua.LState) int {
	rc := checkRctx(L)
	if len(rc.objs) >= rc.fg.objs {
		L.RaiseError(errObjectLimit)
	}
	ud := w.L.NewUserData()
	ud.Value = &request{w: w, req: &codec.Request{}, owned: true}
	ud.Metatable = w.reqMT
	rc.objs = append(rc.objs, ud)
	L.Push(ud)
	return 1
}

// rctxResponseNew is rctx:response_new(): an empty response for a
// response mutator to fill, owned by the context like request_new's.
func (w *worker) rctxResponseNew(L *glua.LState) int {
	rc := checkRctx(L)
	if len(rc.objs) >= rc.fg.objs {
		L.RaiseError(errObjectLimit)
	}
	ud := w.responseValue(emptyResponse(w.r.cfg.Redis))
	rc.objs = append(rc.objs, ud)
	L.Push(ud)
	return 1
}

// resetObject readies an object of rctx:request_new or response_new for
// the context's next request, as memcached does: a request drops the value
// a mutator attached (and, with it, becomes empty: its line alone would
// not parse), a response its reply.
func resetObject(v glua.LValue) {
	switch o := v.(*glua.LUserData).Value.(type) {
	case *request:
		if o.req != nil && o.value() != nil {
			o.req, o.split = &codec.Request{}, false
		}
	case *response:
		o.clear()
		o.status = mcmcOK
	}
}
