package lua_test

import (
	"testing"
	"time"

	"shardproxy/lua"
)

// startArgRoutes dumps mcp.start_arg as seen at the top level, in
// mcp_config_pools (passed on in its result), in mcp_config_routes and in
// a handler, which answers with the four.
const startArgRoutes = `
local function dump(v)
  if type(v) ~= "table" then return type(v) .. ":" .. tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. type(v[k]) .. ":" .. tostring(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end
local top = dump(mcp.start_arg)
function mcp_config_pools()
  return { pools = dump(mcp.start_arg) }
end
function mcp_config_routes(c)
  local routes = dump(mcp.start_arg)
  mcp.attach(mcp.CMD_GET, function(r)
    return "HD " .. table.concat({ top, c.pools, routes, dump(mcp.start_arg) }, " ") .. "\r\n"
  end)
end
`

// TestStartArg checks mcp.start_arg's three forms at every stage, with the
// example observed on memcached 1.6.45 (NOTES.md 3f).
func TestStartArg(t *testing.T) {
	for _, tc := range []struct {
		name, arg, want string
	}{
		{"absent", "", "boolean:false"},
		{"string", "hello", "string:hello"},
		{"string with underscores", "a_b", "string:a_b"},
		{"table", "a:b_2:c_x_y", "{a=boolean:true,b=string:2,c=string:x}"},
		{"empty items skipped", ":a::_x:", "{a=boolean:true}"},
		{"empty value", "a_:b", "{a=string:,b=boolean:true}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := lua.New(lua.Config{
				Path: "routes.lua", Source: []byte(startArgRoutes), Dialect: memcacheDialect(t),
				Workers: 1, SetupTimeout: 500 * time.Millisecond, Logger: discard(), StartArg: tc.arg,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			w := tc.want
			want := "HD " + w + " " + w + " " + w + " " + w + "\r\n"
			if got := route(t, r, memcacheDialect(t), "get k\r\n"); got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}
