package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// modeRoutes reads its mode from a file outside its directory, as
// memcached's own reload tests do; "pools error" raises in
// mcp_config_pools, "routes error" in mcp_config_routes, and a mode of
// the form "stats N NAME..." declares user counters from N on.
const modeRoutes = `local mode = dofile(%q)
function mcp_config_pools()
  if mode == "pools error" then error("no pools today") end
  local first, names = string.match(mode, "^stats (%d+) (.*)$")
  if first then
    local i = tonumber(first)
    for name in string.gmatch(names .. " ", "(%S*) ") do
      if name == "-" then name = "" end
      mcp.add_stat(i, name)
      i = i + 1
    end
  end
  return {}
end
function mcp_config_routes(p)
  if mode == "routes error" then error("no routes today") end
  mcp.attach(mcp.CMD_MG, function(r)
    local id, delta = string.match(r:key(), "^(%d+)_(-?%d+)$")
    if id then mcp.stat(tonumber(id), tonumber(delta)) end
    return "HD " .. mode .. "\r\n"
  end)
end
`

// modeProxy runs a Lua pool whose route file, in a directory of its own,
// reads its mode from a file in another directory the pool's lua_dirs
// names. setMode writes the mode; reload reloads the configuration.
func modeProxy(t *testing.T, mode string, opts proxy.Options) (srv *proxy.Server, addr string, setMode func(string)) {
	t.Helper()
	modes := t.TempDir()
	modeFile := filepath.Join(modes, "mode.lua")
	setMode = func(m string) {
		t.Helper()
		if err := os.WriteFile(modeFile, []byte("return "+quoteLua(m)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setMode(mode)
	file := writeLua(t, strings.Replace(modeRoutes, "%q", quoteLua(modeFile), 1))
	yaml := fmt.Sprintf("lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n  lua_dirs: %s\n", testserver.FreePort(t), file, modes)
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = discardLog()
	}
	srv = runProxy(t, cfg, opts)
	return srv, srv.Addr("lp").String(), setMode
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func quoteLua(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// reloadFile reloads srv from its own configuration, as SIGHUP does.
func reloadFile(t *testing.T, srv *proxy.Server) error {
	t.Helper()
	return srv.Reload(srv.Info().Config)
}

var confLine = regexp.MustCompile(`^ts=\d+\.\d+ gid=\d+ type=(proxy_conf status=\w+|proxy_error msg=.*)$`)

// event reads a watcher's next line and returns what follows its time and
// number: "type=proxy_conf status=done", ...
func event(t *testing.T, w *client) string {
	t.Helper()
	l := strings.TrimSuffix(w.line(), "\n")
	if !confLine.MatchString(l) {
		t.Fatalf("watcher line %q is not a proxy_conf or proxy_error line", l)
	}
	return l[strings.Index(l, "type="):]
}

// TestLuaReloadWatchEvents checks the lines memcached's proxy writes to
// its proxyevents watchers about reloads: "status=start" once the new
// file's top level and mcp_config_pools have run, "status=done" once it
// serves; for a reload that fails, the error as a proxy_error line and
// "status=failed", without "start" when the failure comes before it
// (memcached's proxy exits there; here the running routes stay).
func TestLuaReloadWatchEvents(t *testing.T) {
	srv, addr, setMode := modeProxy(t, "one", proxy.Options{})
	w := dial(t, addr)
	if got := w.do("watch proxyevents\r\n"); got != "OK\r\n" {
		t.Fatalf("watch: %q", got)
	}
	c := dial(t, addr)

	setMode("two")
	if err := reloadFile(t, srv); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type=proxy_conf status=start", "type=proxy_conf status=done"} {
		if got := event(t, w); got != want {
			t.Errorf("reload: got %q, want %q", got, want)
		}
	}
	if got := c.do("mg k\r\n"); got != "HD two\r\n" {
		t.Errorf("after the reload: %q", got)
	}

	for _, tc := range []struct{ mode, start, msg string }{
		{"pools error", "", "no pools today"},
		{"routes error", "type=proxy_conf status=start", "no routes today"},
	} {
		setMode(tc.mode)
		if err := reloadFile(t, srv); err == nil {
			t.Fatalf("%s: reload succeeded", tc.mode)
		}
		if tc.start != "" {
			if got := event(t, w); got != tc.start {
				t.Errorf("%s: got %q, want %q", tc.mode, got, tc.start)
			}
		}
		if got := event(t, w); !strings.HasPrefix(got, "type=proxy_error msg=") || !strings.Contains(got, tc.msg) {
			t.Errorf("%s: got %q, want the error", tc.mode, got)
		}
		if got := event(t, w); got != "type=proxy_conf status=failed" {
			t.Errorf("%s: got %q, want status=failed", tc.mode, got)
		}
		if got := c.do("mg k\r\n"); got != "HD two\r\n" {
			t.Errorf("%s: the running routes answer %q", tc.mode, got)
		}
	}

	// A configuration that cannot be read never reaches Reload.
	srv.ReloadFailed("test.yml", errors.New("config: test.yml: broken"))
	if got := event(t, w); got != "type=proxy_error msg=config: test.yml: broken" {
		t.Errorf("unreadable configuration: got %q", got)
	}
	if got := event(t, w); got != "type=proxy_conf status=failed" {
		t.Errorf("unreadable configuration: got %q, want status=failed", got)
	}
}

// TestLuaUserStatsAcrossReload checks mcp.add_stat's counters as memcached
// keeps them in "stats proxy": across a reload an index declared again
// under its name counts on, one given another name starts from zero, one
// not declared again stays, and an empty name hides it; a counter taken
// below zero shows as memcached's unsigned counters wrap. Declarations
// memcached refuses refuse the reload.
func TestLuaUserStatsAcrossReload(t *testing.T) {
	srv, addr, setMode := modeProxy(t, "stats 1 a1 a2 a3 hide", proxy.Options{})
	c := dial(t, addr)
	for _, k := range []string{"1_1", "2_2", "2_2", "3_-1", "4_5"} {
		c.do("mg " + k + "\r\n")
	}
	want := map[string]string{"user_a1": "1", "user_a2": "4", "user_a3": "18446744073709551615", "user_hide": "5"}
	if got := userStats(t, c); !maps.Equal(got, want) {
		t.Errorf("before the reload: %v, want %v", got, want)
	}
	setMode("stats 2 a2 b3 -")
	if err := reloadFile(t, srv); err != nil {
		t.Fatal(err)
	}
	c.do("mg 2_1\r\n")
	want = map[string]string{"user_a1": "1", "user_a2": "5", "user_b3": "0"}
	if got := userStats(t, c); !maps.Equal(got, want) {
		t.Errorf("after the reload: %v, want %v", got, want)
	}
	for mode, msg := range map[string]string{
		"stats 0 x":                           "stat index must be 1 or higher",
		"stats 1025 x":                        "stat index must be 1024 or less",
		"stats 1 " + strings.Repeat("n", 123): "stat name too long",
	} {
		setMode(mode)
		if err := reloadFile(t, srv); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%.20s: got %v, want %q", mode, err, msg)
		}
	}
	setMode("stats 1 " + strings.Repeat("n", 122))
	if err := reloadFile(t, srv); err != nil {
		t.Errorf("a 122-byte name: %v", err)
	}
}

// userStats returns the user_ counters of "stats proxy".
func userStats(t *testing.T, c *client) map[string]string {
	t.Helper()
	st := statsOf(t, c, "stats proxy\r\n")
	maps.DeleteFunc(st, func(name, _ string) bool { return !strings.HasPrefix(name, "user_") })
	return st
}

// TestLuaCronScheduleReload checks mcp.schedule_config_reload in a cron
// (it asks the server's Options.ScheduleReload, as memcached's cron asks
// its config thread) and the crons' counters in stats, memcached's
// proxy_config_cron_runs and proxy_config_cron_fails.
func TestLuaCronScheduleReload(t *testing.T) {
	var asked atomic.Int32
	file := writeLua(t, `function mcp_config_pools()
  mcp.register_cron("reload", { every = 1, rerun = false, func = function() mcp.schedule_config_reload() end })
  mcp.register_cron("fail", { every = 1, rerun = false, func = function() error("cron down") end })
  return {}
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) mcp.schedule_config_reload() return "HD\r\n" end)
end
`)
	cfg, err := config.Parse([]byte("lp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n"), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv := runProxy(t, cfg, proxy.Options{Logger: discardLog(), ScheduleReload: func() { asked.Add(1) }})
	c := dial(t, srv.Addr("lp").String())
	c.do("mg k\r\n") // a handler's call asks nothing
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := statsOf(t, c, "stats\r\n")
		if st["proxy_config_cron_runs"] == "2" && st["proxy_config_cron_fails"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cron counters: runs %q fails %q, want 2 and 1", st["proxy_config_cron_runs"], st["proxy_config_cron_fails"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("reloads asked: %d, want 1 (the cron's)", n)
	}
}

// TestLuaListenTags checks listen_tags, memcached's -l tag_NAME_:addr:
// a request that comes on a tagged listener runs the handler attached
// with its tag, else the untagged one; the pool's own listener runs the
// untagged ones; a reload that moves a tag to another listener takes
// effect for its clients.
func TestLuaListenTags(t *testing.T) {
	file := writeLua(t, `function mcp_config_pools() return {} end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return "HD untagged\r\n" end)
  mcp.attach(mcp.CMD_MS, function(r) return "HD ms untagged\r\n" end)
  mcp.attach(mcp.CMD_MG, function(r) return "HD tag b\r\n" end, "b")
  mcp.attach(mcp.CMD_MG, function(r) return "HD tag cccc\r\n" end, "cccc")
end
`)
	plain, one, two := testserver.FreePort(t), testserver.FreePort(t), testserver.FreePort(t)
	yaml := func(tagOne, tagTwo string) string {
		return fmt.Sprintf("lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n  listen_tags:\n    %s: 127.0.0.1:%d\n    %s: 127.0.0.1:%d\n",
			plain, file, tagOne, one, tagTwo, two)
	}
	cfg, err := config.Parse([]byte(yaml("b", "cccc")), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv := runProxy(t, cfg, proxy.Options{Logger: discardLog()})
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	cp, c1, c2 := dial(t, addr(plain)), dial(t, addr(one)), dial(t, addr(two))
	for _, tc := range []struct {
		c         *client
		req, want string
	}{
		{cp, "mg k\r\n", "HD untagged\r\n"},
		{c1, "mg k\r\n", "HD tag b\r\n"},
		{c2, "mg k\r\n", "HD tag cccc\r\n"},
		{c1, "ms k 1\r\nx\r\n", "HD ms untagged\r\n"}, // no ms under b
	} {
		if got := tc.c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	cfg, err = config.Parse([]byte(yaml("cccc", "none")), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := c1.do("mg k\r\n"); got != "HD tag cccc\r\n" {
		t.Errorf("after the reload, the first tagged listener: %q", got)
	}
	if got := c2.do("mg k\r\n"); got != "HD untagged\r\n" {
		t.Errorf("after the reload, a tag without handlers: %q", got)
	}
}
