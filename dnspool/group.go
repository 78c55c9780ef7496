package dnspool

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"shardproxy/config"
)

// DefaultStartWait bounds how long Resolve waits for a new watcher's first
// answer. A pool waits less when ten of its intervals (at least a second)
// are shorter: by then it has asked ten times.
const DefaultStartWait = 5 * time.Second

// startWait is how long Resolve waits for the first answer of a pool
// resolved every interval.
func (g *Group) startWait(interval time.Duration) time.Duration {
	return min(g.cfg.StartWait, max(10*interval, time.Second))
}

// Config configures a Group. The zero value is valid.
type Config struct {
	// Logger receives the watchers' logs; nil: slog.Default().
	Logger *slog.Logger
	// OnChange is called, from a watcher's goroutine, when a pool's set
	// in use is no longer the one Resolve last gave: the caller applies
	// its configuration again. It must not block. nil: nothing is called.
	OnChange func(pool string)
	// StartWait bounds how long Resolve waits for a new watcher's first
	// answer (a pool waits at most ten of its intervals, and at least a
	// second, within it); 0: DefaultStartWait.
	StartWait time.Duration
}

// Group holds the watchers of the servers_from pools of the running
// configuration, one per pool.
type Group struct {
	cfg Config

	mu       sync.Mutex
	watchers map[string]*watcher
	closed   bool
}

// New returns a Group without watchers.
func New(c Config) *Group {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.OnChange == nil {
		c.OnChange = func(string) {}
	}
	if c.StartWait <= 0 {
		c.StartWait = DefaultStartWait
	}
	return &Group{cfg: c, watchers: make(map[string]*watcher)}
}

// Resolve returns cfg, or a copy of it in which every servers_from pool
// has its watcher's servers, starting the watchers cfg needs and waiting
// (at most StartWait from a watcher's start) for a new one's first answer.
// A pool without an answer keeps its servers key's set; a pool without
// either is an error naming the pool, the name and the last failure.
// cfg itself is never changed. Watchers of pools cfg lacks keep running:
// Sync stops them once the caller applied cfg (or went back to another).
func (g *Group) Resolve(cfg *config.Config) (*config.Config, error) {
	// Every watcher first, so that new ones wait for their first answers
	// side by side.
	ws := make([]*watcher, len(cfg.Pools))
	for i, p := range cfg.Pools {
		if p.ServersFrom == nil {
			continue
		}
		w, err := g.watcher(p)
		if err != nil {
			return nil, fmt.Errorf("pool %q: servers_from: %w", p.Name, err)
		}
		ws[i] = w
	}
	out := cfg
	for i, p := range cfg.Pools {
		w := ws[i]
		if w == nil {
			continue
		}
		<-w.ready
		servers := w.current()
		if servers == nil {
			if len(p.Servers) == 0 {
				st := w.stats()
				return nil, fmt.Errorf("pool %q: servers_from: no answer for %s %s within %s (%s), and no servers key to start on",
					p.Name, st.Type, st.Name, g.startWait(p.ServersFrom.Interval), or(st.LastError, "no resolution finished"))
			}
			g.cfg.Logger.Warn("no dns answer yet, pool runs its servers key's set", "pool", p.Name, "servers", len(p.Servers))
			continue
		}
		if out == cfg {
			c := *cfg
			c.Pools = slices.Clone(cfg.Pools)
			out = &c
		}
		q := *p
		q.Servers = servers
		out.Pools[i] = &q
	}
	return out, nil
}

// watcher returns the running watcher of p's servers_from, starting one
// (and stopping one that asks something else) when there is none.
func (g *Group) watcher(p *config.Pool) (*watcher, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("dnspool: closed")
	}
	if w := g.watchers[p.Name]; w != nil {
		if w.sf.Same(p.ServersFrom) {
			return w, nil
		}
		w.close()
		delete(g.watchers, p.Name)
	}
	w, err := newWatcher(p.Name, p.ServersFrom, g.cfg.Logger, g.cfg.OnChange)
	if err != nil {
		return nil, err
	}
	g.watchers[p.Name] = w
	go w.run(g.startWait(p.ServersFrom.Interval))
	return w, nil
}

// Sync stops the watchers of the pools that cfg, the configuration the
// proxy runs, has not, or whose servers_from it asks differently.
func (g *Group) Sync(cfg *config.Config) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, w := range g.watchers {
		if p := cfg.Pool(name); p == nil || !w.sf.Same(p.ServersFrom) {
			w.close()
			delete(g.watchers, name)
		}
	}
}

// Stats returns every watcher's figures, by pool name.
func (g *Group) Stats() []Stats {
	g.mu.Lock()
	ws := make([]*watcher, 0, len(g.watchers))
	for _, w := range g.watchers {
		ws = append(ws, w)
	}
	g.mu.Unlock()
	out := make([]Stats, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.stats())
	}
	slices.SortFunc(out, func(a, b Stats) int { return strings.Compare(a.Pool, b.Pool) })
	return out
}

// Close stops every watcher; Resolve fails after it.
func (g *Group) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, w := range g.watchers {
		w.close()
		delete(g.watchers, name)
	}
	g.closed = true
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
