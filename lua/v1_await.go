package lua

import (
	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// pool(r) and mcp.await send a request to backends and wait for the
// responses; the calls and awaits they make, and how replies resume the
// handler, are the engine's (engine_await.go).

// pick returns the backend of pool p for rq: the one owning its key, any
// one (by hint) for a request whose answer does not depend on keys (Redis
// COMMAND). It raises an error for a request without a key; for a request
// whose keys must all live on one server and do not, it returns nil.
func pick(L *glua.LState, p *pool, rq *request, hint uint32) *beRef {
	key := rq.key()
	if key == nil {
		if rq.req.Route == codec.RouteAny {
			return p.bes[int(hint%uint32(len(p.bes)))]
		}
		L.RaiseError("cannot route commands without key")
	}
	be, err := p.pick(key)
	if err != nil {
		L.RaiseError("pool %d: %v", p.id, err)
	}
	if rq.req.Route == codec.RouteSame {
		for _, k := range rq.req.Keys[1:] {
			if other, err := p.pick(k); err != nil || other != be {
				return nil
			}
		}
	}
	return be
}

// crossServer is the reply to a request whose keys live on different
// servers of a pool.
const crossServer = wireError("keys in request don't hash to the same server")

// crossServerResponse is the response a handler gets for req when pick
// finds its keys on different servers, without a backend call.
func (w *worker) crossServerResponse(req *codec.Request) *response {
	return &response{err: crossServer, errKind: codec.ErrCrossServer, hdr: headerOf(req), redis: w.r.cfg.Redis}
}

// poolCall is pool(r): send r to the pool's backend for its key, wait, and
// return the response.
func (w *worker) poolCall(L *glua.LState) int {
	p, ok := userValue[*pool](L.Get(1))
	if !ok {
		L.ArgError(1, "pool expected")
	}
	rq := checkRequest(L, 2)
	t := w.yieldable(L, "pool(r)")
	be := pick(L, p, rq, t.hint)
	if be == nil {
		L.Push(w.responseValue(w.crossServerResponse(rq.req)))
		return 1
	}
	countCalls(L, t, 1)
	aw := w.newAwait(t, awaitAny, 0)
	aw.single = true
	req := rq.req
	switch {
	case rq.owned || t.multi != nil: // made by the script, or a split-off key
	case rq == t.rq:
		aw.borrowed = true // the task waits for it: no copy needed
	default:
		req = cloneRequest(req) // another request's, which may be answered first
	}
	w.send(aw, be, req, t.hint, true)
	t.state, t.aw = taskWaiting, aw
	return L.Yield()
}

// awaitFunc is mcp.await(r, pools[, wait_for[, mode]]) and, with logErr,
// mcp.await_logerrors(r, pools, wait_for, mode, detail).
func (w *worker) awaitFunc(logErr bool) glua.LGFunction {
	return func(L *glua.LState) int {
		rq := checkRequest(L, 1)
		pools := awaitPools(L, L.CheckTable(2))
		mode, waitFor := awaitMode(L, len(pools))
		t := w.cur
		if mode != awaitBackground {
			t = w.yieldable(L, "mcp.await")
		} else if t == nil {
			L.RaiseError("mcp.await can only be called from a route handler")
		}
		bes := awaitBackends(L, pools, rq, t.hint)
		countCalls(L, t, len(bes))
		req := rq.req
		if !rq.owned { // calls may outlive the client request
			req = cloneRequest(req)
		}
		aw := w.newAwait(t, mode, waitFor)
		aw.logErr = logErr
		if s, ok := L.Get(5).(glua.LString); ok {
			aw.detail = string(s)
		}
		for i, be := range bes {
			w.send(aw, be, req, t.hint, i == 0)
		}
		if mode == awaitBackground {
			aw.completed, aw.t = true, nil
			L.Push(L.NewTable())
			return 1
		}
		t.state, t.aw = taskWaiting, aw
		return L.Yield()
	}
}

// awaitPools returns the pools of mcp.await's table argument, raising an
// error for an item that is not one or an empty table.
func awaitPools(L *glua.LState, list *glua.LTable) []*pool {
	var pools []*pool
	list.ForEach(func(_, v glua.LValue) {
		p, ok := userValue[*pool](v)
		if !ok {
			L.RaiseError("mcp.await must be supplied with a pool")
		}
		pools = append(pools, p)
	})
	if len(pools) == 0 {
		L.RaiseError("mcp.await arguments must have at least one pool")
	}
	return pools
}

// awaitMode returns mcp.await's mode (argument 4; default AWAIT_GOOD) and
// how many responses it waits for (argument 3, at most n; 0 for all).
func awaitMode(L *glua.LState, n int) (mode, waitFor int) {
	mode = awaitGood
	if m, ok := L.Get(4).(glua.LNumber); ok {
		mode = int(m)
		if mode < awaitGood || mode > awaitBackground {
			L.RaiseError("invalid type argument to mcp.await")
		}
	}
	if v, ok := L.Get(3).(glua.LNumber); ok {
		waitFor = min(int(v), n)
	}
	if mode == awaitFirst {
		waitFor = 1
	}
	return mode, waitFor
}

// awaitBackends returns the backend each pool sends rq to, raising an
// error when rq's keys span servers.
func awaitBackends(L *glua.LState, pools []*pool, rq *request, hint uint32) []*beRef {
	bes := make([]*beRef, len(pools))
	for i, p := range pools {
		if bes[i] = pick(L, p, rq, hint); bes[i] == nil {
			L.RaiseError("%s", crossServer.Error())
		}
	}
	return bes
}
