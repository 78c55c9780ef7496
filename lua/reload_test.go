package lua_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/lua"
)

// reloadRoutes is a V2 route file that writes to both memcached a and b
// and reads from the one named read: every version agrees on what a set
// stored, so a set and its get may straddle a reload.
const reloadRoutes = `
function mcp_config_pools()
  return {
    a = mcp.pool({ mcp.backend("a", "127.0.0.1", {{A}}) }),
    b = mcp.pool({ mcp.backend("b", "127.0.0.1", {{B}}) }),
  }
end

function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local handles = { a = fg:new_handle(p.a), b = fg:new_handle(p.b) }
  local read = handles["{{READ}}"]
  fg:ready({ n = "both_{{READ}}", f = function(rctx)
    return function(r)
      if r:command() == mcp.CMD_GET then
        return rctx:enqueue_and_wait(r, read)
      end
      rctx:enqueue(r, { handles.a, handles.b })
      rctx:wait_cond(2, mcp.WAIT_ANY)
      return rctx:res_any(read)
    end
  end })
  mcp.attach(mcp.CMD_GET, fg)
  mcp.attach(mcp.CMD_SET, fg)
end
`

// TestV2ReloadUnderLoad reloads a V2 route file, rewritten to read from
// one memcached and then the other, several times while clients run
// verified sets and gets: none fails or reads a wrong value. Then three
// broken files (a syntax error, an error raised in mcp_config_routes, a
// function shardproxy lacks) are refused with the file and the line, and
// the running routes keep serving.
func TestV2ReloadUnderLoad(t *testing.T) {
	m := memcached(t, 2)
	set(t, m[0].Addr, "probe", "A")
	set(t, m[1].Addr, "probe", "B")
	file := writeRoutes(t, "")
	version := func(read string) string {
		return strings.NewReplacer("{{A}}", fmt.Sprint(m[0].Port), "{{B}}", fmt.Sprint(m[1].Port), "{{READ}}", read).Replace(reloadRoutes)
	}
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(version("a"))
	yaml := fmt.Sprintf("lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n", testserver.FreePort(t), file)
	srv, logs, err := newProxy(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr("lp").String()
	probe := func(want string) {
		t.Helper()
		if got := dial(t, addr).do("get probe\r\n"); got != "VALUE probe 0 1\r\n"+want+"\r\nEND\r\n" {
			t.Errorf("probe: got %q, want the value of %s", got, want)
		}
	}
	probe("A")

	tr := startTraffic(t, []string{addr}, 6)
	// progress waits until the clients have completed n more requests.
	progress := func(n int64) {
		t.Helper()
		from := tr.ops.Load()
		eventually(t, "the clients' progress", func() bool { return tr.ops.Load() >= from+n })
	}
	progress(200)
	reads := []string{"b", "a", "b", "a", "b", "a", "b", "a"}
	for i, read := range reads {
		write(version(read))
		if err := srv.Reload(cfg); err != nil {
			t.Fatalf("reload %d: %v", i+1, err)
		}
		probe(strings.ToUpper(read))
		progress(500)
	}

	good := version("a")
	routesLine := strings.Count(good[:strings.Index(good, "  local fg")], "\n") + 1
	for _, tc := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"syntax error", good + "function broken(\n", strings.Count(good, "\n") + 1, "syntax error at end of file"},
		{"error in mcp_config_routes", strings.Replace(good, "  local fg", "  error(\"refused on purpose\")\n  local fg", 1),
			routesLine, "mcp_config_routes: refused on purpose"},
		{"unsupported function", strings.Replace(good, "  local fg", "  local c = os.execute()\n  local fg", 1),
			routesLine, "mcp_config_routes: os.execute is not available in shardproxy route files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.src)
			err := srv.Reload(cfg)
			var ce *lua.ConfigError
			if !errors.As(err, &ce) || ce.File != file || ce.Line != tc.line || ce.Msg != tc.msg {
				t.Errorf("reload: got %v (%#v), want %s:%d: %s", err, ce, file, tc.line, tc.msg)
			}
			eventually(t, "the refusal in the log", func() bool {
				return strings.Contains(logs.String(), "reload refused") && strings.Contains(logs.String(), tc.msg)
			})
			probe("A")
			progress(100)
		})
	}

	ops, errs := tr.stop()
	if ops == 0 || len(errs) > 0 {
		t.Errorf("the clients: %d requests, %d failed: %v", ops, len(errs), errs)
	}
	t.Logf("%d verified requests across %d reloads and 3 refused ones", ops, len(reads))
}

// TestReloadKeepsGlobals: a reload runs the route file with the config
// state's number, string and boolean globals as the last one left them,
// as memcached's proxy, which keeps its config state, does: a file may
// count its reloads, and choose its limits by the count.
func TestReloadKeepsGlobals(t *testing.T) {
	file := writeRoutes(t, `
if reloads == nil then reloads = 0 end
function mcp_config_pools()
  reloads = reloads + 1
  name = "gen" .. reloads
  if reloads == 1 then mcp.active_req_limit(4) else mcp.active_req_limit(0) end
  return { n = reloads, name = name }
end
function mcp_config_routes(c)
  mcp.attach(mcp.CMD_MG, function(r) return "HD " .. c.name .. " " .. c.n .. "\r\n" end)
end`)
	yaml := fmt.Sprintf("lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n", testserver.FreePort(t), file)
	srv, _, err := newProxy(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr("lp").String()
	for gen := 1; gen <= 3; gen++ {
		if gen > 1 {
			if err := srv.Reload(cfg); err != nil {
				t.Fatalf("reload %d: %v", gen, err)
			}
		}
		c := dial(t, addr)
		if got, want := c.do("mg k\r\n"), fmt.Sprintf("HD gen%d %d\r\n", gen, gen); got != want {
			t.Errorf("generation %d: got %q, want %q", gen, got, want)
		}
		limit := map[bool]string{true: "4", false: "0"}[gen == 1]
		if got := statsOf(t, c, "proxy")["active_req_limit"]; got != limit {
			t.Errorf("generation %d: active_req_limit %q, want %s", gen, got, limit)
		}
	}
}
