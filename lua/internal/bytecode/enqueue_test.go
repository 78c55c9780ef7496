package bytecode

import (
	"testing"

	glua "github.com/yuin/gopher-lua"
)

// TestMatchEnqueue recognises the handlers a generator returns that only
// enqueue_and_wait to one handle, and nothing else.
func TestMatchEnqueue(t *testing.T) {
	for _, tc := range []struct {
		name, gen string
		want      bool
		handleUp  bool
	}{
		{"tail call, handle upvalue", `function(rctx, h) return function(r) return rctx:enqueue_and_wait(r, h) end end`, true, true},
		{"local result", `function(rctx, h) return function(r) local res = rctx:enqueue_and_wait(r, h) return res end end`, true, true},
		{"constant handle", `function(rctx) return function(r) return rctx:enqueue_and_wait(r, 0) end end`, true, false},
		{"upvalues the other way", `function(rctx, h) return function(r) local x = h return rctx:enqueue_and_wait(r, x) end end`, false, false},
		{"timeout", `function(rctx, h) return function(r) return rctx:enqueue_and_wait(r, h, 1) end end`, false, false},
		{"another method", `function(rctx, h) return function(r) return rctx:wait_handle(h) end end`, false, false},
		{"string handle", `function(rctx) return function(r) return rctx:enqueue_and_wait(r, "0") end end`, true, false},
		{"uses the result", `function(rctx, h) return function(r) local res = rctx:enqueue_and_wait(r, h) return res or "x" end end`, false, false},
		{"two parameters", `function(rctx, h) return function(r, x) return rctx:enqueue_and_wait(r, h) end end`, false, false},
		{"global context", `function(rctx, h) return function(r) return RCTX:enqueue_and_wait(r, h) end end`, false, false},
		{"field call", `function(rctx, h) return function(r) return rctx.enqueue_and_wait(r, h) end end`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			L := glua.NewState()
			defer L.Close()
			fn, err := L.LoadString("return " + tc.gen)
			if err != nil {
				t.Fatal(err)
			}
			p := fn.Proto.FunctionPrototypes[0].FunctionPrototypes[0]
			d := MatchEnqueue(p)
			if d.OK != tc.want || d.OK && (d.HandleUp >= 0) != tc.handleUp {
				t.Errorf("MatchEnqueue = %+v, want ok %t, handle upvalue %t\n%s", d, tc.want, tc.handleUp, p)
			}
		})
	}
}
