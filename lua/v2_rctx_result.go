package lua

import glua "github.com/yuin/gopher-lua"

// A request context's result methods (res_good, res_ok, res_any, result,
// best_result, worst_result) read the slots a wait filled; they neither
// send nor wait, so they may be called at any point of the handler.

// rctxRes is res_good / res_ok / res_any: the slot's response when its
// flags have one of mask's bits, else nil.
func rctxRes(mask int) glua.LGFunction {
	return func(L *glua.LState) int {
		rc := checkRctx(L)
		s := &rc.slots[checkHandle(L, rc, 2, "invalid queue handle passed to :good/:ok:/:any")]
		if s.flags&mask != 0 && s.res != nil {
			L.Push(s.res)
		} else {
			L.Push(glua.LNil)
		}
		return 1
	}
}

// rctxResult is rctx:result(handle): the response and its RES_* flag, or
// nil, nil before the slot is answered.
func rctxResult(L *glua.LState) int {
	rc := checkRctx(L)
	s := &rc.slots[checkHandle(L, rc, 2, "invalid queue handle passed to :good/:ok:/:any")]
	pushResult(L, s)
	return 2
}

// pushResult pushes s's response and its RES_* flag, or nil, nil when s
// is nil or not answered.
func pushResult(L *glua.LState, s *slot) {
	if s == nil {
		L.Push(glua.LNil)
		L.Push(glua.LNil)
		return
	}
	if f := s.flags & (resGood | resOK | resAny); f != 0 && s.res != nil {
		L.Push(s.res)
		L.Push(glua.LNumber(f))
		return
	}
	L.Push(glua.LNil)
	L.Push(glua.LNil)
}

// tableHandles reads the array of handles of a best/worst_result call.
func tableHandles(L *glua.LState, rc *rctx, what string) []int {
	tbl, ok := L.Get(2).(*glua.LTable)
	if !ok {
		L.RaiseError("must pass a table to :%s", what)
	}
	hs := make([]int, 0, tbl.Len())
	for i := 1; i <= tbl.Len(); i++ {
		v, _ := tbl.RawGetInt(i).(glua.LNumber)
		h := int(v)
		if h < 0 || h >= len(rc.slots) {
			L.RaiseError("invalid queue handle passed to %s", what)
		}
		hs = append(hs, h)
	}
	return hs
}

// rctxBestResult is rctx:best_result({handles}): the first good result,
// else the last ok one, else the last error.
func rctxBestResult(L *glua.LState) int {
	rc := checkRctx(L)
	var best *slot
	bestOK := false
	for _, h := range tableHandles(L, rc, "best_result") {
		s := &rc.slots[h]
		switch {
		case s.flags == 0:
			continue
		case s.flags&resGood != 0:
			pushResult(L, s)
			return 2
		case s.flags&resOK != 0:
			best, bestOK = s, true
		case !bestOK:
			best = s
		}
	}
	pushResult(L, best)
	return 2
}

// rctxWorstResult is rctx:worst_result({handles}): the answered slot with
// the highest flags (errors above misses above hits), the last of equals.
func rctxWorstResult(L *glua.LState) int {
	rc := checkRctx(L)
	var worst *slot
	for _, h := range tableHandles(L, rc, "worst_result") {
		if s := &rc.slots[h]; s.flags != 0 && (worst == nil || s.flags >= worst.flags) {
			worst = s
		}
	}
	pushResult(L, worst)
	return 2
}
