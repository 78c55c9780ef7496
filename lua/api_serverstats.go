package lua

import (
	"os"
	"strconv"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// mcp.server_stats([section]) returns a table of the server's statistics,
// name to value, every value a string, as memcached's does. memcached has
// it in the config stage only (its crons run there); shardproxy runs
// crons in worker 0, so it is there too, for a cron, and raises an error
// in a handler or mcp_config_routes. Sections:
//   - none (or nil): pid, uptime (seconds since the process started),
//     time (the epoch seconds), pointer_size, threads (the Lua workers)
//     and the router's counters (lua_requests, lua_failures, ...);
//   - "settings": num_threads, lua_max_run_ms, lua_queue;
//   - "proxy": the router's counters and the mcp.add_stat counters
//     (user_NAME);
//   - "proxyfuncs": funcs_NAME and slots_NAME of the function
//     generators (v2_funcstats.go);
//   - memcached's sections about its own storage and connections
//     ("conns", "items", "slabs", "sizes", "extstore", "proxybe"): an
//     empty table, shardproxy has no such data for a route file;
//   - anything else: "unknown subcommand passed to server_stats".

// emptySections are memcached's sections server_stats answers empty.
var emptySections = map[string]bool{
	"conns": true, "items": true, "slabs": true, "sizes": true,
	"extstore": true, "proxybe": true,
}

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
	counters := func(users bool) {
		for _, c := range r.Counters() {
			if users || strings.HasPrefix(c.Name, "lua_") {
				str(c.Name, c.Value)
			}
		}
	}
	section := ""
	if v := L.Get(1); v != glua.LNil {
		section = L.CheckString(1)
	}
	switch {
	case section == "":
		str("pid", int64(os.Getpid()))
		str("uptime", int64(time.Since(processStart)/time.Second))
		str("time", time.Now().Unix())
		str("pointer_size", strconv.IntSize)
		str("threads", int64(r.cfg.Workers))
		counters(false)
	case section == "settings":
		str("num_threads", int64(r.cfg.Workers))
		str("lua_max_run_ms", r.cfg.MaxRun.Milliseconds())
		str("lua_queue", int64(r.cfg.Queue))
	case section == "proxy":
		counters(true)
	case section == "proxyfuncs":
		for _, st := range r.fgens.stats() {
			t.RawSetString(st.Name, glua.LString(st.Value))
		}
	case emptySections[section]:
	default:
		L.RaiseError("unknown subcommand passed to server_stats")
	}
	L.Push(t)
	return 1
}
