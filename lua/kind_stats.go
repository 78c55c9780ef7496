package lua

import (
	"strconv"

	"shardproxy/codec"
	"shardproxy/store"
)

var _ codec.SectionEnv = poolRouter{}

// Section implements codec.SectionEnv: what a Lua pool adds to
// memcached's stats subcommands. "proxy" gives the router's limits as
// memcached's proxy shows them (active_req_limit, buffer_memory_limit in
// bytes, buffer_memory_used; 0 for no limit). "items" and "slabs" describe
// a memcache pool's internal cache, which memcached's proxy keeps in
// memcached's own storage: the store has no slab classes, so they show it
// as one class, 1, holding every item, and no extstore ever holds an item
// back.
func (l poolRouter) Section(name string) ([]codec.Stat, bool) {
	switch name {
	case "proxy":
		return l.r.limitStats(), true
	case "items":
		if l.cache != nil {
			return itemsStats(l.cache.s.Stats()), true
		}
	case "slabs":
		if l.cache != nil {
			return slabsStats(l.cache.s.Stats()), true
		}
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

// itemsStats is "stats items" of a store: class 1's items, bytes and
// evictions, or nothing when it is empty, as memcached lists only the
// classes that hold items.
func itemsStats(s store.Stats) []codec.Stat {
	if s.Items == 0 {
		return nil
	}
	return []codec.Stat{
		{Name: "items:1:number", Value: strconv.FormatInt(s.Items, 10)},
		{Name: "items:1:mem_requested", Value: strconv.FormatInt(s.Bytes, 10)},
		{Name: "items:1:evicted", Value: strconv.FormatUint(s.Evictions, 10)},
		{Name: "items:1:outofmemory", Value: strconv.FormatUint(s.NoMemory, 10)},
	}
}

// slabsStats is "stats slabs" of a store: class 1's items as its used
// chunks, its hits and writes, and the bytes the limit counts as
// total_malloced.
func slabsStats(s store.Stats) []codec.Stat {
	return []codec.Stat{
		{Name: "1:used_chunks", Value: strconv.FormatInt(s.Items, 10)},
		{Name: "1:get_hits", Value: strconv.FormatUint(s.Hits, 10)},
		{Name: "1:cmd_set", Value: strconv.FormatUint(s.Stores, 10)},
		{Name: "active_slabs", Value: "1"},
		{Name: "total_malloced", Value: strconv.FormatInt(s.Bytes, 10)},
	}
}
