package lua

import (
	glua "github.com/yuin/gopher-lua"
)

// What the step lists of mutators and inspectors (v2_mutator.go,
// v2_inspector.go) share: each constructor argument is a table naming its
// step with t and giving the step's arguments by name. The lists are
// checked and compiled once, when the object is made, so that a call only
// runs the compiled steps. Error wording follows memcached 1.6.45 (where
// memcached's own check is a crash or a bug, a clear error instead).

// stepArgs reads the arguments of step n (1-based) of a mutator or an
// inspector (what names it in errors).
type stepArgs struct {
	L    *glua.LState
	t    *glua.LTable
	n    int
	what string // "mutator" or "inspector"
}

// stepTables returns the constructor's arguments as step tables.
func stepTables(L *glua.LState, what string) []stepArgs {
	steps := make([]stepArgs, 0, L.GetTop())
	for i := 1; i <= L.GetTop(); i++ {
		steps = append(steps, stepArgs{L: L, t: L.CheckTable(i), n: i, what: what})
	}
	return steps
}

func (a stepArgs) fail(format string, args ...any) {
	a.L.RaiseError("%s step %d: "+format, append([]any{a.what, a.n}, args...)...)
}

// name returns the step's type (its t).
func (a stepArgs) name() string {
	switch v := a.t.RawGetString("t").(type) {
	case glua.LString:
		return string(v)
	case glua.LNumber:
		return v.String()
	case *glua.LNilType:
		a.fail("must provide 't' argument")
	}
	a.fail("'t' must be a string")
	return ""
}

// str returns argument key as a string, or ok false when it is absent.
func (a stepArgs) str(key string) ([]byte, bool) {
	switch v := a.t.RawGetString(key).(type) {
	case glua.LString:
		return []byte(v), true
	case glua.LNumber:
		return []byte(v.String()), true
	case *glua.LNilType:
		return nil, false
	}
	a.fail("unsupported type for '%s'", key)
	return nil, false
}

// needStr returns required argument key as a string.
func (a stepArgs) needStr(key string) []byte {
	s, ok := a.str(key)
	if !ok {
		a.fail("must provide '%s' argument", key)
	}
	return s
}

// flag returns the required argument flag: one letter.
func (a stepArgs) flag() byte {
	f, ok := a.str("flag")
	if !ok {
		a.fail("must provide 'flag' argument")
	}
	if len(f) != 1 {
		a.fail("'flag' must be a single character")
	}
	if f[0] < 'A' || f[0] > 'z' {
		a.fail("'flag' must be alphanumeric")
	}
	return f[0]
}

// idx returns the required argument idx (1 for the first argument after
// the object a mutator writes to) as a position in the call's stack.
func (a stepArgs) idx() int {
	v := a.t.RawGetString("idx")
	if v == glua.LNil {
		a.fail("must provide 'idx' argument")
	}
	n, ok := v.(glua.LNumber)
	if !ok || glua.LNumber(int(n)) != n {
		a.fail("must provide 'idx' argument as an integer")
	}
	if n < 1 {
		a.fail("'idx' argument must be greater than 0")
	}
	return int(n) + 2
}

// optIdx is idx for the steps where memcached does not check it: absent
// or not an integer, it is 0, which names the object being written to.
func (a stepArgs) optIdx() int {
	if n, ok := a.t.RawGetString("idx").(glua.LNumber); ok && glua.LNumber(int(n)) == n {
		return int(n) + 2
	}
	return 2
}

// Where a step may be used.
const (
	forReq = 1 << iota
	forRes
	forRedis // a request step that means something for RESP
)

// stepDef is a step type T of a mutator or an inspector and where it may
// be used.
type stepDef[T any] struct {
	typ   T
	where int
}

// stepType returns the type defs gives the step's name, after checking
// that the step may be used in a response (res) or a request object, and
// on a Redis pool.
func stepType[T any](a stepArgs, defs map[string]stepDef[T], res, redis bool) T {
	name := a.name()
	def, ok := defs[name]
	if !ok {
		a.fail("unknown step type '%s'", name)
	}
	if (res && def.where&forRes == 0) || (!res && def.where&forReq == 0) {
		a.fail("step incompatible with %s type", a.what)
	}
	if redis && def.where&forRedis == 0 {
		a.fail("%s has no meaning for a Redis request", name)
	}
	return def.typ
}

// stepObject returns the object a mutator or an inspector is called on
// (argument 2): a request, or a response when res is set.
func stepObject(L *glua.LState, res bool, what string) (*request, *response) {
	obj, ok := L.Get(2).(*glua.LUserData)
	if !ok {
		L.ArgError(2, "userdata expected, got "+typeName(L.Get(2)))
	}
	rq, isReq := obj.Value.(*request)
	rs, isRes := obj.Value.(*response)
	if (res && !isRes) || (!res && !isReq) {
		L.ArgError(2, "invalid argument to "+what+" object")
	}
	return rq, rs
}

// typeName is the type of v as Lua's errors name it.
func typeName(v glua.LValue) string { return v.Type().String() }
