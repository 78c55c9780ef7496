package lua_test

import "testing"

// TestFormatQuoted checks string.format's %q against Lua 5.4's, which
// memcached's proxy runs route files with: numbers, booleans and nil are
// written bare, strings quoted with control bytes as decimal escapes, and
// other directives (%s, %d, %%, %5q's modifiers) are left to format.
func TestFormatQuoted(t *testing.T) {
	routes := `
function mcp_config_pools() return true end
local exprs = {
  int = function(r) return string.format("%q", 17) end,
  float = function(r) return string.format("%q", 1.5) end,
  negexp = function(r) return string.format("%q", 0.1) end,
  inf = function(r) return string.format("%q %q", 1/0, -1/0) end,
  bool = function(r) return string.format("%q/%q/%q", true, false, nil) end,
  str = function(r) return string.format("%q", "a\"b\\c\r1\tz") end,
  mixed = function(r) return string.format("%s=%q %d%% %q", "k", "v", 5, 2) end,
  hit = function(r)
    local res = mcp.internal(r)
    return string.format("hit=%q code=%q line=%q vlen=%q", res:hit(), res:code(), res:line(), res:vlen())
  end,
}
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r)
    return "SERVER_ERROR " .. exprs[r:key()](r) .. "\r\n"
  end)
end
`
	addr, _ := startLua(t, writeRoutes(t, routes), "")
	c := dial(t, addr)
	for _, tc := range []struct{ key, want string }{
		{"int", `17`},
		{"float", `0x1.8p+0`},
		{"negexp", `0x1.999999999999ap-4`},
		{"inf", `1e9999 -1e9999`},
		{"bool", `true/false/nil`},
		{"str", `"a\"b\\c\0131\9z"`},
		{"mixed", `k="v" 5% 2`},
		{"hit", `hit=false code=17 line=nil vlen=0`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got, want := c.do("mg "+tc.key+" v\r\n"), "SERVER_ERROR "+tc.want+"\r\n"; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
