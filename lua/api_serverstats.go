package lua

import (
	"os"
	"strconv"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
	"shardproxy/store"
)

// mcp.server_stats([section]) returns a table of the server's statistics,
// name to value, every value a string, as memcached's does. memcached has
// it in the config stage only (its crons run there); shardproxy runs
// crons in worker 0, so it is there too, for a cron, and raises an error
// in a handler or mcp_config_routes. Sections:
//   - none (or nil): pid, uptime (seconds since the process started),
//     time (the epoch seconds), pointer_size, threads (the Lua workers)
//     and the router's counters (lua_requests, lua_failures, ...);
//   - a section the pool answers "stats NAME" with (Config.Sections:
//     "settings", "proxy", "conns", and the router's own below), that
//     section; "conns", "items", "slabs" and "sizes" as memcached gives
//     them, a table per "N:stat" (or "items:N:stat") number of stat to
//     value, other names as they are;
//   - without Config.Sections, the router's own sections (Section):
//     "proxy" (its limits), "proxyfuncs", "items" and "slabs" of the
//     internal cache; and "settings" (num_threads, lua_max_run_ms,
//     lua_queue) of the router alone;
//   - memcached's other sections ("conns", "sizes", "extstore",
//     "proxybe"): an empty table, shardproxy has no such data for a
//     route file;
//   - anything else: "unknown subcommand passed to server_stats".

// emptySections are memcached's sections server_stats answers empty
// when neither the pool nor the router has them.
var emptySections = map[string]bool{
	"conns": true, "items": true, "slabs": true, "sizes": true,
	"extstore": true, "proxybe": true,
}

// numberedSections are the sections whose "N:stat" names memcached's
// server_stats splits into a table per N.
var numberedSections = map[string]bool{"conns": true, "items": true, "slabs": true, "sizes": true}

// serverStats is the config stage's mcp.server_stats.
func (cs *configStage) serverStats(L *glua.LState) int { return cs.r.serverStats(L) }

// serverStats is a worker's mcp.server_stats: for crons only.
func (w *worker) serverStats(L *glua.LState) int {
	if !w.inCron {
		L.RaiseError("mcp.server_stats can only be called from mcp_config_pools or a cron")
	}
	return w.r.serverStats(L)
}

func (r *Router) serverStats(L *glua.LState) int {
	t := L.NewTable()
	str := func(name string, v int64) { t.RawSetString(name, glua.LString(strconv.FormatInt(v, 10))) }
	section := ""
	if v := L.Get(1); v != glua.LNil {
		section = L.CheckString(1)
	}
	stats, found := r.poolSection(section)
	switch {
	case found:
		fillSection(L, t, stats, numberedSections[section])
	case section == "":
		str("pid", int64(os.Getpid()))
		str("uptime", int64(time.Since(processStart)/time.Second))
		str("time", time.Now().Unix())
		str("pointer_size", strconv.IntSize)
		str("threads", int64(r.cfg.Workers))
		for _, c := range r.Counters() {
			if strings.HasPrefix(c.Name, "lua_") {
				str(c.Name, c.Value)
			}
		}
	case section == "settings":
		str("num_threads", int64(r.cfg.Workers))
		str("lua_max_run_ms", r.cfg.MaxRun.Milliseconds())
		str("lua_queue", int64(r.cfg.Queue))
	case emptySections[section]:
	default:
		L.RaiseError("unknown subcommand passed to server_stats")
	}
	L.Push(t)
	return 1
}

// poolSection is the named section as the pool's "stats NAME" gives it
// (Config.Sections), else the router's own; "" is neither's.
func (r *Router) poolSection(name string) ([]codec.Stat, bool) {
	if name == "" {
		return nil, false
	}
	if r.cfg.Sections != nil {
		return r.cfg.Sections.Section(name)
	}
	return r.Section(name)
}

// fillSection puts stats in t; numbered, a stat named "N:name" or
// "items:N:name" goes in t[N] as name, as memcached's server_stats does.
func fillSection(L *glua.LState, t *glua.LTable, stats []codec.Stat, numbered bool) {
	for _, st := range stats {
		if numbered {
			name := strings.TrimPrefix(st.Name, "items:")
			num, stat, ok := strings.Cut(name, ":")
			if n, err := strconv.Atoi(num); ok && err == nil {
				sub, ok := t.RawGetInt(n).(*glua.LTable)
				if !ok {
					sub = L.NewTable()
					t.RawSetInt(n, sub)
				}
				sub.RawSetString(stat, glua.LString(st.Value))
				continue
			}
		}
		t.RawSetString(st.Name, glua.LString(st.Value))
	}
}

// Section is the router's part of the pool's "stats NAME" (the pool asks
// it for the sections it does not have itself, and adds "" and "proxy"
// to its own): "", the lines a plain "stats" adds (proxy_req_active,
// ...); "proxy", the router's limits; "proxyfuncs", the function
// generators and their request contexts by name (v2_funcstats.go);
// "items" and "slabs" of the internal cache as one slab class, 1,
// memcached's names for the store's figures; false for any other name.
// Safe for concurrent use.
func (r *Router) Section(name string) ([]codec.Stat, bool) {
	switch name {
	case "":
		return []codec.Stat{
			{Name: "proxy_request_failed_depth", Value: strconv.FormatInt(r.failedDepth.Load(), 10)},
			{Name: "proxy_req_active", Value: strconv.FormatInt(r.active.Load(), 10)},
		}, true
	case "proxy":
		return r.limitStats(), true
	case "proxyfuncs":
		return r.funcs.section(), true
	case "items", "slabs":
		if r.cfg.Internal == nil {
			return nil, false
		}
		return cacheSection(name, r.cfg.Internal.Stats()), true
	}
	return nil, false
}

// limitStats are the router's limits and the bytes they count now.
func (r *Router) limitStats() []codec.Stat {
	return []codec.Stat{
		{Name: "active_req_limit", Value: strconv.FormatInt(r.activeLimit, 10)},
		{Name: "buffer_memory_limit", Value: strconv.FormatInt(r.bufferLimit, 10)},
		{Name: "buffer_memory_used", Value: strconv.FormatInt(max(0, r.bufferUsed.Load()), 10)},
	}
}

// cacheSection is "stats items" or "stats slabs" of a store: memcached
// lists a class that holds items, and the store is one class, 1.
func cacheSection(name string, s store.Stats) []codec.Stat {
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	if name == "slabs" {
		out := []codec.Stat{{Name: "active_slabs", Value: "0"}, {Name: "total_malloced", Value: itoa(s.Bytes)}}
		if s.Items == 0 && s.Stores == 0 { // a class stays listed once used, as memcached's keeps its pages
			return out
		}
		out[0].Value = "1"
		return append([]codec.Stat{
			{Name: "1:total_chunks", Value: itoa(s.Items)},
			{Name: "1:used_chunks", Value: itoa(s.Items)},
			{Name: "1:free_chunks", Value: "0"},
			{Name: "1:get_hits", Value: itoa(int64(s.Hits))},
			{Name: "1:cmd_set", Value: itoa(int64(s.Stores))},
		}, out...)
	}
	if s.Items == 0 {
		return nil
	}
	return []codec.Stat{
		{Name: "items:1:number", Value: itoa(s.Items)},
		{Name: "items:1:mem_requested", Value: itoa(s.Bytes)},
		{Name: "items:1:evicted", Value: itoa(int64(s.Evictions))},
		{Name: "items:1:reclaimed", Value: itoa(int64(s.Expirations))},
		{Name: "items:1:outofmemory", Value: itoa(int64(s.NoMemory))},
	}
}
