package lua

import (
	"strconv"

	"shardproxy/codec"
)

// limitStats are the router's limits and the bytes they count now.
func (r *Router) limitStats() []codec.Stat {
	return []codec.Stat{
		{Name: "active_req_limit", Value: strconv.FormatInt(r.activeLimit, 10)},
		{Name: "buffer_memory_limit", Value: strconv.FormatInt(r.bufferLimit, 10)},
		{Name: "buffer_memory_used", Value: strconv.FormatInt(max(0, r.bufferUsed.Load()), 10)},
	}
}
