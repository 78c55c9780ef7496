package lua_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"shardproxy/lua"
)

// TestSandbox checks that route code cannot reach files, processes, native
// code or the debug library, and that what it may use works.
func TestSandbox(t *testing.T) {
	checks := []struct {
		name string
		expr string // a Lua expression, rendered with tostring
		want string
	}{
		{"io", "type(io)", "nil"},
		{"debug", "type(debug)", "nil"},
		{"package", "type(package)", "nil"},
		{"module", "type(module)", "nil"},
		// the loaders work while the file loads only (engine_files_test.go)
		{"require", "select(2, pcall(require, 'x')):find('while the route file loads', 1, true) ~= nil", "true"},
		{"dofile", "select(2, pcall(dofile, 'x.lua')):find('while the route file loads', 1, true) ~= nil", "true"},
		{"loadfile", "select(2, pcall(loadfile, 'x.lua')):find('while the route file loads', 1, true) ~= nil", "true"},
		{"coroutine", "type(coroutine)", "nil"},
		{"channel", "type(channel)", "nil"},
		{"os.execute", "type(os.execute)", "nil"},
		{"os.exit", "type(os.exit)", "nil"},
		{"os.getenv", "type(os.getenv)", "nil"},
		{"os.remove", "type(os.remove)", "nil"},
		{"string.dump", "type(string.dump)", "nil"},
		{"os.time", "type(os.time())", "number"},
		{"os.clock", "type(os.clock())", "number"},
		{"os.date", "os.date('%Y', 0)", "1970"},
		{"load", "load('return 40 + 2')()", "42"},
		{"string methods", "('abc'):upper()", "ABC"},
		{"string.format", "string.format('%05.1f', 3.14159)", "003.1"},
		// %q writes Lua 5.4's literals, as memcached's route files print results
		{"%q booleans and nil", "string.format('[%q] [%q] [%q]', true, false, nil)", "[true] [false] [nil]"},
		{"%q integers", "string.format('%q %q %d', -1, 333, 7)", "-1 333 7"},
		{"%q floats", "string.format('%q %q %q %q', 0.5, 1/0, -1/0, 0/0)", "0x1p-1 1e9999 -1e9999 (0/0)"},
		{"%q strings", `string.format('%q', 'a"b\\c\n\0' .. '1\1')`, `"a\"b\\c\` + "\n" + `\0001\1"`},
		{"%q after other conversions", "string.format('%s=%q %%q %5.1f', 'k', 'v', 2)", `k="v" %q   2.0`},
		{"%q of a table", "select(2, pcall(string.format, '%q', {})):find('no literal form', 1, true) ~= nil", "true"},
		{"%q with a width", "select(2, pcall(string.format, '%5q', 'x')):find(\"invalid conversion '%5q'\", 1, true) ~= nil", "true"},
		{"%q without a value", "select(2, pcall(string.format, '%q')):find('no value', 1, true) ~= nil", "true"},
		{"table", "table.concat({1, 2, 3}, ',')", "1,2,3"},
		{"table.unpack", "select('#', table.unpack({1, 2, 3}))", "3"},
		{"math", "math.floor(7 / 2)", "3"},
		{"collectgarbage", "collectgarbage()", "0"},
		{"pcall", "pcall(error, 'x')", "false"},
		{"string.rep small", "#string.rep('ab', 1000)", "2000"},
	}
	var b strings.Builder
	b.WriteString(okPools + "local checks = {\n")
	for i, c := range checks {
		fmt.Fprintf(&b, "  [%q] = function() return %s end,\n", fmt.Sprint(i), c.expr)
	}
	b.WriteString(`}
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r)
    return "HD " .. tostring(checks[r:key()]()) .. "\r\n"
  end)
  mcp.attach(mcp.CMD_MD, function(r) return string.rep("x", 1e9) end)
  mcp.attach(mcp.CMD_MA, function(r) print("hello", 1, nil) return "HD\r\n" end)
end
`)
	var logs bytes.Buffer
	d := memcacheDialect(t)
	r, err := lua.New(lua.Config{Path: "routes.lua", Source: []byte(b.String()), Dialect: d,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if got, want := route(t, r, d, fmt.Sprintf("mg %d\r\n", i)), "HD "+c.want+"\r\n"; got != want {
				t.Errorf("%s: got %q, want %q", c.expr, got, want)
			}
		})
	}
	t.Run("string.rep bounded", func(t *testing.T) {
		if got := route(t, r, d, "md big\r\n"); got != "SERVER_ERROR lua failure\r\n" {
			t.Errorf("got %q", got)
		}
		if !strings.Contains(logs.String(), "string.rep: result longer than") {
			t.Errorf("error not logged:\n%s", logs.String())
		}
	})
	t.Run("print logs", func(t *testing.T) {
		route(t, r, d, "ma k\r\n")
		if !strings.Contains(logs.String(), `msg="hello\t1\tnil"`) {
			t.Errorf("print not logged:\n%s", logs.String())
		}
	})
}

// TestEndlessHandler checks that a handler that never returns is stopped
// after MaxRun with an error, and that the state keeps serving.
func TestEndlessHandler(t *testing.T) {
	d := memcacheDialect(t)
	var logs bytes.Buffer
	r, err := lua.New(lua.Config{Path: "routes.lua", Dialect: d, Workers: 1, MaxRun: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Source: []byte(okPools + `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r)
    if r:key() == "loop" then
      local n = 0
      while true do n = n + 1 end
    end
    return "HD\r\n"
  end)
end`)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 3 {
		start := time.Now()
		if got := route(t, r, d, "mg loop\r\n"); got != "SERVER_ERROR lua timeout\r\n" {
			t.Fatalf("endless handler: got %q", got)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("stopped after %v, MaxRun 50ms", took)
		}
		if got := route(t, r, d, "mg other\r\n"); got != "HD\r\n" {
			t.Fatalf("after the endless handler: got %q", got)
		}
	}
	if n := strings.Count(logs.String(), "lua handler stopped"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "routes.lua:10:") {
		t.Errorf("log does not name the line:\n%s", logs.String())
	}
}
