package lua

import (
	"bytes"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// fgenRouter is what mcp.router_new builds (memcached's struct
// mcp_funcgen_router): it picks a function generator for each request by
// a part of its key, then by its command. It is a funcgen (with router
// set), so mcp.attach takes it like any generator.
//
// Key matching, as memcached's mcp_funcgen_route:
//   - mode "prefix" (the default, "/" as stop; as in memcached, start and
//     stop are read only when mode is given): the route key is what comes before the
//     first occurrence of stop ("/" by default) in the key;
//   - mode "anchor": the key must begin with start, and the route key is
//     what follows start, up to the first stop after it (start and stop
//     default to "/" when both are absent). A long anchor (start or stop
//     longer than one byte) also needs the key to be at least two bytes
//     longer than start.
//
// No separator, an empty route key or a key not in map falls back to cmap
// (by command), then default; a map entry that is a table picks by command,
// then its CMD_ANY_STORAGE entry, then falls back the same way. A request
// without a key, or with nowhere to go, is answered "SERVER_ERROR lua
// start failure", memcached's reply.
type fgenRouter struct {
	anchor      bool
	start, stop []byte
	cmdOnly     bool // only cmap and default: no map was given
	routes      map[string]routeEntry
	cmap        map[glua.LValue]*funcgen
	def         *funcgen
}

// routeEntry is a map value: a generator, or generators by command.
type routeEntry struct {
	fg   *funcgen
	cmds map[glua.LValue]*funcgen
}

// keyFilterMax is the longest start or stop (memcached's
// KEY_HASH_FILTER_MAX).
const keyFilterMax = 5

// route returns the generator for req, or nil.
func (r *fgenRouter) route(req *codec.Request, redis bool) *funcgen {
	if len(req.Keys) == 0 || len(req.Keys[0]) == 0 {
		return nil
	}
	cmd := commandKey(req, redis)
	if r.cmdOnly {
		return r.fallback(cmd)
	}
	name, ok := r.routeKey(req.Keys[0])
	if !ok {
		return r.fallback(cmd)
	}
	e, found := r.routes[string(name)]
	switch {
	case !found:
		return r.fallback(cmd)
	case e.fg != nil:
		return e.fg
	}
	if fg := e.cmds[cmd]; fg != nil {
		return fg
	}
	if fg := e.cmds[glua.LNumber(cmdAnyStorage)]; fg != nil {
		return fg
	}
	return r.fallback(cmd)
}

// commandKey is how a command map names req's command: its CMD_* number,
// or on a Redis pool its name.
func commandKey(req *codec.Request, redis bool) glua.LValue {
	if redis {
		return glua.LString(req.Name)
	}
	return glua.LNumber(mcCommandNumber(req.Name))
}

func (r *fgenRouter) fallback(cmd glua.LValue) *funcgen {
	if fg := r.cmap[cmd]; fg != nil {
		return fg
	}
	return r.def
}

// routeKey returns the part of key that selects the map entry; false when
// there is none (no separator, a missing anchor, an empty route key).
func (r *fgenRouter) routeKey(key []byte) ([]byte, bool) {
	if r.anchor {
		long := len(r.start) > 1 || len(r.stop) > 1
		if long && len(r.start)+2 > len(key) || !bytes.HasPrefix(key, r.start) {
			return nil, false
		}
		key = key[len(r.start):]
	}
	i := bytes.Index(key, r.stop)
	if i <= 0 {
		return nil, false
	}
	return key[:i], true
}

// routerNew is mcp.router_new({map =, cmap =, mode =, start =, stop =,
// default =}).
func (w *worker) routerNew(L *glua.LState) int {
	opts, ok := L.Get(1).(*glua.LTable)
	if !ok {
		L.RaiseError("Must pass a table of arguments to mcp.router_new")
	}
	r := &fgenRouter{stop: []byte("/")}
	m := opts.RawGetString("map")
	cm := opts.RawGetString("cmap")
	switch {
	case m != glua.LNil:
		r.routes = w.routerMap(L, m)
		if mode, ok := opts.RawGetString("mode").(glua.LString); ok {
			routerMode(L, opts, r, string(mode))
		}
	case cm == glua.LNil:
		L.RaiseError("Must pass map and/or cmap to mcp.router_new")
	default:
		r.cmdOnly = true
	}
	if cm != glua.LNil {
		t, ok := cm.(*glua.LTable)
		if !ok {
			L.RaiseError("Must pass a table to cmap argument of mcp.router_new")
		}
		r.cmap = w.commandMap(L, t)
	}
	if d := opts.RawGetString("default"); d != glua.LNil {
		r.def = routeTarget(L, d, "default")
	}
	L.Push(w.funcgenValue(&funcgen{name: "mcp_router", router: r, ready: true}))
	return 1
}

// routerMode reads mode, start and stop.
func routerMode(L *glua.LState, opts *glua.LTable, r *fgenRouter, mode string) {
	stop := routerArg(L, opts, "stop")
	switch mode {
	case "prefix":
		if stop != nil {
			r.stop = stop
		}
	case "anchor":
		start := routerArg(L, opts, "start")
		switch {
		case start == nil && stop == nil:
			r.start = []byte("/")
		case start == nil || stop == nil:
			L.RaiseError("must specify start and stop if mode is anchor in mcp.router_new")
		default:
			r.start, r.stop = start, stop
		}
		r.anchor = true
	default:
		L.RaiseError("unknown type passed to mcp.router_new")
	}
}

// routerArg reads the string option name: nil when absent.
func routerArg(L *glua.LState, opts *glua.LTable, name string) []byte {
	switch v := opts.RawGetString(name).(type) {
	case glua.LString:
		if len(v) == 0 {
			L.RaiseError("must pass a non-zero length string to %s in mcp.router_new", name)
		}
		if len(v) > keyFilterMax {
			L.RaiseError("%s is too long in mcp.router_new", name)
		}
		return []byte(v)
	case *glua.LNilType:
		return nil
	}
	L.RaiseError("must pass a string to %s in mcp.router_new", name)
	return nil
}

// routerMap reads the map option.
func (w *worker) routerMap(L *glua.LState, v glua.LValue) map[string]routeEntry {
	t, ok := v.(*glua.LTable)
	if !ok {
		L.RaiseError("Must pass a table to map argument of router_new")
	}
	routes := map[string]routeEntry{}
	t.ForEach(func(k, v glua.LValue) {
		var e routeEntry
		switch v := v.(type) {
		case *glua.LUserData:
			e.fg = routeTarget(L, v, "map")
		case *glua.LTable:
			e.cmds = w.commandMap(L, v)
		default:
			L.RaiseError("unhandled data in router_new map")
		}
		if name, ok := k.(glua.LString); ok { // memcached looks keys up as strings: others never match
			routes[string(name)] = e
		}
	})
	return routes
}

// commandMap reads a table of command -> generator: mcp.CMD_* numbers of
// key commands and CMD_ANY_STORAGE, or on a Redis pool command names.
func (w *worker) commandMap(L *glua.LState, t *glua.LTable) map[glua.LValue]*funcgen {
	cmds := map[glua.LValue]*funcgen{}
	t.ForEach(func(k, v glua.LValue) {
		switch k := k.(type) {
		case glua.LNumber:
			n := int(k)
			if glua.LNumber(n) != k {
				L.RaiseError("Non integer key in router command map in router_new")
			}
			if (n <= 0 || n >= cmdEndStorage) && n != cmdAnyStorage {
				L.RaiseError("Bad command in router command map in router_new")
			}
		case glua.LString:
			if !w.r.cfg.Redis {
				L.RaiseError("Non integer key in router command map in router_new")
			}
		default:
			L.RaiseError("Non integer key in router command map in router_new")
		}
		cmds[k] = routeTarget(L, v, "command map")
	})
	return cmds
}

// routeTarget checks that v, a route of a router, is a ready function
// generator. (memcached takes a router or a generator not ready here and
// fails each request routed to it; refusing at load time says why.)
func routeTarget(L *glua.LState, v glua.LValue, where string) *funcgen {
	fg, ok := userValue[*funcgen](v)
	switch {
	case !ok:
		L.RaiseError("mcp.router_new: %s values must be function generators", where)
	case fg.router != nil:
		L.RaiseError("mcp.router_new: a router cannot be a route of another router")
	case !fg.ready:
		L.RaiseError("mcp.router_new: function generator is not ready (call fgen:ready first)")
	}
	return fg
}
