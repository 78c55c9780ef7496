package lua_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shardproxy/lua"
)

// writeFiles writes files (path relative to dir: contents) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoaders checks dofile, loadfile and require: files in the route
// file's directory and below, and the lua_arg file, load at every stage of
// loading; a module runs once per state.
func TestLoaders(t *testing.T) {
	dir, argDir := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{
		"mode.lua":     `return "fast"`,
		"sub/mod.lua":  `local name = ...; LOADS = (LOADS or 0) + 1; return { name = name, answer = 42 }`,
		"pkg/init.lua": `return "pkg init"`,
		"flag.lua":     `FLAG = "set"`,
		"bad.lua":      "local x = 1\nreturn )\n",
		"routes.lua": okPools + `
local mode = dofile("mode.lua")
local mod = require("sub.mod")
function mcp_config_routes(p)
  local again = require("sub.mod")
  local pkg = require("pkg")
  local f = loadfile("sub/mod.lua")
  local nof, msg = loadfile("bad.lua")
  local flag = require("flag")
  local conf = dofile(mcp.start_arg)
  local answer = table.concat({ mode, mod.name, tostring(mod.answer), tostring(again == mod), tostring(LOADS),
    pkg, type(f), tostring(nof), tostring(msg:find("bad.lua:2:", 1, true) ~= nil), tostring(flag), FLAG, conf.who }, " ")
  mcp.attach(mcp.CMD_MG, function(r) return "HD " .. answer .. "\r\n" end)
end
`,
	})
	writeFiles(t, argDir, map[string]string{"conf.lua": `return { who = "arg" }`})
	d := memcacheDialect(t)
	r, err := lua.New(lua.Config{Path: filepath.Join(dir, "routes.lua"), Dialect: d, Workers: 2, Logger: discard(),
		StartArg: filepath.Join(argDir, "conf.lua")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := "HD fast sub.mod 42 true 1 pkg init function nil true true set arg\r\n"
	if got := route(t, r, d, "mg k\r\n"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestLoadersRefused checks that a route file cannot load what lies
// outside its directory: by "..", by an absolute path, through a symbolic
// link, or anything but the lua_arg file; and that the errors say so.
func TestLoadersRefused(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "routes")
	writeFiles(t, root, map[string]string{
		"outside.lua":    `return "secret"`,
		"routes/in.lua":  `return "in"`,
		"other/conf.lua": `return "conf"`,
	})
	if err := os.Symlink(filepath.Join(root, "outside.lua"), filepath.Join(dir, "link.lua")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "other"), filepath.Join(dir, "otherdir")); err != nil {
		t.Fatal(err)
	}
	refusal := "a route file may load only the files in " + dir + " and below (add a directory to the pool's lua_dirs), and its lua_arg file"
	for _, tc := range []struct{ name, stmt, want string }{
		{"dot dot", `dofile("../outside.lua")`, "cannot open ../outside.lua: " + refusal},
		{"dot dot inside", `dofile("sub/../../outside.lua")`, "cannot open sub/../../outside.lua: " + refusal},
		{"absolute", `dofile("` + filepath.Join(root, "outside.lua") + `")`, refusal},
		{"symlink", `dofile("link.lua")`, "cannot open link.lua: " + refusal},
		{"symlinked dir", `dofile("otherdir/conf.lua")`, "cannot open otherdir/conf.lua: " + refusal},
		{"require dots", `require("..outside")`, "module '..outside' not found: no file //outside.lua"}, // dots are directories
		{"require absolute", `require("` + filepath.Join(root, "outside") + `")`, "error loading module '" + filepath.Join(root, "outside") + "': cannot open " + filepath.Join(root, "outside.lua") + ": " + refusal},
		{"missing", `dofile("nope.lua")`, "cannot open nope.lua: no such file"},
		{"require missing", `require("a.b")`, "module 'a.b' not found: no file a/b.lua or a/b/init.lua in " + dir},
		{"not a string", `dofile()`, "bad argument #1 to dofile (string expected, got nil)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.stmt + "\n" + okPools + okRoutes
			writeFiles(t, dir, map[string]string{"routes.lua": src})
			_, err := lua.New(lua.Config{Path: filepath.Join(dir, "routes.lua"), Dialect: memcacheDialect(t),
				Workers: 1, Logger: discard(), StartArg: "in.lua"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "routes.lua:1: loading: ") {
				t.Errorf("the error does not name the line: %v", err)
			}
		})
	}
	// loadfile answers nil and the reason instead
	writeFiles(t, dir, map[string]string{"routes.lua": `local f, msg = loadfile("../outside.lua")
assert(f == nil and msg:find("a route file may load only", 1, true), "loadfile: " .. tostring(msg))
` + okPools + okRoutes})
	r, err := lua.New(lua.Config{Path: filepath.Join(dir, "routes.lua"), Dialect: memcacheDialect(t), Workers: 1, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// TestLoadersDirs checks Config.Dirs (lua_dirs): a route file loads files
// from those directories and below by absolute path, and still nothing
// outside them; the refusal names every directory.
func TestLoadersDirs(t *testing.T) {
	root := t.TempDir()
	dir, modes := filepath.Join(root, "routes"), filepath.Join(root, "modes")
	writeFiles(t, root, map[string]string{
		"modes/mode.lua":     `return "from modes"`,
		"modes/sub/deep.lua": `return "deep"`,
		"secret.lua":         `return "secret"`,
	})
	load := func(stmt string) (*lua.Router, error) {
		writeFiles(t, dir, map[string]string{"routes.lua": "local got = " + stmt + "\n" + okPools + `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return "HD " .. got .. "\r\n" end)
end
`})
		return lua.New(lua.Config{Path: filepath.Join(dir, "routes.lua"), Dialect: memcacheDialect(t),
			Workers: 1, Logger: discard(), Dirs: []string{modes}})
	}
	for stmt, want := range map[string]string{
		`dofile("` + filepath.Join(modes, "mode.lua") + `")`:            "HD from modes\r\n",
		`dofile("` + filepath.Join(modes, "sub", "deep.lua") + `")`:     "HD deep\r\n",
		`loadfile("` + filepath.Join(modes, "sub", "deep.lua") + `")()`: "HD deep\r\n",
	} {
		r, err := load(stmt)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		if got := route(t, r, memcacheDialect(t), "mg k\r\n"); got != want {
			t.Errorf("%s: got %q, want %q", stmt, got, want)
		}
		r.Close()
	}
	refusal := "a route file may load only the files in " + dir + ", " + modes + " and below"
	for _, stmt := range []string{`dofile("` + filepath.Join(root, "secret.lua") + `")`, `dofile("` + modes + `/../secret.lua")`} {
		if _, err := load(stmt); err == nil || !strings.Contains(err.Error(), refusal) {
			t.Errorf("%s: got %v, want %q", stmt, err, refusal)
		}
	}
}

// TestMoreRouteFiles checks Config.More (memcached's
// proxy_config=a.lua:b.lua): the files run in order in one state, so the
// first may define mcp_config_pools and the second mcp_config_routes, and
// an error in the second names that file.
func TestMoreRouteFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"pools.lua": okPools + `WHO = "first"`,
		"routes.lua": `WHO = WHO .. " second"` + "\n" + `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return "HD " .. WHO .. "\r\n" end)
end
`,
		"broken.lua": "local x = 1\nerror(\"no\")\n",
	})
	d := memcacheDialect(t)
	r, err := lua.New(lua.Config{Path: filepath.Join(dir, "pools.lua"), More: []string{filepath.Join(dir, "routes.lua")},
		Dialect: d, Workers: 2, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := route(t, r, d, "mg k\r\n"), "HD first second\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	_, err = lua.New(lua.Config{Path: filepath.Join(dir, "pools.lua"),
		More: []string{filepath.Join(dir, "routes.lua"), filepath.Join(dir, "broken.lua")}, Dialect: d, Workers: 1, Logger: discard()})
	if err == nil || !strings.Contains(err.Error(), "broken.lua:2:") {
		t.Errorf("an error in the last file: got %v, want it named broken.lua:2", err)
	}
}
