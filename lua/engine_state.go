package lua

import (
	"bytes"
	"context"
	"log/slog"
	"strings"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"shardproxy/lua/internal/compat"
)

// maxRep bounds the strings string.rep builds: route code has no use for
// more, and an unbounded one could take the process's memory in one call.
const maxRep = 16 << 20

// compile parses and compiles the route file once; every state runs the
// same prototype.
func compile(file string, src []byte) (*glua.FunctionProto, error) {
	chunk, err := parse.Parse(bytes.NewReader(compat.StripAttribs(src)), file)
	if err != nil {
		return nil, syntaxError(file, src, err)
	}
	proto, err := glua.Compile(chunk, file)
	if err != nil {
		return nil, syntaxError(file, src, err)
	}
	return proto, nil
}

// newState returns a sandboxed Lua state: the base library without file
// access, module loading or a forced garbage collection, and the string,
// table and math libraries, plus os.time, os.clock, os.date and
// os.difftime. There is no io, os.execute, debug, package, require,
// coroutine or channel. print writes to log.
func newState(log *slog.Logger) *glua.LState {
	L := glua.NewState(glua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       200,
		RegistrySize:        256,
		RegistryMaxSize:     1 << 20,
		RegistryGrowStep:    256,
		MinimizeStackMemory: true,
	})
	for _, lib := range []struct {
		name string
		open glua.LGFunction
	}{
		{glua.BaseLibName, glua.OpenBase},
		{glua.TabLibName, glua.OpenTable},
		{glua.StringLibName, glua.OpenString},
		{glua.MathLibName, glua.OpenMath},
		{glua.OsLibName, glua.OpenOs},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(glua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, name := range []string{"dofile", "loadfile", "require", "module", "_printregs", "newproxy"} {
		L.SetGlobal(name, glua.LNil)
	}
	L.SetGlobal("collectgarbage", L.NewFunction(func(L *glua.LState) int {
		L.Push(glua.LNumber(0)) // never stop the world for a script
		return 1
	}))
	L.SetGlobal("print", L.NewFunction(func(L *glua.LState) int {
		log.Info("lua print", "msg", joinArgs(L))
		return 0
	}))
	os := L.GetGlobal("os").(*glua.LTable)
	safeOS := L.NewTable()
	for _, name := range []string{"time", "clock", "date", "difftime"} {
		safeOS.RawSetString(name, os.RawGetString(name))
	}
	L.SetGlobal("os", safeOS)
	str := L.GetGlobal("string").(*glua.LTable)
	str.RawSetString("dump", glua.LNil)
	wrapFormat(L, str)
	rep := str.RawGetString("rep").(*glua.LFunction)
	str.RawSetString("rep", L.NewFunction(func(L *glua.LState) int {
		if n := L.CheckInt(2); n > 0 && len(L.CheckString(1))*n > maxRep {
			L.RaiseError("string.rep: result longer than %d bytes", maxRep)
		}
		L.Push(rep)
		L.Push(L.Get(1))
		L.Push(L.Get(2))
		L.Call(2, 1)
		return 1
	}))
	tbl := L.GetGlobal("table").(*glua.LTable)
	tbl.RawSetString("unpack", L.GetGlobal("unpack")) // Lua 5.2+ spelling
	load := L.GetGlobal("load").(*glua.LFunction)
	loadString := L.GetGlobal("loadstring").(*glua.LFunction)
	L.SetGlobal("load", L.NewFunction(func(L *glua.LState) int {
		fn := load // Lua 5.2+ load also takes the chunk as a string
		if _, ok := L.Get(1).(glua.LString); ok {
			fn = loadString
		}
		top := L.GetTop()
		L.Push(fn)
		for i := 1; i <= min(top, 2); i++ {
			L.Push(L.Get(i))
		}
		L.Call(min(top, 2), glua.MultRet)
		return L.GetTop() - top
	}))
	return L
}

// setContext gives L a cancelable context, which every coroutine created
// from it derives its own from. It returns the cancel function.
func setContext(L *glua.LState) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	L.SetContext(ctx)
	return cancel
}

// runSetup calls fn with args in L, a state being set up, stopping it
// after SetupTimeout or once it has allocated MaxAlloc bytes (engine_guard.go).
func (r *Router) runSetup(L *glua.LState, fn glua.LValue, nret int, args ...glua.LValue) ([]glua.LValue, error) {
	base := L.Context()
	ctx, cancel := context.WithTimeout(base, r.cfg.SetupTimeout)
	defer cancel()
	overMemory := guardSetup(ctx, cancel, r.cfg.MaxAlloc)
	L.SetContext(ctx)
	defer L.SetContext(base)
	top := L.GetTop()
	err := L.CallByParam(glua.P{Fn: fn, NRet: nret, Protect: true}, args...)
	timedOut := ctx.Err() == context.DeadlineExceeded
	cancel()
	memory := overMemory()
	if err != nil {
		if memory || timedOut {
			return nil, &boundError{err: err, stop: &stopError{memory: memory, d: r.cfg.SetupTimeout, limit: r.cfg.MaxAlloc}}
		}
		return nil, err
	}
	var out []glua.LValue
	for i := top + 1; i <= L.GetTop(); i++ {
		out = append(out, L.Get(i))
	}
	L.SetTop(top)
	return out, nil
}

// joinArgs renders L's arguments as print does: tab-separated tostring
// values.
func joinArgs(L *glua.LState) string {
	var b strings.Builder
	for i := 1; i <= L.GetTop(); i++ {
		if i > 1 {
			b.WriteByte('\t')
		}
		b.WriteString(L.ToStringMeta(L.Get(i)).String())
	}
	return b.String()
}
