package lua

import (
	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// A function generator may be a handle of another (fgen:new_handle(fgen),
// memcached's sub-generators; routelib builds its nested routes so). A
// request queued to such a handle runs the child generator's handler, in
// a request context from the child's free list and a coroutine of its
// own, as a task without a client: its result becomes the handle's
// response, classified, called back and waited for like a pool's
// (memcached 1.6.45, observed):
//   - a response is the handle's response;
//   - a string is the handle's result as it is, flagged RES_ANY (res_any
//     and result return the string, res_good and res_ok nil; a handler
//     that returns it sends it raw); it runs no callback;
//   - anything else, an error raised or a generator that cannot start
//     gives an error response (ok() false; the client, if the parent
//     returns it, sees "SERVER_ERROR backend failure"), flagged RES_ANY.
//
// The child starts once the handler that sent it (by a wait) yields or
// returns, never inside its run: a coroutine is resumed by the worker
// alone. It gets its own request object, over a copy of the request, so
// it may outlive the parent's handler; what it changes in the request
// stays its own. Its calls count towards the parent's limit of backend
// calls. The parent's context counts the child as a call in flight until
// the child has finished.

// errChildFailure is the error response of a sub-generator that failed.
const errChildFailure = wireError("backend failure")

// pinChildren gives each sub-generator slot of rc, a new context, a
// context of the child's for rc's life, taken as takeRctx takes one (with
// L, as newRctx makes one), as memcached pins one per parent context: a
// child's slots count grows with its parents'. A request queued to the
// slot runs in it, or, while it still serves an earlier request's calls,
// in another context of the child's.
func (w *worker) pinChildren(rc *rctx, L *glua.LState) error {
	for i := range rc.slots {
		s := &rc.slots[i]
		if s.child == nil {
			continue
		}
		sub, err := w.freeOrNewRctx(s.child, L)
		if err != nil {
			for j := i - 1; j >= 0; j-- { // the free lists as they were
				if p := rc.slots[j].sub; p != nil {
					p.pinned, rc.slots[j].sub = false, nil
					w.untakeRctx(p)
				}
			}
			return err
		}
		sub.pinned, s.sub = true, sub
	}
	return nil
}

// queueChild marks slot h of rc, a sub-generator's, started: the child
// task is made now and run after the running event (worker.handle).
func (w *worker) queueChild(rc *rctx, h int, parent *task) {
	s := &rc.slots[h]
	req := s.rq.req
	if !s.rq.owned {
		req = cloneRequest(req)
	}
	t := w.newTask()
	t.req, t.hint, t.calls = req, parent.hint, parent.calls
	t.parent, t.parentHandle = rc, h
	w.starts = append(w.starts, t)
}

// startChild runs a child task queued by queueChild.
func (w *worker) startChild(t *task) {
	rc, h := t.parent, t.parentHandle
	w.activate(t)
	sub := rc.slots[h].sub
	if sub == nil || sub.serving { // still busy with an earlier request's calls
		var err error
		if sub, err = w.takeRctx(rc.slots[h].child); err != nil {
			w.finish(t, glua.LNil, err) // the parent's slot gets errChildFailure
			return
		}
	}
	sub.serve(t)
	w.runHandler(t, sub.fn, &request{w: w, req: t.req, owned: true})
}

// childResult returns v, a child task's result, as its parent may keep
// it: a response the child's context made (rctx:response_new), which the
// context empties for its next request, is copied.
func (w *worker) childResult(v glua.LValue) glua.LValue {
	if r, ok := userValue[*response](v); ok && r.made {
		cp := *r
		cp.ownRaw = false // the bytes are shared: a change copies them first
		return w.responseValue(&cp)
	}
	return v
}

// childDone gives a finished child task's result, v or failure, to its
// parent's slot.
func (w *worker) childDone(t *task, v glua.LValue, failure error) {
	rc, h := t.parent, t.parentHandle
	rc.pending--
	s := &rc.slots[h]
	if w.stopping || s.state != slotActive {
		// Shutting down: the parent is answered by shutdown itself.
		if rc.t == nil && rc.pending == 0 {
			w.putRctx(rc)
		}
		return
	}
	var res *response
	switch v := v.(type) {
	case glua.LString:
		if failure == nil {
			s.state, s.res = slotComplete, v
			s.flags |= resAny
			w.slotReturned(rc, h)
			return
		}
	case *glua.LUserData:
		if r, ok := v.Value.(*response); ok && failure == nil {
			w.completeSlot(w.L, rc, h, r, v)
			w.slotReturned(rc, h)
			return
		}
	}
	if failure == nil {
		w.r.logScriptError("lua function generator returned no response",
			s.child.name+": returned a "+v.Type().String()+", not a response or a string")
	}
	res = &response{err: errChildFailure, errKind: codec.ErrServer, hdr: headerOf(t.req), redis: w.r.cfg.Redis}
	w.completeSlot(w.L, rc, h, res, nil)
	w.slotReturned(rc, h)
}
