package lua

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"shardproxy/codec"
)

// funcStats counts a router's function generators and their request
// contexts by generator name, summed over the workers, as memcached's
// "stats proxyfuncs" shows them (funcs_NAME, slots_NAME). memcached
// counts a generator from its ready until its garbage collector frees
// it, which, once it has run, leaves those the routes reach; gopher-lua
// has no finalizers, so a generator counts from when mcp.attach makes it
// reachable (countFuncgen): the attached one, its handles' generators, a
// router's ("mcp_router") routes; a plain function given to mcp.attach
// counts as "anonymous", with its one handler as its one slot. A context
// counts from when it is made until its generator's free list drops it.
// Safe for concurrent use.
type funcStats struct {
	mu     sync.Mutex
	byName map[string]*funcCount
}

// funcCount is one name's counters.
type funcCount struct {
	funcs, slots atomic.Int64
}

// of returns name's counters, made at first use; a generator keeps the
// pointer, so a context costs no lookup.
func (fs *funcStats) of(name string) *funcCount {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.byName == nil {
		fs.byName = map[string]*funcCount{}
	}
	c := fs.byName[name]
	if c == nil {
		c = &funcCount{}
		fs.byName[name] = c
	}
	return c
}

// section is "stats proxyfuncs": funcs_NAME and slots_NAME of each name
// with a generator, by name.
func (fs *funcStats) section() []codec.Stat {
	fs.mu.Lock()
	names := make([]string, 0, len(fs.byName))
	for name, c := range fs.byName {
		if c.funcs.Load() != 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]codec.Stat, 0, 2*len(names))
	for _, name := range names {
		c := fs.byName[name]
		out = append(out,
			codec.Stat{Name: "funcs_" + name, Value: strconv.FormatInt(c.funcs.Load(), 10)},
			codec.Stat{Name: "slots_" + name, Value: strconv.FormatInt(c.slots.Load(), 10)})
	}
	fs.mu.Unlock()
	return out
}

// addSlots adds n to c's slots; a nil c (a generator no attached route
// reaches) counts nothing.
func (c *funcCount) addSlots(n int64) {
	if c != nil {
		c.slots.Add(n)
	}
}

// countFuncgen starts counting fg and the generators it reaches, each
// once, with the request contexts they hold.
func (w *worker) countFuncgen(fg *funcgen) {
	if fg == nil || fg.count != nil {
		return
	}
	fg.count = w.r.funcs.of(fg.name)
	fg.count.funcs.Add(1)
	fg.count.addSlots(int64(fg.ease.total)) // free, pinned in a parent, or serving
	for _, h := range fg.handles {
		w.countFuncgen(h.child)
	}
	r := fg.router
	if r == nil {
		return
	}
	for _, e := range r.routes {
		w.countFuncgen(e.fg)
		for _, c := range e.cmds {
			w.countFuncgen(c)
		}
	}
	for _, c := range r.cmap {
		w.countFuncgen(c)
	}
	w.countFuncgen(r.def)
}
