package config

import (
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"
)

// nativeKeys are the keys of a native sharded pool, the proxy's own
// distribution of keys over a servers list: how a key is hashed and
// distributed, and how a memcache pool speaks to its servers. A
// redis_cluster pool refuses the hashing keys; a Lua pool ignores them but
// for hash_seed, and refuses server_protocol: meta.
var nativeKeys = map[string]poolKey{
	"hash":         stringKey(func(p *Pool) *string { return &p.Hash }, oneOf("hash", hashes)).onlyIf(notCluster),
	"hash_tag":     stringKey(func(p *Pool) *string { return &p.HashTag }, checkHashTag, "").onlyIf(notCluster),
	"distribution": stringKey(func(p *Pool) *string { return &p.Distribution }, oneOf("distribution", distributions)).onlyIf(notCluster),
	"hash_seed": keyOf((*poolParser).setHashSeed, func(p *Pool) *uint64 { return &p.HashSeed }).
		encodedAs(func(p *Pool) *yaml.Node { return num(strconv.FormatUint(p.HashSeed, 10)) }).
		omitIf(func(p *Pool) bool { return p.HashSeed == 0 }),
	"server_protocol": stringKey(func(p *Pool) *string { return &p.ServerProtocol }, checkServerProtocol, DefaultServerProtocol, "").
		// a Lua pool's default is text (lua/config_kind.go)
		omitIf(func(p *Pool) bool { return p.Kind() == KindLua && p.ServerProtocol == ServerProtocolText }),
}

// checkHashTag wants two bytes, as twemproxy's conf_set_hashtag checks the
// length in bytes and the tag is matched byte by byte.
func checkHashTag(s string) string {
	if len(s) != 2 {
		return fmt.Sprintf("%q is not exactly 2 characters (bytes), such as \"{}\"", s)
	}
	return ""
}

func (pp *poolParser) setHashSeed(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	n, ok := parseSeed(s)
	if !ok {
		pp.fail(v.Line, key, fmt.Sprintf("%q is not a number from 0 to 2^64-1 (decimal or 0x hex)", s))
		return
	}
	pp.p.HashSeed = n
}

// checkServerProtocol wants server_protocol: auto, text or meta.
func checkServerProtocol(s string) string {
	switch s {
	case ServerProtocolAuto, ServerProtocolText, ServerProtocolMeta:
		return ""
	}
	return fmt.Sprintf("unknown value %q; want %s, %s or %s", s, ServerProtocolAuto, ServerProtocolText, ServerProtocolMeta)
}
