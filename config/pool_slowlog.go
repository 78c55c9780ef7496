package config

import "time"

// MaxSlowlogLen bounds slowlog_max_len: a slowlog entry keeps a request's
// first 512 bytes and its key, so a full slowlog holds at most a few MiB.
const MaxSlowlogLen = 4096

// MaxHotKeys bounds hot_keys.
const MaxHotKeys = 64

// slowlogKeys are the keys of a pool's slowlog (Pool.SlowlogThreshold and
// Pool.SlowlogMaxLen) and hot keys (Pool.HotKeys), which every kind of
// pool has.
var slowlogKeys = map[string]poolKey{
	"hot_keys":          intKey(func(p *Pool) *int { return &p.HotKeys }, 0, MaxHotKeys, 0),
	"slowlog_threshold": msKey(func(p *Pool) *time.Duration { return &p.SlowlogThreshold }, 1, DefaultSlowlogThreshold),
	"slowlog_max_len":   intKey(func(p *Pool) *int { return &p.SlowlogMaxLen }, 0, MaxSlowlogLen, DefaultSlowlogMaxLen),
}
