package bytecode

import (
	"testing"

	glua "github.com/yuin/gopher-lua"
)

// TestMatchPoolCall checks which handlers the router runs without entering Lua.
func TestMatchPoolCall(t *testing.T) {
	L := glua.NewState()
	defer L.Close()
	if err := L.DoString(`
local pool, pools, other = nil, {}, nil
handlers = {
  plain = function(r) return pool(r) end,
  field = function(r) return pools.main(r) end,
  bracket = function(r) return pools["z1"](r) end,
  named = function(req) return other(req) end,
  local_res = function(r) local res = pool(r) return res end,
  two_params = function(r, x) return pool(r) end,
  vararg = function(...) return pool(...) end,
  other_arg = function(r) return pool(pools) end,
  global = function(r) return gpool(r) end,
  nested = function(r) return pools.a.b(r) end,
  number_key = function(r) return pools[1](r) end,
  extra = function(r) local x = 1 return pool(r) end,
}`); err != nil {
		t.Fatal(err)
	}
	hs := L.GetGlobal("handlers").(*glua.LTable)
	for name, want := range map[string]PoolCall{"plain": {Up: 0}, "field": {Up: 0, Key: "main"}, "bracket": {Up: 0, Key: "z1"}, "named": {Up: 0}} {
		got, ok := MatchPoolCall(hs.RawGetString(name).(*glua.LFunction))
		if !ok || got != want {
			t.Errorf("%s: got %+v %v, want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"local_res", "two_params", "vararg", "other_arg", "global", "nested", "number_key", "extra"} {
		if d, ok := MatchPoolCall(hs.RawGetString(name).(*glua.LFunction)); ok {
			t.Errorf("%s taken for direct: %+v", name, d)
		}
	}
}
