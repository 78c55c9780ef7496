package bytecode

import (
	"slices"

	glua "github.com/yuin/gopher-lua"
)

// The commonest V2 handler is the one a function generator returns in
// examples/lua/v2_basic.lua: `function(r) return rctx:enqueue_and_wait(r,
// h) end`, where rctx is the request context the generator was given and h
// a handle (an upvalue, or a number written in the handler).

// Enqueue describes a handler whose body is `return U:enqueue_and_wait(r,
// H)` (or `local res = U:enqueue_and_wait(r, H) return res`) for its only
// parameter r, an upvalue U and H an upvalue or a constant. The zero
// Enqueue (OK false) describes any other function.
type Enqueue struct {
	OK       bool
	CtxUp    int         // index of U among the handler's upvalues
	HandleUp int         // index of H among them, or -1 when H is constant
	Handle   glua.LValue // H when it is a constant
}

// enqueueTails is the code after H is in R4: the call and the compiler's
// closing returns, in its tail-call and its local-variable forms.
var enqueueTails = [][]uint32{
	{abc(glua.OP_TAILCALL, 1, 4, 0), abc(glua.OP_RETURN, 1, 0, 0), abc(glua.OP_RETURN, 0, 1, 0)},
	{abc(glua.OP_CALL, 1, 4, 2), abc(glua.OP_RETURN, 1, 2, 0), abc(glua.OP_RETURN, 0, 1, 0)},
}

// MatchEnqueue reports whether p is the prototype of a handler
// `return U:enqueue_and_wait(r, H)`, and where U and H are.
func MatchEnqueue(p *glua.FunctionProto) Enqueue {
	code := p.Code
	if !oneParameter(p) || len(code) != 7 || !enqueueCall(p) {
		return Enqueue{}
	}
	d := Enqueue{OK: true, CtxUp: argB(code[0]), HandleUp: -1}
	// R4 := H
	switch i := code[3]; {
	case opcode(i) == glua.OP_GETUPVAL && argA(i) == 4:
		d.HandleUp = argB(i)
	case opcode(i) == glua.OP_LOADK && argA(i) == 4 && argBx(i) < len(p.Constants):
		d.Handle = p.Constants[argBx(i)]
	default:
		return Enqueue{}
	}
	for _, tail := range enqueueTails {
		if slices.Equal(code[4:], tail) {
			return d
		}
	}
	return Enqueue{}
}

// enqueueCall reports whether p's code opens with the method call's
// prologue: R1 := U; R2 := R1; R1 := R1["enqueue_and_wait"]; R3 := r.
func enqueueCall(p *glua.FunctionProto) bool {
	code := p.Code
	if opcode(code[0]) != glua.OP_GETUPVAL || argA(code[0]) != 1 ||
		opcode(code[1]) != glua.OP_SELF || argA(code[1]) != 1 || argB(code[1]) != 1 ||
		code[2] != abc(glua.OP_MOVE, 3, 0, 0) {
		return false
	}
	name, ok := rkString(p, argC(code[1]))
	return ok && name == "enqueue_and_wait"
}

// MatchEnqueueHandler is MatchEnqueue of fn, a request context's handler,
// with its upvalue indexes checked: all of it is fixed for fn's life, so a
// context does it once, when it is made.
func MatchEnqueueHandler(fn *glua.LFunction) Enqueue {
	if fn.IsG || fn.Proto == nil {
		return Enqueue{}
	}
	d := MatchEnqueue(fn.Proto)
	if d.CtxUp >= len(fn.Upvalues) || d.HandleUp >= len(fn.Upvalues) {
		return Enqueue{}
	}
	return d
}
