package bytecode

import (
	"slices"

	glua "github.com/yuin/gopher-lua"
)

// The commonest V1 handler is `function(r) return pool(r) end` (or
// `return pools.main(r)`), where pool is a pool proxy the handler closes
// over.

// PoolCall describes a handler whose body is `return U(r)` or
// `return U.k(r)` for its only parameter r and its upvalue U.
type PoolCall struct {
	Up  int    // index of U among the handler's upvalues
	Key string // k; "" for `return U(r)`
}

// poolCallTail is the code after the function is in R1: R2 := r, return
// R1(R2), and the compiler's closing returns.
var poolCallTail = []uint32{
	abc(glua.OP_MOVE, 2, 0, 0),
	abc(glua.OP_TAILCALL, 1, 2, 0),
	abc(glua.OP_RETURN, 1, 0, 0),
	abc(glua.OP_RETURN, 0, 1, 0),
}

// MatchPoolCall reports whether fn is a handler `return U(r)` or
// `return U.k(r)`, and which upvalue and key it calls.
func MatchPoolCall(fn *glua.LFunction) (PoolCall, bool) {
	if fn.IsG || fn.Proto == nil {
		return PoolCall{}, false
	}
	p := fn.Proto
	code := p.Code
	// R1 := U
	if !oneParameter(p) || len(code) < 1+len(poolCallTail) ||
		opcode(code[0]) != glua.OP_GETUPVAL || argA(code[0]) != 1 {
		return PoolCall{}, false
	}
	d := PoolCall{Up: argB(code[0])}
	rest := code[1:]
	if opcode(rest[0]) == glua.OP_GETTABLEKS {
		key, ok := fieldKey(p, rest[0])
		if !ok {
			return PoolCall{}, false
		}
		d.Key = key
		rest = rest[1:]
	}
	if d.Up >= len(fn.Upvalues) || !slices.Equal(rest, poolCallTail) {
		return PoolCall{}, false
	}
	return d, true
}

// fieldKey returns k of the instruction R1 := R1.k, and false when i reads
// another register or a key that is not a string constant.
func fieldKey(p *glua.FunctionProto, i uint32) (string, bool) {
	if argA(i) != 1 || argB(i) != 1 {
		return "", false
	}
	k, ok := rkString(p, argC(i))
	return string(k), ok
}
