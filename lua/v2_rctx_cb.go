package lua

import glua "github.com/yuin/gopher-lua"

// rctx:handle_set_cb(handle, func) sets a callback on one handle of a
// request context, kept for every request the context serves (memcached
// 1.6.45, observed): when the handle's response comes back, before any
// wait counts it, func(res, req) runs with the response and the request
// object queued to the handle. It may return mcp.WAIT_GOOD or
// mcp.WAIT_OK, which makes the result count as RES_GOOD or RES_OK
// whatever it is, and then a true second value (mcp.WAIT_RESUME), which
// ends the current wait at once; anything else leaves the result as it
// is. It cannot wait, and an error in it is logged and otherwise ignored.
// A sub-generator's string result runs no callback.

// rctxHandleSetCB is rctx:handle_set_cb(handle, func).
func rctxHandleSetCB(L *glua.LState) int {
	rc := checkRctx(L)
	v, ok := L.Get(2).(glua.LNumber)
	if !ok {
		L.ArgError(2, "number expected")
	}
	fn := L.CheckFunction(3)
	h := int(v)
	if glua.LNumber(h) != v || h < 0 || h >= len(rc.slots) {
		L.RaiseError("invalid handle passed to queue_set_cb")
	}
	rc.slots[h].cb = fn
	return 0
}

// runSlotCallback runs s's callback on L for a result flagged flag and
// returns the flag to record.
func (w *worker) runSlotCallback(L *glua.LState, s *slot, flag int) int {
	rqv := s.rqv
	if rqv == nil {
		rqv = glua.LNil
	}
	var ret []glua.LValue
	var err error
	w.nested++ // a callback cannot wait: it runs inside the event
	if L == w.L {
		// a reply's event, outside any handler run: bounded here
		ret, err = w.callBounded(s.cb, 2, s.res, rqv)
	} else {
		// inside a handler's run, which the watchdog bounds
		top := L.GetTop()
		err = L.CallByParam(glua.P{Fn: s.cb, NRet: 2, Protect: true}, s.res, rqv)
		if err == nil {
			ret = []glua.LValue{L.Get(top + 1), L.Get(top + 2)}
		}
		L.SetTop(top)
	}
	w.nested--
	if err != nil {
		w.r.logScriptError("lua handle callback failed", scriptMessage(err))
		return flag
	}
	mode, ok := ret[0].(glua.LNumber)
	if !ok || mode != glua.LNumber(int(mode)) {
		return flag
	}
	switch int(mode) {
	case waitGood:
		flag = resGood
	case waitOK:
		flag = resOK
	}
	if glua.LVAsBool(ret[1]) {
		flag |= resResume
	}
	return flag
}
