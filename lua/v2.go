package lua

import (
	glua "github.com/yuin/gopher-lua"
)

// The V2 API of memcached's proxy (function generators, request contexts,
// routers, inspectors and mutators) lives in the v2_*.go files; v2.go
// registers it. It shares the engine with V1: a request still runs in a
// pooled coroutine of its worker (engine_task.go), backend calls are calls
// of engine_await.go sent with worker.sendCall, and their replies come
// back through worker.reply, which hands them to rctxReply.

// Type names of the V2 userdata, as memcached names them.
const (
	typeFuncgen  = "mcp.funcgen"
	typeRcontext = "mcp.rcontext"
	typeInternal = "mcp.internal_be"
	typeMutator  = "mcp.mutator"
	typeInspect  = "mcp.inspector"
)

// v2State is a worker's V2 objects.
type v2State struct {
	fgenMT     *glua.LTable
	rctxMT     *glua.LTable
	mutMT      *glua.LTable
	insMT      *glua.LTable
	entries    map[*glua.LFunction]*funcgen // the hook function of each attached generator
	tbfMT      *glua.LTable                 // mcp.ratelim_tbf's limiters (v2_ratelim.go)
	proxyTbfMT *glua.LTable                 // the worker's handles on mcp.ratelim_global_tbf's

	// What a direct V2 handler needs (direct_v2.go): rctxMT's __index
	// table and its enqueue_and_wait as registered.
	rctxIndex      *glua.LTable
	enqueueAndWait glua.LValue
}

// internalHandler is mcp.internal_handler, accepted as a value so that a
// file naming it loads; using it as a handle raises an error.
type internalHandler struct{}

// registerV2 adds the V2 functions, metatables and mcp.internal_handler to
// a worker's mcp table.
func (w *worker) registerV2(mcp *glua.LTable) {
	L := w.L
	w.v2.entries = map[*glua.LFunction]*funcgen{}
	w.v2.fgenMT = w.typeMetatable(typeFuncgen, map[string]glua.LGFunction{
		"new_handle": w.fgenNewHandle,
		"ready":      w.fgenReady,
	})
	w.v2.rctxMT = w.typeMetatable(typeRcontext, w.rctxMethods())
	w.v2.rctxIndex = w.v2.rctxMT.RawGetString("__index").(*glua.LTable)
	w.v2.enqueueAndWait = w.v2.rctxIndex.RawGetString("enqueue_and_wait")
	mcp.RawSetString("funcgen_new", L.NewFunction(w.funcgenNew))
	mcp.RawSetString("router_new", L.NewFunction(w.routerNew))
	w.tbfMetatables()
	mcp.RawSetString("ratelim_tbf", L.NewFunction(w.ratelimTbf))
	mcp.RawSetString("WAIT_RESUME", glua.LTrue)
	w.v2.mutMT = w.callMetatable(typeMutator, w.mutatorCall)
	w.v2.insMT = w.callMetatable(typeInspect, w.inspectorCall)
	mcp.RawSetString("req_mutator_new", L.NewFunction(w.mutatorNew(false)))
	mcp.RawSetString("res_mutator_new", L.NewFunction(w.mutatorNew(true)))
	mcp.RawSetString("req_inspector_new", L.NewFunction(w.inspectorNew(false)))
	mcp.RawSetString("res_inspector_new", L.NewFunction(w.inspectorNew(true)))
	ih := L.NewUserData()
	ih.Value = &internalHandler{}
	ih.Metatable = L.NewTypeMetatable(typeInternal)
	mcp.RawSetString("internal_handler", ih)
}
