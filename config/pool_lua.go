package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// luaKeys are the keys of a Lua pool: its route file, which defines the
// backends (so a Lua pool has no servers; validateBackends), and the
// argument the file reads as mcp.start_arg.
var luaKeys = map[string]poolKey{
	// lua is the route file, or a list of files run one after the other
	// in the same state (memcached's proxy_config=a.lua:b.lua).
	"lua": poolKey{set: (*poolParser).setLua, given: func(p *Pool) bool { return p.Lua != "" }}.
		encodedAs(luaNode).omitIf(func(p *Pool) bool { return p.Lua == "" }),
	// lua_arg is the route file's mcp.start_arg: any non-empty string,
	// read as its text (lua_arg: 5 is "5").
	"lua_arg": stringKey(func(p *Pool) *string { return &p.LuaArg },
		nonEmpty("must be a non-empty string (leave the key out for mcp.start_arg false)"), ""),
	// lua_dirs are the directories, besides the route file's own, whose
	// files the route file may load (dofile, loadfile, require).
	"lua_dirs": poolKey{set: (*poolParser).setLuaDirs, given: func(p *Pool) bool { return len(p.LuaDirs) > 0 }}.
		encodedAs(func(p *Pool) *yaml.Node { return strList(p.LuaDirs) }).
		omitIf(func(p *Pool) bool { return len(p.LuaDirs) == 0 }),
	// lua_timeout bounds each run of route code, in milliseconds.
	"lua_timeout": msKey(func(p *Pool) *time.Duration { return &p.LuaTimeout }, 1, DefaultLuaTimeout, 0),
	// lua_max_alloc bounds what each run of route code allocates, in MiB.
	"lua_max_alloc": intKey(func(p *Pool) *int { return &p.LuaMaxAlloc }, 1, 1<<20, DefaultLuaMaxAlloc, 0),
	// lua_internal_cache is the memory of the proxy's own cache
	// (mcp.internal), in MiB.
	"lua_internal_cache": intKey(func(p *Pool) *int { return &p.LuaInternalCache }, 1, 1<<20, DefaultLuaInternalCache, 0),
}

// luaOnly are the keys only a Lua pool may set.
var luaOnly = []string{"lua_arg", "lua_dirs", "lua_timeout", "lua_max_alloc", "lua_internal_cache"}

// setLua reads lua: one file, or a non-empty list of files.
func (pp *poolParser) setLua(key string, v *yaml.Node) {
	const want = "must be the path of a Lua route file, or a list of them"
	files, ok := pp.stringList(key, v, want)
	if !ok {
		return
	}
	pp.p.Lua, pp.p.LuaMore = files[0], files[1:]
}

// setLuaDirs reads lua_dirs: one directory or a non-empty list of them.
func (pp *poolParser) setLuaDirs(key string, v *yaml.Node) {
	if dirs, ok := pp.stringList(key, v, "must be a directory, or a list of directories"); ok {
		pp.p.LuaDirs = dirs
	}
}

// stringList reads a non-empty string or a non-empty list of them, failing
// with want when v is neither.
func (pp *poolParser) stringList(key string, v *yaml.Node, want string) ([]string, bool) {
	if v.Kind == yaml.ScalarNode && v.Value != "" {
		return []string{v.Value}, true
	}
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 || !pp.b.plain(v, pp.p.Name, key) {
		pp.fail(v.Line, key, want)
		return nil, false
	}
	list := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Value == "" {
			pp.fail(item.Line, key, want)
			return nil, false
		}
		list = append(list, item.Value)
	}
	return list, true
}

// luaNode is the lua key: the file, or the list of files.
func luaNode(p *Pool) *yaml.Node {
	if len(p.LuaMore) == 0 {
		return str(p.Lua)
	}
	return strList(append([]string{p.Lua}, p.LuaMore...))
}

// strList is a list of strings.
func strList(list []string) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range list {
		seq.Content = append(seq.Content, str(s))
	}
	return seq
}
