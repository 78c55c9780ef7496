// Package bytecode recognises, by their gopher-lua bytecode, the two
// shapes of route handler the lua router runs without entering Lua: a V1
// handler that only calls a pool, `return pool(r)` (PoolCall), and a V2
// handler that only enqueues to one handle and waits,
// `return rctx:enqueue_and_wait(r, h)` (Enqueue).
//
// It reads a compiled function and nothing else: whether the upvalues a
// match names hold a pool, a request context or a handle is for the
// caller to check at each request, with the Lua state held. Its functions
// keep no state and are safe for concurrent use on functions no one
// is compiling.
package bytecode

import glua "github.com/yuin/gopher-lua"

// gopher-lua's instruction layout (opcode.go): a 6-bit opcode, then A (8
// bits), C (9 bits), B (9 bits); or A and an 18-bit Bx.
func opcode(i uint32) int { return int(i >> 26) }
func argA(i uint32) int   { return int(i>>18) & 0xff }
func argB(i uint32) int   { return int(i & 0x1ff) }
func argC(i uint32) int   { return int(i>>9) & 0x1ff }
func argBx(i uint32) int  { return int(i & 0x3ffff) }

func abc(op, a, b, c int) uint32 {
	return uint32(op)<<26 | uint32(a&0xff)<<18 | uint32(c&0x1ff)<<9 | uint32(b&0x1ff)
}

// rkConstant is the bit of an RK operand that makes it a constant index.
const rkConstant = 1 << 8

// rkString returns the string constant an RK operand names, and false when
// it names a register or a constant that is no string.
func rkString(p *glua.FunctionProto, rk int) (glua.LString, bool) {
	if rk&rkConstant == 0 || rk&^rkConstant >= len(p.Constants) {
		return "", false
	}
	s, ok := p.Constants[rk&^rkConstant].(glua.LString)
	return s, ok
}

// oneParameter reports whether p takes exactly one parameter, no varargs.
func oneParameter(p *glua.FunctionProto) bool {
	return p.NumParameters == 1 && p.IsVarArg == 0
}
