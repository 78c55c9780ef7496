package lua

import (
	"sort"
	"strconv"
	"sync"

	"shardproxy/codec"
)

// fgenStats counts the router's function generators by name, over every
// worker, for memcached's "stats proxyfuncs": funcs_NAME is how many
// generators named NAME are ready (a router from mcp.router_new counts as
// "mcp_router"), slots_NAME how many request contexts they hold, free or
// serving a request. A context that leaks (never goes back to its
// generator) shows as a slot count that only grows. Safe for concurrent
// use; generators and contexts are made rarely, never per request once a
// generator has as many contexts as it has requests in flight.
type fgenStats struct {
	mu     sync.Mutex
	byName map[string]*fgenCount
}

type fgenCount struct{ funcs, slots int64 }

// add adds funcs generators and slots contexts to name's counts.
func (s *fgenStats) add(name string, funcs, slots int64) {
	s.mu.Lock()
	if s.byName == nil {
		s.byName = map[string]*fgenCount{}
	}
	c := s.byName[name]
	if c == nil {
		c = &fgenCount{}
		s.byName[name] = c
	}
	c.funcs += funcs
	c.slots += slots
	s.mu.Unlock()
}

// stats returns funcs_NAME and slots_NAME of every name with a generator,
// by name.
func (s *fgenStats) stats() []codec.Stat {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.byName))
	for n, c := range s.byName {
		if c.funcs != 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]codec.Stat, 0, 2*len(names))
	for _, n := range names {
		c := s.byName[n]
		out = append(out,
			codec.Stat{Name: "funcs_" + n, Value: strconv.FormatInt(c.funcs, 10)},
			codec.Stat{Name: "slots_" + n, Value: strconv.FormatInt(c.slots, 10)})
	}
	return out
}

// Section returns the router's stats section name as memcached's proxy
// shows it: "proxyfuncs" (see fgenStats), and "" for the lines memcached
// adds to a plain "stats": proxy_request_failed_depth, the requests failed
// for a backend's depth limit, and proxy_req_active, the requests being
// served (lua_active). Any other name has no section here.
func (r *Router) Section(name string) ([]codec.Stat, bool) {
	switch name {
	case "":
		return []codec.Stat{
			{Name: "proxy_request_failed_depth", Value: strconv.FormatInt(r.failedDepth.Load(), 10)},
			{Name: "proxy_req_active", Value: strconv.FormatInt(r.active.Load(), 10)},
		}, true
	case "proxyfuncs":
		return r.fgens.stats(), true
	}
	return nil, false
}
