package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Values of Pool.NearCacheFill: which replies fill a near cache.
const (
	NearCacheFillGet     = "get"
	NearCacheFillGetGets = "get gets"
	NearCacheFillGets    = "gets"
)

// MaxNearCache bounds near_cache, in MiB (64 GiB).
const MaxNearCache = 64 << 10

// MaxNearCacheTTL bounds near_cache_ttl: the near cache is a cache of
// seconds, in front of servers that hold the real values.
const MaxNearCacheTTL = time.Hour

// nearKeys are the keys of a native memcache pool's near cache (see
// Pool.NearCache); the other kinds refuse them (nearOnly).
var nearKeys = map[string]poolKey{
	"near_cache": intKey(func(p *Pool) *int { return &p.NearCache }, 0, MaxNearCache).
		onlyIf(hasNearCache),
	"near_cache_ttl": keyOf((*poolParser).setNearCacheTTL, func(p *Pool) *time.Duration { return &p.NearCacheTTL }).
		encodedAs(func(p *Pool) *yaml.Node { return num(strconv.FormatInt(int64(p.NearCacheTTL/time.Second), 10)) }).
		omitIf(func(p *Pool) bool { return p.NearCacheTTL == DefaultNearCacheTTL || p.NearCacheTTL == 0 }).
		onlyIf(hasNearCache),
	"near_cache_fill": keyOf((*poolParser).setNearCacheFill, func(p *Pool) *string { return &p.NearCacheFill }).
		encodedAs(func(p *Pool) *yaml.Node { return str(p.NearCacheFill) }).
		omitIf(func(p *Pool) bool { return p.NearCacheFill == DefaultNearCacheFill || p.NearCacheFill == "" }).
		onlyIf(hasNearCache),
	"near_cache_hot": boolKey(func(p *Pool) *bool { return &p.NearCacheHot }, false).onlyIf(hasNearCache),
}

// setNearCacheTTL reads whole seconds, 1 to MaxNearCacheTTL.
func (pp *poolParser) setNearCacheTTL(key string, v *yaml.Node) {
	if n, ok := pp.integer(key, v, 1, int(MaxNearCacheTTL/time.Second)); ok {
		pp.p.NearCacheTTL = time.Duration(n) * time.Second
	}
}

// setNearCacheFill reads "get", "gets" or both, separated by spaces (or
// a YAML list of them), into the canonical NearCacheFill value.
func (pp *poolParser) setNearCacheFill(key string, v *yaml.Node) {
	var words []string
	switch v.Kind {
	case yaml.ScalarNode:
		words = strings.Fields(v.Value)
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				pp.fail(item.Line, key, "must list get and gets, not "+kindName(item))
				return
			}
			words = append(words, strings.Fields(item.Value)...)
		}
	default:
		pp.fail(v.Line, key, "must be get, gets or \"get gets\", not "+kindName(v))
		return
	}
	var get, gets bool
	for _, w := range words {
		switch w {
		case "get":
			get = true
		case "gets":
			gets = true
		default:
			pp.fail(v.Line, key, fmt.Sprintf("unknown command %q; want get, gets or both", w))
			return
		}
	}
	switch {
	case get && gets:
		pp.p.NearCacheFill = NearCacheFillGetGets
	case get:
		pp.p.NearCacheFill = NearCacheFillGet
	case gets:
		pp.p.NearCacheFill = NearCacheFillGets
	default:
		pp.fail(v.Line, key, "is empty; want get, gets or both")
	}
}

// nearOnly are the keys only a native memcache pool may set.
var nearOnly = []string{"near_cache", "near_cache_ttl", "near_cache_fill", "near_cache_hot"}
