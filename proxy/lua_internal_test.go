package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// internalRoutes are route files whose answers come from the pool's own
// cache: through V1's mcp.internal(r), through a V2 handle of
// mcp.internal_handler, and with no handler for any command but get, whose
// handler answers an error (memcached serves the others from its storage).
var internalRoutes = map[string]string{
	"v1": `
function mcp_config_pools() return {} end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return mcp.internal(r) end)
end
`,
	"v2": `
function mcp_config_pools() return {} end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(mcp.internal_handler)
  fg:ready({ n = "internal", f = function(rctx)
    return function(r)
      local res = rctx:enqueue_and_wait(r, h)
      return res
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`,
	"unattached": `
function mcp_config_pools() return {} end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MD, function(r) return "SERVER_ERROR routed\r\n" end)
end
`,
}

// TestLuaInternal checks the proxy's own cache through a Lua pool, as
// memcached 1.6.45's proxy answers the same requests with the same route
// files from its storage (observed by hand; cas uniques differ and are
// matched as numbers).
func TestLuaInternal(t *testing.T) {
	steps := []struct{ req, want string }{
		{"set a 5 0 3\r\nabc\r\n", "STORED\r\n"},
		{"get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n"},
		{"gets a\r\n", `^VALUE a 5 3 \d+\r\nabc\r\nEND\r\n$`},
		{"get a b\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n"},
		{"add a 0 0 1\r\nx\r\n", "NOT_STORED\r\n"},
		{"append a 0 0 2\r\nde\r\n", "STORED\r\n"},
		{"get a\r\n", "VALUE a 5 5\r\nabcde\r\nEND\r\n"},
		{"incr n 1\r\n", "NOT_FOUND\r\n"},
		{"set n 0 0 2\r\n10\r\n", "STORED\r\n"},
		{"incr n 5\r\n", "15\r\n"},
		{"decr n 100\r\n", "0\r\n"},
		{"touch a 100\r\n", "TOUCHED\r\n"},
		{"delete a\r\n", "DELETED\r\n"},
		{"delete a\r\n", "NOT_FOUND\r\n"},
		{"set q 0 0 1 noreply\r\nz\r\nget q\r\n", "VALUE q 0 1\r\nz\r\nEND\r\n"},
		{"mg q v t f\r\n", "VA 1 t-1 f0\r\nz\r\n"},
		{"ms m 2 T0 F7\r\nhi\r\n", "HD\r\n"},
		{"mg m v f s k\r\n", "VA 2 f7 s2 km\r\nhi\r\n"},
		{"mg m q v\r\nmn\r\n", "VA 2\r\nhi\r\n|MN\r\n"},
		{"mg missing q v\r\nmn\r\n", "MN\r\n"},
		{"ma cnt N0 J5\r\n", "HD\r\n"},
		{"ma cnt v\r\n", "VA 1\r\n6\r\n"},
		{"cas a 0 0 1 123\r\nx\r\n", "NOT_FOUND\r\n"},
	}
	for _, name := range []string{"v1", "v2", "unattached"} {
		t.Run(name, func(t *testing.T) {
			_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+writeLua(t, internalRoutes[name])+"\n", "lp")
			c := dial(t, addr)
			for _, s := range steps {
				c.send(s.req) // a want of n replies has n-1 "|"
				got := strings.Join(c.replies(strings.Count(s.want, "|")+1), "|")
				if s.want[0] == '^' {
					if !regexp.MustCompile(s.want).MatchString(got) {
						t.Errorf("%q: got %q, want %s", s.req, got, s.want)
					}
				} else if got != s.want {
					t.Errorf("%q: got %q, want %q", s.req, got, s.want)
				}
			}
			if name == "unattached" {
				if got := c.do("md m\r\n"); got != "SERVER_ERROR routed\r\n" {
					t.Errorf("md goes to its handler: got %q", got)
				}
			}
		})
	}
}

// TestLuaInternalReload checks that a reload keeps the cache's items while
// lua_internal_cache stays, and starts an empty one when it changes.
func TestLuaInternalReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "routes.lua")
	if err := os.WriteFile(file, []byte(internalRoutes["v1"]), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := "lp:\n  listen: 127.0.0.1:%d\n  lua: " + file + "\n  lua_internal_cache: %d\n"
	port := testserver.FreePort(t)
	parse := func(mib int) *config.Config {
		cfg, err := config.Parse([]byte(fmt.Sprintf(yaml, port, mib)), "test.yml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	srv, _ := startProxyCfg(t, parse(8))
	if got := dial(t, srv.Addr("lp").String()).do("set k 0 0 1\r\nv\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	for _, step := range []struct {
		mib  int
		want string
	}{
		{8, "VALUE k 0 1\r\nv\r\nEND\r\n"}, // the same size: the same cache
		{16, "END\r\n"},                    // another size: a new cache
	} {
		if err := srv.Reload(parse(step.mib)); err != nil {
			t.Fatalf("reload: %v", err)
		}
		if got := dial(t, srv.Addr("lp").String()).do("get k\r\n"); got != step.want {
			t.Errorf("after a reload to %d MiB: got %q, want %q", step.mib, got, step.want)
		}
	}
}

// TestLuaInternalLimits checks expiry and eviction through a Lua pool's
// own cache: an item set with a TTL of 1 second is gone after 2, and
// writing twice lua_internal_cache's worth of values evicts the oldest
// items, which the pool's internal_evictions counts.
func TestLuaInternalLimits(t *testing.T) {
	srv, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua_internal_cache: 1\n  lua: "+
		writeLua(t, internalRoutes["v1"])+"\n", "lp")
	c := dial(t, addr)
	if got := c.do("set ttl 0 1 1\r\nx\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	value := strings.Repeat("v", 10<<10)
	for i := range 200 { // 2 MiB of values into 1 MiB
		if got := c.do(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, len(value), value)); got != "STORED\r\n" {
			t.Fatalf("set k%d: %q", i, got)
		}
	}
	if got := c.do("get k0\r\n"); got != "END\r\n" {
		t.Errorf("the oldest item after 2 MiB of writes: %q", got[:min(len(got), 40)])
	}
	if got := c.do("get k199\r\n"); !strings.HasPrefix(got, "VALUE k199 0 10240\r\n") {
		t.Errorf("the newest item: %q", got[:min(len(got), 40)])
	}
	if n := routerStat(t, srv, "lp", "internal_evictions"); n == 0 {
		t.Error("internal_evictions is 0")
	}
	time.Sleep(2100 * time.Millisecond)
	if got := c.do("get ttl\r\n"); got != "END\r\n" {
		t.Errorf("an item past its TTL: %q", got)
	}
}
