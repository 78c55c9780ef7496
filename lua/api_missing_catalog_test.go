package lua

import (
	"testing"

	glua "github.com/yuin/gopher-lua"
)

// TestAbsentCatalog keeps the lists of absent names true: a name listed as
// absent must not be in the table it is about (implementing one means
// taking it off the list), and routeStageOnly is exactly the route stage's
// functions that the config stage lacks.
func TestAbsentCatalog(t *testing.T) {
	L := glua.NewState()
	defer L.Close()
	r := &Router{}
	w := &worker{r: r, L: L}
	cs := &configStage{r: r}
	stages := []struct {
		name  string
		funcs map[string]glua.LGFunction
	}{{"config", cs.functions()}, {"routes", w.functions()}}
	tables := map[string]*glua.LTable{}
	for _, st := range stages {
		mcp := r.newMCP(L, st.funcs)
		if st.name == "routes" {
			w.registerV2(mcp) // the V2 API, registered beside the V1 functions
		}
		tables[st.name] = mcp
		for name := range mcpAbsent {
			if mcp.RawGetString(name) != glua.LNil {
				t.Errorf("mcp.%s is in the %s stage's mcp table and listed in mcpAbsent", name, st.name)
			}
		}
	}
	for name := range stages[1].funcs {
		if _, ok := stages[0].funcs[name]; !ok && !routeStageOnly[name] {
			t.Errorf("mcp.%s is a route stage function the config stage lacks, not in routeStageOnly", name)
		}
	}
	for name := range routeStageOnly {
		if _, ok := stages[0].funcs[name]; ok {
			t.Errorf("mcp.%s is in routeStageOnly and the config stage has it", name)
		}
		if tables["routes"].RawGetString(name) == glua.LNil {
			t.Errorf("mcp.%s is in routeStageOnly and the route stage lacks it", name)
		}
	}
	for _, m := range []struct {
		name    string
		methods map[string]glua.LGFunction
		absent  map[string]bool
	}{{"request", w.requestMethods(), requestAbsent}, {"response", responseMethods, responseAbsent},
		{"rctx", w.rctxMethods(), rctxAbsent}} {
		for name := range m.absent {
			if _, ok := m.methods[name]; ok {
				t.Errorf("%s:%s is a method and listed as absent", m.name, name)
			}
		}
	}
	g := newState(nil)
	defer g.Close()
	for name := range sandboxAbsent {
		if g.GetGlobal(name) != glua.LNil {
			t.Errorf("%s is a global of the sandbox and listed in sandboxAbsent", name)
		}
	}
	os := g.GetGlobal("os").(*glua.LTable)
	for name := range osAbsent {
		if os.RawGetString(name) != glua.LNil {
			t.Errorf("os.%s is in the sandbox and listed in osAbsent", name)
		}
	}
}
