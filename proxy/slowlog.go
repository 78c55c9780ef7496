package proxy

import (
	"strconv"
	"time"

	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/observe"
)

var _ codec.SlowlogEnv = (*pool)(nil)

// Slowlog implements codec.SlowlogEnv: the pool's slowlog (Redis's
// SLOWLOG GET).
func (p *pool) Slowlog(n int) []codec.SlowEntry {
	es := p.stats.obs.Slowlog.Get(n)
	out := make([]codec.SlowEntry, len(es))
	for i := range es {
		out[i] = slowEntry(&es[i])
	}
	return out
}

// SlowlogLen implements codec.SlowlogEnv.
func (p *pool) SlowlogLen() int { return p.stats.obs.Slowlog.Len() }

// SlowlogReset implements codec.SlowlogEnv.
func (p *pool) SlowlogReset() { p.stats.obs.Slowlog.Reset() }

// SlowlogSettings implements codec.SlowlogEnv.
func (p *pool) SlowlogSettings() (time.Duration, int) { return p.stats.obs.Slowlog.Settings() }

// SetSlowlogThreshold implements codec.SlowlogEnv (Redis's CONFIG SET
// slowlog-log-slower-than).
func (p *pool) SetSlowlogThreshold(d time.Duration) {
	p.stats.obs.Slowlog.SetThreshold(d) // below Off is Off, as Redis takes any negative
}

// SetSlowlogMaxLen implements codec.SlowlogEnv (Redis's CONFIG SET
// slowlog-max-len), within config.MaxSlowlogLen: each entry holds up to
// observe.MaxArgs bytes of its request.
func (p *pool) SetSlowlogMaxLen(n int) { p.stats.obs.Slowlog.SetMaxLen(min(n, config.MaxSlowlogLen)) }

// slowEntry is e as a dialect shows it.
func slowEntry(e *observe.SlowEntry) codec.SlowEntry {
	in, queued, server, out := e.Phases()
	return codec.SlowEntry{
		ID: e.ID, Time: e.Read, Took: e.Total(), Command: e.Command, Key: e.Key, Wire: e.Args,
		Client: e.Client, Name: e.Name, Backend: e.Backend, In: in, Queued: queued, Server: server, Out: out,
	}
}

// slowlogSection is memcache's "stats slowlog": the slowlog's length and
// threshold, then one line per entry, newest first, named by its ID:
//
//	STAT 12 time=1732881600.123456 us=52110 cmd=get key=user:1 backend=s1 client=127.0.0.1:50412 in_us=3 queued_us=5 server_us=52090 out_us=12
func (p *pool) slowlogSection() []codec.Stat {
	l := &p.stats.obs.Slowlog
	es := l.Get(-1)
	threshold, _ := l.Settings()
	stats := make([]codec.Stat, 0, len(es)+2)
	stats = append(stats,
		codec.Stat{Name: "slowlog_len", Value: strconv.Itoa(len(es))},
		codec.Stat{Name: "slowlog_threshold_us", Value: strconv.FormatInt(observe.Micros(threshold), 10)})
	for i := range es {
		stats = append(stats, codec.Stat{Name: strconv.FormatInt(es[i].ID, 10), Value: slowLine(slowEntry(&es[i]))})
	}
	return stats
}

// slowLine is one entry of "stats slowlog", its fields name=value, the
// key quoted (strconv) when it holds a space or a byte that is not
// printable.
func slowLine(e codec.SlowEntry) string {
	b := make([]byte, 0, 160)
	b = append(b, "time="...)
	b = strconv.AppendInt(b, e.Time.Unix(), 10)
	b = append(b, '.')
	us := strconv.Itoa(e.Time.Nanosecond() / 1000)
	b = append(append(b, "000000"[len(us):]...), us...)
	b = append(b, " us="...)
	b = strconv.AppendInt(b, e.Took.Microseconds(), 10)
	b = append(b, " cmd="...)
	b = append(b, e.Command...)
	if e.Key != nil {
		b = append(b, " key="...)
		b = appendWord(b, e.Key)
	}
	if e.Backend != "" {
		b = append(b, " backend="...)
		b = append(b, e.Backend...)
	}
	b = append(b, " client="...)
	b = append(b, e.Client...)
	for _, f := range [...]struct {
		name string
		us   int64
	}{{" in_us=", e.In.Microseconds()}, {" queued_us=", e.Queued.Microseconds()},
		{" server_us=", e.Server.Microseconds()}, {" out_us=", e.Out.Microseconds()}} {
		b = append(b, f.name...)
		b = strconv.AppendInt(b, f.us, 10)
	}
	return string(b)
}

// appendWord appends w as it is, or quoted when it would not read as one
// printable word.
func appendWord(b, w []byte) []byte {
	for _, c := range w {
		if c <= ' ' || c >= 0x7f || c == '"' {
			return strconv.AppendQuote(b, string(w))
		}
	}
	return append(b, w...)
}

// hotKeys are the pool's hot keys now, nil when it counts none.
func (p *pool) hotKeys() []observe.HotKey {
	if h := p.stats.obs.Hot.Load(); h != nil {
		return h.Top(time.Now())
	}
	return nil
}

// hotSection is memcache's "stats hotkeys": the window, then one line per
// key, most requested first, named by its rank:
//
//	STAT hotkeys_window_seconds 10
//	STAT 1 key=user:42 requests=30112 bytes=3011200
func (p *pool) hotSection() []codec.Stat {
	keys := p.hotKeys()
	stats := []codec.Stat{{Name: "hotkeys_window_seconds", Value: strconv.Itoa(int(observe.HotWindow / time.Second))}}
	for i, k := range keys {
		v := append([]byte("key="), appendWord(nil, []byte(k.Key))...)
		v = strconv.AppendUint(append(v, " requests="...), k.Requests, 10)
		v = strconv.AppendUint(append(v, " bytes="...), k.Bytes, 10)
		stats = append(stats, codec.Stat{Name: strconv.Itoa(i + 1), Value: string(v)})
	}
	return stats
}

// PoolSlowlog is one pool's slowlog: its settings and entries.
type PoolSlowlog struct {
	Pool      string
	Threshold time.Duration       // observe.Off: the slowlog keeps none
	MaxLen    int                 // 0: the slowlog keeps none
	Entries   []observe.SlowEntry // newest first
}

// Slowlogs returns each pool's slowlog, up to n entries of each (n < 0:
// all), in the configuration's order of pools.
func (s *Server) Slowlogs(n int) []PoolSlowlog {
	var out []PoolSlowlog
	for _, p := range s.currentPools() {
		l := &p.stats.obs.Slowlog
		threshold, maxLen := l.Settings()
		out = append(out, PoolSlowlog{Pool: p.cfg.Name, Threshold: threshold, MaxLen: maxLen, Entries: l.Get(n)})
	}
	return out
}

// ResetSlowlog empties the slowlog of the named pool, or of every pool
// for "", and reports whether there was such a pool.
func (s *Server) ResetSlowlog(name string) bool {
	found := false
	for _, p := range s.currentPools() {
		if name == "" || p.cfg.Name == name {
			p.stats.obs.Slowlog.Reset()
			found = true
		}
	}
	return found
}

// Tap returns the server's tap: the requests of every pool, to its
// subscribers (observe.Tap).
func (s *Server) Tap() *observe.Tap { return &s.tap }
