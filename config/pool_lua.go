package config

import (
	"fmt"
	gostrings "strings"
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
	// listen_tags are further listeners of the pool, each with a tag its
	// requests carry (memcached's -l tag_NAME_:addr).
	"listen_tags": poolKey{set: (*poolParser).setListenTags, given: func(p *Pool) bool { return len(p.ListenTags) > 0 }}.
		encodedAs(listenTagsNode).omitIf(func(p *Pool) bool { return len(p.ListenTags) == 0 }),
	// lua_timeout bounds each run of route code, in milliseconds.
	"lua_timeout": msKey(func(p *Pool) *time.Duration { return &p.LuaTimeout }, 1, DefaultLuaTimeout, 0),
	// lua_max_alloc bounds what each run of route code allocates, in MiB.
	"lua_max_alloc": intKey(func(p *Pool) *int { return &p.LuaMaxAlloc }, 1, 1<<20, DefaultLuaMaxAlloc, 0),
	// lua_internal_cache is the memory of the proxy's own cache
	// (mcp.internal), in MiB.
	"lua_internal_cache": intKey(func(p *Pool) *int { return &p.LuaInternalCache }, 1, 1<<20, DefaultLuaInternalCache, 0),
}

// luaOnly are the keys only a Lua pool may set.
var luaOnly = []string{"lua_arg", "lua_dirs", "listen_tags", "lua_timeout", "lua_max_alloc", "lua_internal_cache"}

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

// maxListenTag is the longest listener tag, as mcp.attach takes them.
const maxListenTag = 8

// setListenTags reads listen_tags: a mapping of tag to listen address.
func (pp *poolParser) setListenTags(key string, v *yaml.Node) {
	const want = "must be a mapping of listener tags (1 to 8 characters) to listen addresses"
	if v.Kind != yaml.MappingNode || len(v.Content) == 0 || !pp.b.plain(v, pp.p.Name, key) {
		pp.fail(v.Line, key, want)
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, a := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || len(k.Value) == 0 || len(k.Value) > maxListenTag ||
			gostrings.ContainsAny(k.Value, " \t") || a.Kind != yaml.ScalarNode {
			pp.fail(k.Line, key, want)
			return
		}
		l, msg := parseListen(a.Value)
		if msg != "" {
			pp.fail(a.Line, key, fmt.Sprintf("%s: %s", k.Value, msg))
			return
		}
		pp.p.ListenTags = append(pp.p.ListenTags, TaggedListen{Tag: k.Value, Listen: l})
	}
}

// listenTagsNode is the listen_tags mapping.
func listenTagsNode(p *Pool) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, t := range p.ListenTags {
		m.Content = append(m.Content, str(t.Tag), str(t.Listen.text()))
	}
	return m
}
