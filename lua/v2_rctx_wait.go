package lua

import (
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// A request context's wait: the slots it sends, the replies and the timer
// that come back to the worker, and the handler resumed when the wait's
// mode is satisfied. rctx:enqueue_and_wait, wait_handle, wait_cond and
// sleep (v2_rctx.go) enter it.

// startWait enters a wait: it sends the queued slots, counts the slots
// already answered, and either returns the wait's result at once or
// yields until a reply or the timeout ends it.
func (w *worker) startWait(L *glua.LState, rc *rctx, t *task, mode, count, h int, timeout time.Duration) int {
	rc.mode, rc.count, rc.done, rc.handle = mode, count, 0, h
	w.dispatch(L, rc, t)
	if count == 0 { // wait_cond(0): just send
		rc.mode = waitIdle
		L.Push(glua.LNumber(0))
		return 1
	}
	resume := false
	for i := range rc.slots {
		if rc.done >= rc.count || resume {
			break
		}
		if rc.slots[i].state == slotComplete {
			resume = rc.countSlot(i)
		}
	}
	if mode == waitHandle && rc.slots[h].state == slotWaited && rc.done == 0 {
		// The handle was waited for before: its result is there. (memcached
		// would wait for a reply that never comes.)
		resume = true
	}
	if resume || rc.done >= rc.count || rc.pending == 0 {
		// Nothing left to wait for. (memcached would also wait when no call
		// is in flight, until a timeout; returning is the useful reading.)
		v := rc.waitResult()
		rc.mode, rc.count = waitIdle, 0
		L.Push(v)
		return 1
	}
	if timeout > 0 {
		w.armTimer(rc, timeout)
	}
	t.state = taskWaiting
	return L.Yield()
}

// waitResult is what a satisfied wait returns: the handle's response, or
// how many slots it counted.
func (rc *rctx) waitResult() glua.LValue {
	if rc.mode == waitHandle {
		if v := rc.slots[rc.handle].res; v != nil {
			return v
		}
		return glua.LNil
	}
	return glua.LNumber(rc.done)
}

// dispatch sends every queued slot, in handle order.
func (w *worker) dispatch(L *glua.LState, rc *rctx, t *task) {
	for i := range rc.slots {
		s := &rc.slots[i]
		if s.state != slotQueued {
			continue
		}
		s.state = slotActive
		if s.child != nil {
			countCalls(L, t, 1)
			rc.pending++
			w.queueChild(rc, i, t)
			continue
		}
		be := pick(L, s.pool, s.rq, t.hint)
		if be == nil {
			w.completeSlot(L, rc, i, w.crossServerResponse(s.rq.req), nil)
			continue
		}
		countCalls(L, t, 1)
		c := w.newCall()
		c.rc, c.handle = rc, i
		rc.pending++
		w.sendCall(c, be, rc.requestFor(s.rq, t), t.hint)
	}
}

// requestFor returns what to send for rq. The calls may outlive the
// handler (a wait for fewer than all slots, a timeout), so the client's
// own request is copied, once per request; a request the script made, or
// a multi-get's key, is the handler's to give.
func (rc *rctx) requestFor(rq *request, t *task) *codec.Request {
	if rq.owned || t.multi != nil {
		return rq.req
	}
	switch {
	case rc.cloneOf == rq.req:
	case rc.clone == nil:
		copyRequest(&rc.cloneStore, rq.req)
		rc.clone, rc.cloneOf = &rc.cloneStore, rq.req
	default: // a second client request in one handler: cloneStore is in use
		rc.clone, rc.cloneOf = cloneRequest(rq.req), rq.req
	}
	return rc.clone
}

// completeSlot records res as slot h's result and its flags
// (mcp_process_rqueue_return), then runs the slot's callback, if any, on
// L, which may change them. v is res's Lua value when it has one.
func (w *worker) completeSlot(L *glua.LState, rc *rctx, h int, res *response, v glua.LValue) {
	s := &rc.slots[h]
	s.state = slotComplete
	flag := resAny | resError
	switch {
	case res.hit():
		flag = resGood
	case res.ok():
		flag = resOK
	}
	if v == nil {
		v = w.responseValue(res)
	}
	s.res = v
	if s.cb != nil {
		flag = w.runSlotCallback(L, s, flag)
	}
	s.flags |= flag
	if res.be != nil && res.be.log != nil {
		w.logBackendReply(rc, h, res)
	}
}

// countSlot counts answered slot h towards the current wait, by its mode,
// and reports whether the wait should end now (WAIT_FASTGOOD's good
// result).
func (rc *rctx) countSlot(h int) bool {
	s := &rc.slots[h]
	counted, resume := false, false
	switch rc.mode {
	case waitGood:
		counted = s.flags&resGood != 0
	case waitOK:
		counted = s.flags&(resGood|resOK) != 0
	case waitAny:
		counted = true
	case waitFastGood:
		counted = s.flags&(resGood|resOK) != 0
		resume = s.flags&resGood != 0
	case waitHandle:
		counted = h == rc.handle
	}
	if counted {
		rc.done++
		s.state = slotWaited
	}
	return resume || s.flags&resResume != 0
}

// rctxReply handles a completed call of a request context, or its wait's
// timer.
func (w *worker) rctxReply(c *call) {
	rc, h := c.rc, c.handle
	if h == timerHandle {
		gen := c.gen
		w.putCall(c)
		if gen == rc.gen && rc.t != nil && rc.mode != waitIdle {
			rc.timer, rc.timerC = nil, nil // it fired
			w.timedOut(rc)
		}
		return
	}
	res := w.newResponse(c)
	w.putCall(c)
	rc.pending--
	w.completeSlot(w.L, rc, h, res, nil)
	w.slotReturned(rc, h)
}

// slotReturned follows the return of slot h's call (rc.pending counted
// down, the slot filled): the wait, if any, counts it; a context whose
// request has been answered goes back to its generator once nothing of
// it is in flight.
func (w *worker) slotReturned(rc *rctx, h int) {
	switch {
	case rc.t == nil:
		if rc.pending == 0 {
			w.putRctx(rc)
		}
	case rc.mode != waitIdle && rc.mode != waitSleep:
		w.waitReply(rc, h)
	}
}

// waitReply counts a reply that came during a wait and resumes the
// handler when the wait is over.
func (w *worker) waitReply(rc *rctx, h int) {
	resume := rc.countSlot(h)
	if s := &rc.slots[h]; s.flags&resError != 0 {
		s.state = slotWaited // an error is not waited for again
	}
	if !resume && rc.done < rc.count && rc.pending > 0 {
		return
	}
	v := rc.waitResult()
	w.stopWait(rc)
	t := rc.t
	t.state = taskRunning
	// The second result, "timed out", is nil. It is passed: gopher-lua
	// fills no missing result of a resumed call, so a script's
	// "local done, timeout = rctx:wait_cond(...)" would read a Go nil,
	// which Lua takes for true, in timeout.
	w.run(t, v, glua.LNil)
}

// timedOut ends the current wait at its timeout: the handler gets the
// count so far (nil for a handle wait) and true; a sleep gets true.
func (w *worker) timedOut(rc *rctx) {
	var args []glua.LValue
	switch rc.mode {
	case waitSleep:
		args = []glua.LValue{glua.LTrue}
	case waitHandle:
		args = []glua.LValue{glua.LNil, glua.LTrue}
	default:
		args = []glua.LValue{glua.LNumber(rc.done), glua.LTrue}
	}
	w.stopWait(rc)
	t := rc.t
	t.state = taskRunning
	w.run(t, args...)
}

// armTimer starts the current wait's timeout: after d a timer call comes
// back to the worker like a reply.
func (w *worker) armTimer(rc *rctx, d time.Duration) {
	c := w.newCall()
	c.rc, c.handle, c.gen = rc, timerHandle, rc.gen
	rc.timerC = c
	rc.timer = time.AfterFunc(d, func() {
		c.w.submit(event{kind: evReply, call: c}, false)
	})
}
