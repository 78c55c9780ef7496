package lua

import (
	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
)

// The commonest V2 handler is the one a function generator returns in
// examples/lua/v2_basic.lua: `function(r) return rctx:enqueue_and_wait(r,
// h) end`, where rctx is the request context the generator was given and h
// a handle (an upvalue, or a number written in the handler). It only sends
// the request to h's pool and hands the response to the client, so, as for
// a V1 handler `return pool(r)` (direct_v1.go), the router does exactly that
// without entering Lua: no coroutine, no request or response object, no
// copy of the request; the reply goes to the client from the backend's
// goroutine. The handler is recognised by its bytecode once per request
// context (bytecode.MatchEnqueueHandler, kept in rctx.dir); at each request the context's own handler is checked again:
// its upvalue must still be that context, the context's enqueue_and_wait
// the API's own, h a handle of the context, and the request one with a key
// whose backend the pool can pick. Anything else runs in Lua as before.
//
// The context is free again at once, instead of when the reply comes: a
// handler running in Lua would have taken the same context had the
// requests not overlapped, which is all a generator whose contexts route
// differently can observe. The client cannot tell the difference.

// v2DirectBackend returns the backend rc's handler would send req to now,
// and its pool, or nil when the handler must run in Lua. The caller holds
// the state.
func (w *worker) v2DirectBackend(rc *rctx, req *codec.Request) (*beRef, *pool) {
	s := w.v2DirectSlot(rc)
	if s == nil {
		return nil, nil
	}
	key := keyOf(req, w.r.cfg.Redis)
	if key == nil || req.Route == codec.RouteSame {
		return nil, nil
	}
	be, err := s.pool.pick(key)
	if err != nil {
		return nil, nil
	}
	return be, s.pool
}

// v2DirectSlot returns the slot of a pool rc's handler enqueues to and
// waits for, as its upvalues and the API stand now, or nil: the handler
// must still call the API's own enqueue_and_wait of rc itself.
func (w *worker) v2DirectSlot(rc *rctx) *slot {
	if !rc.dir.OK || rc.fn.Upvalues[rc.dir.CtxUp].Value() != rc.ud || rc.ud.Metatable != w.v2.rctxMT ||
		w.v2.rctxMT.RawGetString("__index") != w.v2.rctxIndex ||
		w.v2.rctxIndex.RawGetString("enqueue_and_wait") != w.v2.enqueueAndWait {
		return nil
	}
	h, ok := directHandle(rc)
	if !ok {
		return nil
	}
	s := &rc.slots[h]
	if s.pool == nil || s.cb != nil || s.pool.logs { // a sub-generator, a callback to run, replies to log
		return nil
	}
	return s
}

// directHandle returns the handle rc's handler passes, when it is one of
// rc's.
func directHandle(rc *rctx) (int, bool) {
	hv := rc.dir.Handle
	if rc.dir.HandleUp >= 0 {
		hv = rc.fn.Upvalues[rc.dir.HandleUp].Value()
	}
	n, ok := hv.(glua.LNumber)
	h := int(n)
	return h, ok && glua.LNumber(h) == n && h >= 0 && h < len(rc.slots)
}

// sendDirectV2 sends a client's request straight to its backend when rc's
// handler is a direct V2 handler, gives rc back, and reports whether it
// did. hook is what req's command is attached to: when it is rc's
// generator itself (not a router, which picks a generator by key), the
// pool is remembered for the command, and the command's next requests
// take the lock-free way (direct_fast.go) until Lua code runs or a context is
// freed.
func (w *worker) sendDirectV2(hook *glua.LFunction, rc *rctx, req *codec.Request, hint uint32, c Completion, bytes int64, bt *backend.Batch) bool {
	be, p := w.v2DirectBackend(rc, req)
	if be == nil {
		return false
	}
	w.untakeRctx(rc)
	if rc.fg.entry == hook {
		w.remember(req, p) // before the send: once sent, req may be answered and reused
	}
	w.r.sendFast(be, req, hint, c, bytes, bt)
	return true
}
