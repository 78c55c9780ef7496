package lua

import (
	"errors"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
	"shardproxy/lua/internal/bytecode"
)

// funcgen is a function generator (memcached's mcp.funcgen): handles (the
// pools a request may be queued to) and a generator function that, given
// a fresh request context and the generator's argument, returns the
// handler function(r). Each request takes a request context from the
// generator's free list, as memcached takes a slot; a context and its
// handler are made when the list is empty and reused afterwards, so a
// handler's upvalues are private to its context, never shared by two
// requests in flight.
type funcgen struct {
	name    string
	handles []handle // by handle number, from 0
	gen     *glua.LFunction
	arg     glua.LValue // nil: the generator gets the context alone
	objs    int         // how many objects a context may make (ready's u)
	ready   bool
	router  *fgenRouter // set for mcp.router_new's objects
	free    []*rctx
	entry   *glua.LFunction // what mcp.attach put in the hook table, made at the first attach
	count   *funcCount      // the router's counters of name (v2_funcstats.go), set when attached
	ease    slotEase        // when free contexts go (v2_slotcache.go)
}

// handle is what a generator's handle sends its requests to: a pool, or
// another generator (a sub-generator, whose handler's result is the
// handle's response; see v2_subgen.go).
type handle struct {
	pool  *pool
	child *funcgen
}

// maxFreeRctx bounds a generator's free list; a context returned beyond
// it is dropped, whatever the pressure (v2_slotcache.go) says.
const maxFreeRctx = 1024

// errStartFailure answers a request whose generator or router could not
// give it a handler (memcached's wording).
const errStartFailure = wireError("lua start failure")

func checkFuncgen(L *glua.LState, n int) *funcgen {
	fg, ok := userValue[*funcgen](L.Get(n))
	if !ok {
		L.ArgError(n, "function generator expected")
	}
	return fg
}

// funcgenNew is mcp.funcgen_new().
func (w *worker) funcgenNew(L *glua.LState) int {
	L.Push(w.funcgenValue(&funcgen{}))
	return 1
}

func (w *worker) funcgenValue(fg *funcgen) *glua.LUserData {
	ud := w.L.NewUserData()
	ud.Value = fg
	ud.Metatable = w.v2.fgenMT
	return ud
}

// fgenNewHandle is fgen:new_handle(pool | fgen): it returns the handle's
// number, counted from 0 as in memcached.
func (w *worker) fgenNewHandle(L *glua.LState) int {
	fg := checkFuncgen(L, 1)
	if fg.ready {
		L.RaiseError("cannot modify function generator after calling ready")
	}
	var h handle
	switch obj := L.Get(2).(type) {
	case *glua.LUserData:
		switch v := obj.Value.(type) {
		case *pool:
			h.pool = v
		case *internalHandler:
			if w.r.internalPool == nil {
				L.RaiseError("mcp.internal_handler: %s", errNoInternal)
			}
			h.pool = w.r.internalPool
		case *funcgen:
			if v.router != nil {
				L.RaiseError("cannot assign a router to a handle in new_handle")
			}
			h.child = v
		}
	}
	if h.pool == nil && h.child == nil {
		L.RaiseError("invalid argument to new_handle")
	}
	fg.handles = append(fg.handles, h)
	L.Push(glua.LNumber(len(fg.handles) - 1))
	return 1
}

// fgenReady is fgen:ready({f = generator, a = arg, n = name, u = count}).
// It calls the generator once, as memcached does, so a generator that
// fails or returns no function fails the route stage. It returns the
// generator (memcached's return value is unspecified; scripts ignore it).
func (w *worker) fgenReady(L *glua.LState) int {
	fg := checkFuncgen(L, 1)
	opts := L.CheckTable(2)
	if fg.ready {
		L.RaiseError("cannot modify function generator after calling ready")
	}
	gen, ok := opts.RawGetString("f").(*glua.LFunction)
	if !ok {
		L.RaiseError("Must specify generator function ('f') to fgen:ready")
	}
	fg.gen = gen
	if a := opts.RawGetString("a"); a != glua.LNil {
		fg.arg = a
	}
	fg.name = "anonymous"
	if n, ok := opts.RawGetString("n").(glua.LString); ok {
		fg.name = string(n)
	}
	for i, h := range fg.handles {
		// A sub-generator must be ready first: it makes its request
		// contexts as this one's requests need them, and a generator can
		// so never be its own handle, however indirectly.
		if h.child != nil && !h.child.ready {
			L.RaiseError("fgen:ready: handle %d is a function generator that is not ready (call its ready first)", i)
		}
	}
	if u, ok := opts.RawGetString("u").(glua.LNumber); ok {
		if u < 1 || u > 255 {
			L.RaiseError("user obj ('u') in fgen:ready must be between 1 and 255")
		}
		fg.objs = int(u)
	}
	rc, err := w.newRctx(fg, L)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	fg.free = append(fg.free, rc)
	fg.ready = true
	L.Push(L.Get(1))
	return 1
}

// attachV2 is mcp.attach's way for a function generator or a router: it
// returns the function that stands for v in the hook table.
func (w *worker) attachV2(L *glua.LState, v glua.LValue) (*glua.LFunction, bool) {
	fg, ok := userValue[*funcgen](v)
	if !ok {
		return nil, false
	}
	if !fg.ready {
		// memcached attaches it and fails every request ("lua start
		// failure"); refusing at load time says what is wrong.
		L.RaiseError("mcp.attach: function generator is not ready (call fgen:ready first)")
	}
	if fg.entry == nil {
		fg.entry = L.NewFunction(func(L *glua.LState) int {
			L.RaiseError("a function generator cannot be called as a function")
			return 0
		})
		w.v2.entries[fg.entry] = fg
	}
	w.countFuncgen(fg)
	return fg.entry, true
}

// startV2 turns the hook fn into the handler to run for req: for a
// function generator (or a router, which picks one), a request context's
// handler and that context; any other fn comes back unchanged. A request
// the router has no route for, or whose generator fails, gets
// errStartFailure.
func (w *worker) startV2(fn *glua.LFunction, req *codec.Request) (*glua.LFunction, *rctx, error) {
	if fn == nil || !fn.IsG {
		return fn, nil, nil
	}
	fg := w.v2.entries[fn]
	if fg == nil {
		return fn, nil, nil
	}
	if fg.router != nil {
		if fg = fg.router.route(req, w.r.cfg.Redis); fg == nil {
			return nil, nil, errStartFailure
		}
	}
	rc, err := w.takeRctx(fg)
	if err != nil {
		return nil, nil, err
	}
	return rc.fn, rc, nil
}

// takeRctx returns a free request context of fg, making one (and its
// handler) when there is none. When the generator fails, it logs why and
// returns what the client is told: the watchdog's reason if it stopped
// the generator, else errStartFailure.
func (w *worker) takeRctx(fg *funcgen) (*rctx, error) {
	rc, err := w.freeOrNewRctx(fg, nil)
	if err != nil {
		w.r.logScriptError("lua function generator failed", fg.name+": "+scriptMessage(err))
		var be *boundError
		if errors.As(err, &be) {
			return nil, be.stop.wire()
		}
		return nil, errStartFailure
	}
	return rc, nil
}

// freeOrNewRctx returns a free request context of fg, or a new one made
// as newRctx makes it.
func (w *worker) freeOrNewRctx(fg *funcgen, L *glua.LState) (*rctx, error) {
	if n := len(fg.free); n > 0 {
		rc := fg.free[n-1]
		fg.free[n-1] = nil
		fg.free = fg.free[:n-1]
		return rc, nil
	}
	return w.newRctx(fg, L)
}

// newRctx makes a request context of fg and calls the generator for its
// handler: in L (the route stage, where an error is the script's) or, with
// L nil, on the worker's main thread, bounded by MaxRun and MaxAlloc.
func (w *worker) newRctx(fg *funcgen, L *glua.LState) (*rctx, error) {
	rc := &rctx{fg: fg, slots: make([]slot, len(fg.handles))}
	for i, h := range fg.handles {
		rc.slots[i].pool, rc.slots[i].child = h.pool, h.child
	}
	ud := w.L.NewUserData()
	ud.Value = rc
	ud.Metatable = w.v2.rctxMT
	rc.ud = ud
	args := []glua.LValue{ud}
	if fg.arg != nil {
		args = append(args, fg.arg)
	}
	var out glua.LValue
	if L != nil {
		L.Push(fg.gen)
		for _, a := range args {
			L.Push(a)
		}
		L.Call(len(args), 1)
		out = L.Get(-1)
		L.Pop(1)
	} else {
		ret, err := w.callBounded(fg.gen, 1, args...)
		if err != nil {
			return nil, err
		}
		out = ret[0]
	}
	fn, ok := out.(*glua.LFunction)
	if !ok {
		return nil, errNoFunction
	}
	rc.fn, rc.dir = fn, bytecode.MatchEnqueueHandler(fn)
	if err := w.pinChildren(rc, L); err != nil {
		return nil, err
	}
	fg.count.addSlots(1)
	fg.ease.made()
	return rc, nil
}

// errNoFunction is a generator that returned something else than the
// handler.
const errNoFunction = wireError("function generator didn't return a function")

// putRctx returns rc, idle, to its generator's free list. The context
// the generator's next request takes may then be another, whose handler
// may route elsewhere: the pools remembered for the lock-free way
// (direct_fast.go) are forgotten, as when Lua code runs.
func (w *worker) putRctx(rc *rctx) {
	rc.reset()
	fg := rc.fg
	switch {
	case rc.pinned: // stays in its parent's slot
	case len(fg.free) < maxFreeRctx && fg.ease.keep(len(fg.free), time.Now):
		fg.free = append(fg.free, rc)
	default:
		w.dropRctx(rc)
	}
	w.luaGen.Add(1)
}

// dropRctx lets idle rc go, with the contexts pinned to its slots; a
// pinned one still serving goes to its own generator's free list when
// done.
func (w *worker) dropRctx(rc *rctx) {
	rc.fg.ease.total--
	rc.fg.count.addSlots(-1)
	for i := range rc.slots {
		if sub := rc.slots[i].sub; sub != nil {
			rc.slots[i].sub = nil
			sub.pinned = false
			if !sub.serving {
				w.dropRctx(sub)
			}
		}
	}
}

// untakeRctx gives back rc, which takeRctx has just returned and nothing
// has used, to the top of its generator's free list: the free list is as
// it was (but for a context the generator has just made, which is new
// anyway), so the next request takes rc again and what the lock-free way
// remembers stays true.
func (w *worker) untakeRctx(rc *rctx) {
	if fg := rc.fg; len(fg.free) < maxFreeRctx {
		fg.free = append(fg.free, rc)
	} else {
		w.dropRctx(rc)
	}
}
