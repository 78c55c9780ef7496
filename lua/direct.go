package lua

import (
	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
)

// The commonest handler is `function(r) return pool(r) end` (or
// `return pools.main(r)`), where pool is a pool proxy the handler closes
// over. Such a handler only hands the request to its pool and the pool's
// response to the client, so the router does exactly that without
// entering Lua: no coroutine, no request or response object. The handler
// is recognised by its bytecode when it is attached; at each request the
// upvalue (and table field) is read again, and if it is not a pool proxy
// with the proxy's own __call then, or the request has no key, the handler
// runs in Lua as any other. The client cannot tell the difference.

// direct describes a handler whose body is `return U(r)` or `return U.k(r)`
// for its only parameter r and its upvalue U.
type direct struct {
	up  int    // index of U among the handler's upvalues
	key string // k; "" for `return U(r)`
}

// gopher-lua's instruction layout (opcode.go): a 6-bit opcode, then A (8
// bits), C (9 bits), B (9 bits).
func opcode(i uint32) int { return int(i >> 26) }
func argA(i uint32) int   { return int(i>>18) & 0xff }
func argB(i uint32) int   { return int(i & 0x1ff) }
func argC(i uint32) int   { return int(i>>9) & 0x1ff }

func abc(op, a, b, c int) uint32 {
	return uint32(op)<<26 | uint32(a&0xff)<<18 | uint32(c&0x1ff)<<9 | uint32(b&0x1ff)
}

// directTail is the code after the function is in R1: R2 := r, return
// R1(R2), and the compiler's closing returns.
var directTail = []uint32{
	abc(glua.OP_MOVE, 2, 0, 0),
	abc(glua.OP_TAILCALL, 1, 2, 0),
	abc(glua.OP_RETURN, 1, 0, 0),
	abc(glua.OP_RETURN, 0, 1, 0),
}

// rkConstant is the bit of an RK operand that makes it a constant index.
const rkConstant = 1 << 8

// inspect reports whether fn is a direct handler.
func inspect(fn *glua.LFunction) (direct, bool) {
	if fn.IsG || fn.Proto == nil {
		return direct{}, false
	}
	p := fn.Proto
	code := p.Code
	if p.NumParameters != 1 || p.IsVarArg != 0 || len(code) < 1+len(directTail) ||
		opcode(code[0]) != glua.OP_GETUPVAL || argA(code[0]) != 1 {
		return direct{}, false
	}
	d := direct{up: argB(code[0])}
	rest := code[1:]
	if opcode(rest[0]) == glua.OP_GETTABLEKS {
		i := rest[0]
		c := argC(i)
		if argA(i) != 1 || argB(i) != 1 || c&rkConstant == 0 || c&^rkConstant >= len(p.Constants) {
			return direct{}, false
		}
		k, ok := p.Constants[c&^rkConstant].(glua.LString)
		if !ok {
			return direct{}, false
		}
		d.key = string(k)
		rest = rest[1:]
	}
	if len(rest) != len(directTail) || d.up >= len(fn.Upvalues) {
		return direct{}, false
	}
	for i, want := range directTail {
		if rest[i] != want {
			return direct{}, false
		}
	}
	return d, true
}

// directPool returns the pool a direct handler would call now, or nil.
// The caller holds the state: upvalues and tables belong to it.
func (w *worker) directPool(fn *glua.LFunction, d direct) *pool {
	v := fn.Upvalues[d.up].Value()
	if d.key != "" {
		t, ok := v.(*glua.LTable)
		if !ok || t.Metatable != glua.LNil {
			return nil
		}
		v = t.RawGetString(d.key)
	}
	ud, ok := v.(*glua.LUserData)
	if !ok || ud.Metatable != w.proxyMT || w.proxyMT.RawGetString("__call") != w.proxyCall {
		return nil
	}
	p, _ := ud.Value.(*pool)
	return p
}

// directBackend returns the backend a direct handler fn sends req to now,
// and its pool; nil when fn is not a direct handler of a pool, or req is
// one whose errors and refusals come from Lua.
func (w *worker) directBackend(fn *glua.LFunction, req *codec.Request) (*beRef, *pool) {
	d, ok := w.direct[fn]
	if !ok {
		return nil, nil
	}
	p := w.directPool(fn, d)
	if p == nil {
		return nil, nil
	}
	key := keyOf(req, w.r.cfg.Redis)
	if key == nil || req.Route == codec.RouteSame {
		return nil, nil
	}
	be, err := p.pick(key)
	if err != nil {
		return nil, nil
	}
	return be, p
}

// sendDirect sends a client's request straight to its backend when fn is
// a direct handler of a pool, and reports whether it did. The reply goes
// to c from the backend's goroutine, as on Route's direct way: it needs
// no Lua and no state.
func (w *worker) sendDirect(fn *glua.LFunction, req *codec.Request, hint uint32, c Completion, bytes int64, bt *backend.Batch) bool {
	be, p := w.directBackend(fn, req)
	if be == nil {
		return false
	}
	w.remember(req, p) // before the send: once sent, req may be answered and reused
	w.r.sendFast(be, req, hint, c, bytes, bt)
	return true
}

// routeDirect sends t's request, one key of a multi-get, straight to its
// backend when fn is a direct handler of a pool, and reports whether it
// did. The reply comes back to the worker, which merges it.
func (w *worker) routeDirect(t *task, fn *glua.LFunction) bool {
	be, _ := w.directBackend(fn, t.req)
	if be == nil {
		return false
	}
	aw := w.newAwait(t, awaitAny, 0)
	aw.single = true
	t.fast, t.state, t.aw = true, taskWaiting, aw
	w.send(aw, be, t.req, t.hint, true)
	return true
}

// keyOf returns the key a pool places req by: the key token as sent for a
// memcache meta command (which may be base64), the first key otherwise.
func keyOf(req *codec.Request, redis bool) []byte {
	if len(req.Keys) == 0 {
		return nil
	}
	if !redis && isMeta(req.Name) {
		return secondToken(req.Wire)
	}
	return req.Keys[0]
}

// isMeta reports whether name is a memcache meta command with flags.
func isMeta(name string) bool {
	switch name {
	case "mg", "ms", "md", "ma", "me":
		return true
	}
	return false
}
