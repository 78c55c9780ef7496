package lua_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTimeMillis checks mcp.time_real_millis and mcp.time_mono_millis in a
// handler: whole numbers, real time near the test's clock, mono time never
// going back between two requests.
func TestTimeMillis(t *testing.T) {
	r, err := load(t, `
function mcp_config_pools() return {} end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r)
    local real, mono = mcp.time_real_millis(), mcp.time_mono_millis()
    if math.floor(real) ~= real or math.floor(mono) ~= mono then
      return "SERVER_ERROR not whole\r\n"
    end
    return "HD " .. real .. " " .. mono .. "\r\n"
  end)
end
`)
	if err != nil {
		t.Fatal(err)
	}
	d := memcacheDialect(t)
	read := func() (real, mono int64) {
		t.Helper()
		out := route(t, r, d, "get k\r\n")
		f := strings.Fields(out)
		if len(f) != 3 || f[0] != "HD" {
			t.Fatalf("answer %q", out)
		}
		real, err1 := strconv.ParseInt(f[1], 10, 64)
		mono, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("answer %q: not integers", out)
		}
		return real, mono
	}
	before := time.Now().UnixMilli()
	real1, mono1 := read()
	real2, mono2 := read()
	after := time.Now().UnixMilli()
	if real1 < before || real2 > after || real2 < real1 {
		t.Errorf("real %d, %d not within [%d, %d]", real1, real2, before, after)
	}
	if mono1 < 0 || mono2 < mono1 {
		t.Errorf("mono went %d, %d", mono1, mono2)
	}
}

// TestTimeMillisConfigStage checks that the time functions are nil at
// config time, as in memcached, and that calling one there names it.
func TestTimeMillisConfigStage(t *testing.T) {
	_, err := load(t, `
function mcp_config_pools()
  assert(mcp.time_mono_millis == nil)
  mcp.time_real_millis()
  return {}
end
`+okRoutes)
	want := "lua: routes.lua:4: mcp_config_pools: mcp.time_real_millis can only be called from mcp_config_routes"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
