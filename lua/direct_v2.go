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
// a V1 handler `return pool(r)` (direct.go), the router does exactly that
// without entering Lua: no coroutine, no request or response object, no
// copy of the request; the reply goes to the client from the backend's
// goroutine. The handler is recognised by its bytecode (once per request
// context); at each request the context's own handler is checked again:
// its upvalue must still be that context, the context's enqueue_and_wait
// the API's own, h a handle of the context, and the request one with a key
// whose backend the pool can pick. Anything else runs in Lua as before.
//
// The context is free again at once, instead of when the reply comes: a
// handler running in Lua would have taken the same context had the
// requests not overlapped, which is all a generator whose contexts route
// differently can observe. The client cannot tell the difference.

// v2Direct describes a handler whose body is `return U:enqueue_and_wait(r,
// H)` (or `local res = U:enqueue_and_wait(r, H) return res`) for its only
// parameter r, an upvalue U and H an upvalue or a numeric constant.
type v2Direct struct {
	ok       bool
	ctxUp    int         // index of U among the handler's upvalues
	handleUp int         // index of H among them, or -1 when H is constant
	handle   glua.LValue // H when it is a constant
}

// argBx is the 18-bit Bx operand of an ABx instruction (LOADK).
func argBx(i uint32) int { return int(i & 0x3ffff) }

// v2DirectTail is the code after H is in R4: the call and the compiler's
// closing returns, in its tail-call and its local-variable forms.
var v2DirectTails = [][]uint32{
	{abc(glua.OP_TAILCALL, 1, 4, 0), abc(glua.OP_RETURN, 1, 0, 0), abc(glua.OP_RETURN, 0, 1, 0)},
	{abc(glua.OP_CALL, 1, 4, 2), abc(glua.OP_RETURN, 1, 2, 0), abc(glua.OP_RETURN, 0, 1, 0)},
}

// inspectV2 reports whether p is the prototype of a direct V2 handler.
func inspectV2(p *glua.FunctionProto) v2Direct {
	code := p.Code
	if p.NumParameters != 1 || p.IsVarArg != 0 || len(code) != 7 {
		return v2Direct{}
	}
	// R1 := U; R2 := R1; R1 := R1["enqueue_and_wait"]; R3 := r
	if opcode(code[0]) != glua.OP_GETUPVAL || argA(code[0]) != 1 ||
		opcode(code[1]) != glua.OP_SELF || argA(code[1]) != 1 || argB(code[1]) != 1 ||
		code[2] != abc(glua.OP_MOVE, 3, 0, 0) {
		return v2Direct{}
	}
	d := v2Direct{ok: true, ctxUp: argB(code[0]), handleUp: -1}
	if k := argC(code[1]); k&rkConstant == 0 || k&^rkConstant >= len(p.Constants) ||
		p.Constants[k&^rkConstant] != glua.LString("enqueue_and_wait") {
		return v2Direct{}
	}
	// R4 := H
	switch i := code[3]; {
	case opcode(i) == glua.OP_GETUPVAL && argA(i) == 4:
		d.handleUp = argB(i)
	case opcode(i) == glua.OP_LOADK && argA(i) == 4 && argBx(i) < len(p.Constants):
		d.handle = p.Constants[argBx(i)]
	default:
		return v2Direct{}
	}
	for _, tail := range v2DirectTails {
		if code[4] == tail[0] && code[5] == tail[1] && code[6] == tail[2] {
			return d
		}
	}
	return v2Direct{}
}

// inspectV2Handler is inspectV2 of fn, a context's handler, with its
// upvalue indexes checked: all of it is fixed for fn's life, so a context
// does it once, when it is made (newRctx).
func inspectV2Handler(fn *glua.LFunction) v2Direct {
	if fn.IsG || fn.Proto == nil {
		return v2Direct{}
	}
	d := inspectV2(fn.Proto)
	if d.ctxUp >= len(fn.Upvalues) || d.handleUp >= len(fn.Upvalues) {
		return v2Direct{}
	}
	return d
}

// v2DirectBackend returns the backend rc's handler would send req to now,
// and its pool, or nil when the handler must run in Lua. The caller holds
// the state.
func (w *worker) v2DirectBackend(rc *rctx, req *codec.Request) (*beRef, *pool) {
	fn, d := rc.fn, rc.dir
	if !d.ok {
		return nil, nil
	}
	if fn.Upvalues[d.ctxUp].Value() != rc.ud || rc.ud.Metatable != w.v2.rctxMT ||
		w.v2.rctxMT.RawGetString("__index") != w.v2.rctxIndex ||
		w.v2.rctxIndex.RawGetString("enqueue_and_wait") != w.v2.enqueueAndWait {
		return nil, nil
	}
	hv := d.handle
	if d.handleUp >= 0 {
		hv = fn.Upvalues[d.handleUp].Value()
	}
	n, ok := hv.(glua.LNumber)
	h := int(n)
	if !ok || glua.LNumber(h) != n || h < 0 || h >= len(rc.slots) {
		return nil, nil
	}
	key := keyOf(req, w.r.cfg.Redis)
	if key == nil || req.Route == codec.RouteSame {
		return nil, nil
	}
	s := &rc.slots[h]
	if s.pool == nil || s.cb != nil { // a sub-generator, or a callback to run
		return nil, nil
	}
	be, err := s.pool.pick(key)
	if err != nil {
		return nil, nil
	}
	return be, s.pool
}

// sendDirectV2 sends a client's request straight to its backend when rc's
// handler is a direct V2 handler, gives rc back, and reports whether it
// did. hook is what req's command is attached to: when it is rc's
// generator itself (not a router, which picks a generator by key), the
// pool is remembered for the command, and the command's next requests
// take the lock-free way (fast.go) until Lua code runs or a context is
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
