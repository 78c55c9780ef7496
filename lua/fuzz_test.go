package lua_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shardproxy/lua"
)

// FuzzConfig loads arbitrary route files: loading never panics, never runs
// past its time limit, and either succeeds or reports a *ConfigError for
// the file.
func FuzzConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "lua", "*.lua"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		okPools + okRoutes,
		"function mcp_config_pools() return { a = { b = { 1, 'x', true } } } end\n" + okRoutes,
		"local t = {} t.t = t function mcp_config_pools() return t end\n" + okRoutes,
		"function mcp_config_pools() while true do end end",
		"local x <const> = 1 function mcp_config_pools() return x end",
		"function mcp_config_pools() return mcp.pool({ mcp.backend('a', 'h', 1) }, { dist = mcp.dist_ring_hash, omode = 'evcache', obuckets = 7 }) end\n" + okRoutes,
		"][",
	} {
		f.Add([]byte(s))
	}
	d := memcacheDialect(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := lua.New(lua.Config{Path: "fuzz.lua", Source: src, Dialect: d, Workers: 1,
			SetupTimeout: 20 * time.Millisecond, Logger: discard()})
		if err != nil {
			var ce *lua.ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.lua" {
				t.Fatalf("error is not a *ConfigError for fuzz.lua: %v", err)
			}
			return
		}
		r.Close()
	})
}
