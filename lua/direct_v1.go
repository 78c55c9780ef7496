package lua

import (
	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/lua/internal/bytecode"
)

// The commonest handler is `function(r) return pool(r) end` (or
// `return pools.main(r)`), where pool is a pool proxy the handler closes
// over. Such a handler only hands the request to its pool and the pool's
// response to the client, so the router does exactly that without
// entering Lua: no coroutine, no request or response object. The handler
// is recognised by its bytecode when it is attached (bytecode.PoolCall,
// kept in worker.direct); at each request the
// upvalue (and table field) is read again, and if it is not a pool proxy
// with the proxy's own __call then, or the request has no key, the handler
// runs in Lua as any other. The client cannot tell the difference.

// directPool returns the pool a direct handler would call now, or nil.
// The caller holds the state: upvalues and tables belong to it.
func (w *worker) directPool(fn *glua.LFunction, d bytecode.PoolCall) *pool {
	v := fn.Upvalues[d.Up].Value()
	if d.Key != "" {
		t, ok := v.(*glua.LTable)
		if !ok || t.Metatable != glua.LNil {
			return nil
		}
		v = t.RawGetString(d.Key)
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
