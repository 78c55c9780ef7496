package observe

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
)

// MaxCommands bounds the commands a Commands keeps a histogram of; the
// requests of any further command count under OtherCommand. The dialects'
// command tables are smaller (memcache about 30, Redis about 240, most of
// which a cache's clients never send).
const MaxCommands = 256

// OtherCommand is the name the commands past MaxCommands count under.
const OtherCommand = "other"

// Commands keeps a latency histogram per command of a pool, from read to
// written (Record.Total). The zero Commands is ready; it is safe for
// concurrent use and kept across reloads for a pool of the same name.
type Commands struct {
	m sync.Map // name -> *backend.Histogram
	n atomic.Int32
}

// Histogram returns the histogram of command name, made on first use.
func (c *Commands) Histogram(name string) *backend.Histogram {
	if h, ok := c.m.Load(name); ok {
		return h.(*backend.Histogram)
	}
	if c.n.Load() >= MaxCommands && name != OtherCommand {
		return c.Histogram(OtherCommand)
	}
	h, loaded := c.m.LoadOrStore(name, new(backend.Histogram))
	if !loaded {
		c.n.Add(1)
	}
	return h.(*backend.Histogram)
}

// CommandLatency is one command's histogram, copied.
type CommandLatency struct {
	Command string
	Counts  [len(backend.LatencyBuckets) + 1]int64
	Sum     time.Duration
}

// Snapshot copies every command's histogram, by command name.
func (c *Commands) Snapshot() []CommandLatency {
	var out []CommandLatency
	c.m.Range(func(k, v any) bool {
		h := v.(*backend.Histogram)
		cl := CommandLatency{Command: k.(string), Sum: time.Duration(h.Sum.Load())}
		for i := range cl.Counts {
			cl.Counts[i] = h.Counts[i].Load()
		}
		out = append(out, cl)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Command < out[j].Command })
	return out
}

// Pool is what a pool's views keep: its slowlog, its commands' latency
// and its hot keys (nil while it counts none). The zero Pool is ready; it
// is kept across reloads.
type Pool struct {
	Slowlog  Slowlog
	Commands Commands
	Hot      atomic.Pointer[HotKeys]
}

// IsHot reports whether key is among the pool's hot keys now (false
// without hot_keys).
func (p *Pool) IsHot(key []byte) bool {
	h := p.Hot.Load()
	return h != nil && h.IsHot(key)
}

// ConfigureHot makes the pool count its n hottest keys (0: none), keeping
// its counts when n is unchanged.
func (p *Pool) ConfigureHot(n int) {
	switch h := p.Hot.Load(); {
	case n <= 0:
		p.Hot.Store(nil)
	case h == nil || h.Len() != n:
		p.Hot.Store(NewHotKeys(n))
	}
}
