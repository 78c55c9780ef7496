package config

import "time"

// luaKeys are the keys of a Lua pool: its route file, which defines the
// backends (so a Lua pool has no servers; validateBackends), and the
// argument the file reads as mcp.start_arg.
var luaKeys = map[string]poolKey{
	"lua": stringKey(func(p *Pool) *string { return &p.Lua },
		nonEmpty("must be the path of a Lua route file"), ""),
	// lua_arg is the route file's mcp.start_arg: any non-empty string,
	// read as its text (lua_arg: 5 is "5").
	"lua_arg": stringKey(func(p *Pool) *string { return &p.LuaArg },
		nonEmpty("must be a non-empty string (leave the key out for mcp.start_arg false)"), ""),
	// lua_timeout bounds each run of route code, in milliseconds.
	"lua_timeout": msKey(func(p *Pool) *time.Duration { return &p.LuaTimeout }, 1, DefaultLuaTimeout, 0),
	// lua_max_alloc bounds what each run of route code allocates, in MiB.
	"lua_max_alloc": intKey(func(p *Pool) *int { return &p.LuaMaxAlloc }, 1, 1<<20, DefaultLuaMaxAlloc, 0),
	// lua_internal_cache is the memory of the proxy's own cache
	// (mcp.internal), in MiB.
	"lua_internal_cache": intKey(func(p *Pool) *int { return &p.LuaInternalCache }, 1, 1<<20, DefaultLuaInternalCache, 0),
}

// luaOnly are the keys only a Lua pool may set.
var luaOnly = []string{"lua_arg", "lua_timeout", "lua_max_alloc", "lua_internal_cache"}
