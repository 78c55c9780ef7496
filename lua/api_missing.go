package lua

import (
	glua "github.com/yuin/gopher-lua"
)

// A route file written for a newer memcached calls what shardproxy does
// not have (mcp.ratelim_tbf, dofile, ...). Lua reads an absent field or
// global as nil, and gopher-lua's error for calling it, "attempt to call a
// non-function object", names nothing. The read itself must stay nil: a
// file may test `if mcp.ratelim_tbf then` to choose
// between memcached's API generations, and its V1 branch must run here.
// So the name is given at the call instead. The tables a script reads
// these names from (mcp, os, the request and response methods, and the
// globals while the file loads) note each absent name read, with the
// thread, function and line that read it; nil's own metatable, whose
// __call and __index run only when a script calls or indexes nil, raises
// an error naming the absent name last read on the caller's line, or
// gopher-lua's own error when there is none. A name read and passed on
// (mcp.WAIT_ANY as an argument) cannot be caught; what receives the nil
// fails as it would have.

// Reasons an absent name gives.
const (
	notYet     = "is not supported by shardproxy yet"
	notHere    = "is not available in shardproxy route files"
	noSuchName = "does not exist"
	routesOnly = "can only be called from mcp_config_routes"
	inRoutelib = "belongs to memcached's routelib: give the pool lua: ROUTELIB.lua (routelib.lua of memcached) and lua_arg: THIS_FILE"
)

// recentReads is how many absent names a state remembers.
const recentReads = 8

// absentKind is what memcached's API makes of a name; it decides which of
// the names read on one line a call or an index is about.
type absentKind int8

const (
	kindUnknown absentKind = iota // a name memcached's proxy lacks too
	kindFunc                      // a function: called, never indexed
	kindValue                     // a constant or a table: never called
)

// mcpAbsent are the names memcached's proxy (1.6.12 to 1.6.45) puts in the
// mcp table that shardproxy does not: the V2 API and a few V1 additions.
var mcpAbsent = map[string]absentKind{}

// routeStageOnly are the mcp functions of the route stage that the config
// stage lacks (the route stage has the config stage's as stubs).
var routeStageOnly = map[string]bool{
	"attach": true, "await": true, "await_logerrors": true, "request": true,
	"log_req": true, "log_reqsample": true, "stat": true, "internal": true,
	"funcgen_new": true, "router_new": true, "ratelim_tbf": true,
	"req_inspector_new": true, "res_inspector_new": true,
	"req_mutator_new": true, "res_mutator_new": true,
	"time_real_millis": true, "time_mono_millis": true, // nil at config time, as in memcached
}

// requestAbsent, responseAbsent and rctxAbsent are the request, response
// and request context methods of memcached 1.6.45's proxy that shardproxy
// lacks. (tls_peer_cn: shardproxy's client TLS does not ask for client
// certificates.)
var (
	requestAbsent  = map[string]bool{}
	responseAbsent = map[string]bool{}
	rctxAbsent     = map[string]bool{"tls_peer_cn": true}
)

// sandboxAbsent are the globals the sandbox removes (see newState), and
// osAbsent the functions of os it removes. (dofile, loadfile and require
// are there, for the files beside the route file: engine_files.go.)
var (
	sandboxAbsent = map[string]struct {
		why  string
		kind absentKind
	}{
		"module": {notHere, kindFunc},
		"io":     {notHere, kindValue}, "debug": {notHere, kindValue},
		"package": {notHere, kindValue}, "coroutine": {notHere, kindValue},
		"channel": {notHere, kindValue},
	}
	osAbsent = map[string]bool{
		"execute": true, "exit": true, "getenv": true, "remove": true,
		"rename": true, "tmpname": true, "setlocale": true,
	}
)

// routelibGlobals are the functions memcached's route library (routelib,
// memcached-proxylibs) defines for its config files, which call them at
// their top level: `pools{...}`, `routes{ default = route_direct{...} }`.
var routelibGlobals = map[string]bool{
	"settings": true, "pools": true, "routes": true, "cmdmap": true,
	"local_zone": true, "local_zone_from_env": true, "local_zone_from_file": true,
	"verbose": true, "verbosity": true, "register_route_handlers": true,
	"route_direct": true, "route_allfastest": true, "route_allsync": true,
	"route_failover": true, "route_zfailover": true, "route_split": true,
	"route_ttl": true, "route_null": true, "route_ratelim": true, "route_random": true,
}

// absentRead is an absent name a script read.
type absentRead struct {
	L    *glua.LState    // the thread that read it
	fn   *glua.LFunction // the function that read it
	line int
	name string // as written ("mcp.ratelim_tbf", "dofile"); a method's own name
	recv string // for a method: what it is a method of ("request"); else ""
	why  string // the reason; "" for a global that is not defined
	kind absentKind
}

// absentReads remembers the absent names a state's code read last. It
// belongs to the state and is used under the state's lock.
type absentReads struct {
	recent  [recentReads]absentRead
	next    int
	globals *glua.LTable // the globals' metatable, until sealGlobals
}

// watchAbsent gives L's nil a metatable that names what a script called or
// indexed, and watches L's globals (until sealGlobals) and os.
func watchAbsent(L *glua.LState) *absentReads {
	a := &absentReads{}
	mt := L.NewTable()
	call := func(L *glua.LState) int { return a.raise(L, kindFunc) }
	index := func(L *glua.LState) int { return a.raise(L, kindValue) }
	mt.RawSetString("__call", L.NewFunction(call))
	mt.RawSetString("__index", L.NewFunction(index))
	mt.RawSetString("__metatable", glua.LFalse) // getmetatable(nil) cannot reach it
	L.SetMetatable(glua.LNil, mt)
	globals := L.Get(glua.GlobalsIndex).(*glua.LTable)
	a.globals = a.watch(L, globals, func(name string) (absentRead, bool) {
		if s, ok := sandboxAbsent[name]; ok {
			return absentRead{name: name, why: s.why, kind: s.kind}, true
		}
		if routelibGlobals[name] {
			return absentRead{name: name, why: inRoutelib, kind: kindFunc}, true
		}
		return absentRead{name: name}, true
	})
	if os, ok := L.GetGlobal("os").(*glua.LTable); ok {
		a.watch(L, os, func(name string) (absentRead, bool) {
			return absentRead{name: "os." + name, why: notHere, kind: kindFunc}, osAbsent[name]
		})
	}
	return a
}

// watchMCP watches the mcp table of a stage; config is whether it is the
// config stage's.
func (a *absentReads) watchMCP(L *glua.LState, mcp *glua.LTable, config bool) {
	a.watch(L, mcp, func(name string) (absentRead, bool) {
		ab := absentRead{name: "mcp." + name, why: noSuchName}
		if kind, ok := mcpAbsent[name]; ok {
			ab.why, ab.kind = notYet, kind
		} else if config && routeStageOnly[name] {
			ab.why, ab.kind = routesOnly, kindFunc
		}
		return ab, true
	})
}

// watchMethods watches the method table of a request or response (recv
// names it) for the methods in known.
func (a *absentReads) watchMethods(L *glua.LState, methods *glua.LTable, recv string,
	known map[string]bool) {
	a.watch(L, methods, func(name string) (absentRead, bool) {
		return absentRead{name: name, recv: recv, why: notYet, kind: kindFunc}, known[name]
	})
}

// sealGlobals stops watching the globals, once the file has loaded: a
// handler may read a global it never set (`if DEBUG then`) on every
// request, which should cost no more than a table lookup.
func (a *absentReads) sealGlobals(L *glua.LState) {
	g := L.Get(glua.GlobalsIndex).(*glua.LTable)
	if g.Metatable == a.globals { // the script may have set its own
		g.Metatable = glua.LNil
	}
}

// describeFunc describes an absent name read from a table, and tells
// whether to note it.
type describeFunc func(name string) (absentRead, bool)

// watch gives t a metatable whose __index notes the names describe
// accepts, and returns that metatable. Reads of present names never reach
// it.
func (a *absentReads) watch(L *glua.LState, t *glua.LTable, describe describeFunc) *glua.LTable {
	mt := L.NewTable()
	mt.RawSetString("__index", L.NewFunction(func(L *glua.LState) int {
		if name, ok := L.Get(2).(glua.LString); ok {
			if ab, ok := describe(string(name)); ok {
				a.note(L, ab)
			}
		}
		L.Push(glua.LNil)
		return 1
	}))
	t.Metatable = mt
	return mt
}

// caller returns the Lua function running in L below the Go functions on
// top of the stack, and its current line.
func caller(L *glua.LState) (*glua.LFunction, *glua.Debug, bool) {
	for level := 1; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return nil, nil, false
		}
		v, err := L.GetInfo("fl", dbg, glua.LNil)
		fn, ok := v.(*glua.LFunction)
		if err != nil || !ok {
			return nil, nil, false
		}
		if !fn.IsG {
			return fn, dbg, true
		}
	}
}

// note remembers ab as read by L's running Lua function.
func (a *absentReads) note(L *glua.LState, ab absentRead) {
	fn, dbg, ok := caller(L)
	if !ok {
		return
	}
	ab.L, ab.fn, ab.line = L, fn, dbg.CurrentLine
	a.recent[a.next] = ab
	a.next = (a.next + 1) % recentReads
}

// raise is nil's __call (use kindFunc) and __index (use kindValue): it
// raises an error naming the absent name the caller's line read last that
// can be used so, preferring names memcached has; without one, the error
// gopher-lua raises itself.
func (a *absentReads) raise(L *glua.LState, use absentKind) int {
	if ab, ok := a.take(L, use); ok {
		L.RaiseError("%s", ab.message(L, use))
	}
	if use == kindFunc {
		L.RaiseError("attempt to call a non-function object")
	}
	L.RaiseError("attempt to index a non-table object(nil) with key '%s'", L.Get(2).String())
	return 0
}

// take finds and forgets the absent name behind a nil L's caller calls
// (use kindFunc) or indexes (kindValue).
func (a *absentReads) take(L *glua.LState, use absentKind) (absentRead, bool) {
	fn, dbg, ok := caller(L)
	if !ok {
		return absentRead{}, false
	}
	wrong := kindValue // a constant is never called, a function never indexed
	if use == kindValue {
		wrong = kindFunc
	}
	best := -1
	for i := range recentReads {
		j := (a.next - 1 - i + recentReads) % recentReads // newest first
		ab := &a.recent[j]
		if ab.L != L || ab.fn != fn || ab.line != dbg.CurrentLine || ab.kind == wrong {
			continue
		}
		if best < 0 || (ab.kind != kindUnknown && a.recent[best].kind == kindUnknown) {
			best = j
		}
	}
	if best < 0 {
		return absentRead{}, false
	}
	ab := a.recent[best]
	a.recent[best] = absentRead{}
	return ab, true
}

// message is the error for using ab so.
func (ab absentRead) message(L *glua.LState, use absentKind) string {
	name := ab.name
	if ab.recv != "" {
		name = receiver(L, ab.recv) + ":" + ab.name
	}
	if ab.why != "" {
		return name + " " + ab.why
	}
	if use == kindFunc { // Lua 5.4's wording, as memcached reports it
		return "attempt to call a nil value (global '" + name + "')"
	}
	return "attempt to index a nil value (global '" + name + "')"
}

// receiver names the receiver of a method call on nil as the caller wrote
// it: the local variable holding it (`r` in r:raw_line()), or recv.
func receiver(L *glua.LState, recv string) string {
	self, ok := L.Get(2).(*glua.LUserData) // after the nil being called
	if !ok {
		return recv
	}
	_, dbg, ok := caller(L)
	if !ok {
		return recv
	}
	for i := 1; ; i++ {
		name, v := L.GetLocal(dbg, i)
		if name == "" {
			return recv
		}
		if v == self && name[0] != '(' {
			return name
		}
	}
}
