package lua

import (
	"math"
	"sync"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// Token bucket rate limits, as memcached's proxy has them:
//
//   - mcp.ratelim_tbf{limit =, fillrate =, tickrate =} (route stage) makes
//     a limiter of the worker state that calls it;
//   - mcp.ratelim_global_tbf{...} (config stage) makes one limiter shared
//     by every worker: it crosses to mcp_config_routes in the value
//     mcp_config_pools returns (and to a cron in its upvalues), and it is
//     safe for the workers' goroutines at once.
//
// Calling either, lim(n), takes n tokens and returns true when the bucket
// held more than n (memcached compares strictly: a full bucket of limit
// tokens grants limit-1 single takes), false otherwise, taking nothing. A
// missing n is an error; 0 is true while the bucket is not empty; a
// negative n is false. The bucket starts full and gains fillrate tokens
// (0 reads as 1) per whole tickrate milliseconds (0 reads as 1) elapsed on
// the wall clock, up to limit. Each option is a whole number from 0 to
// 2^32-2 (memcached's check); a missing one, or one that is not a whole
// number, is 0.

// Type names of the limiters, as memcached names them.
const (
	typeTbf       = "mcp.ratelim_tbf"
	typeGlobalTbf = "mcp.ratelim_global_tbf" // in the config state
	typeProxyTbf  = "mcp.ratelim_proxy_tbf"  // a worker's handle on a global one
)

// tbf is one token bucket. mu is used by global ones only.
type tbf struct {
	mu     sync.Mutex
	global bool
	bucket uint32
	limit  uint32
	fill   uint32 // tokens added per tick
	tick   uint32 // milliseconds
	last   int64  // milliseconds since the epoch, advanced by whole ticks
}

// newTbf reads the options table at argument 1.
func newTbf(L *glua.LState, global bool) *tbf {
	opts := L.CheckTable(1)
	num := func(key string) uint32 {
		v := opts.RawGetString(key)
		if v == glua.LNil {
			return 0
		}
		n, ok := v.(glua.LNumber)
		if !ok || n != glua.LNumber(math.Trunc(float64(n))) {
			return 0 // as lua_tointeger reads it
		}
		if n < 0 || n > math.MaxUint32-1 {
			L.RaiseError("mcp.ratelim_tbf: arguments must be unsigned 32 bit integer")
		}
		return uint32(n)
	}
	b := &tbf{global: global, limit: num("limit"), fill: num("fillrate"), tick: num("tickrate")}
	b.fill, b.tick = max(b.fill, 1), max(b.tick, 1)
	b.bucket = b.limit
	b.last = time.Now().UnixMilli()
	return b
}

// take takes n tokens if the bucket holds more than n, at now
// (milliseconds since the epoch).
func (b *tbf) take(n int64, now int64) bool {
	if b.global {
		b.mu.Lock()
		defer b.mu.Unlock()
	}
	if delta := now - b.last; delta > int64(b.tick) {
		ticks := delta / int64(b.tick)
		b.last += ticks * int64(b.tick)
		b.bucket = uint32(min(int64(b.bucket)+ticks*int64(b.fill), int64(b.limit)))
	}
	if n < 0 || int64(b.bucket) <= n {
		return false
	}
	b.bucket -= uint32(n)
	return true
}

// tbfCall is a limiter's __call: lim(n).
func tbfCall(L *glua.LState) int {
	b, ok := userValue[*tbf](L.Get(1))
	if !ok {
		L.ArgError(1, "rate limiter expected")
	}
	v, ok := L.Get(2).(glua.LNumber)
	if !ok {
		L.ArgError(2, "number expected, got "+L.Get(2).Type().String())
	}
	n := int64(0)
	if f := float64(v); f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		n = int64(f) // as lua_tointeger: a fraction reads as 0
	}
	L.Push(glua.LBool(b.take(n, time.Now().UnixMilli())))
	return 1
}

// ratelimTbf is the route stage's mcp.ratelim_tbf(opts).
func (w *worker) ratelimTbf(L *glua.LState) int {
	ud := L.NewUserData()
	ud.Value = newTbf(L, false)
	ud.Metatable = w.v2.tbfMT
	L.Push(ud)
	return 1
}

// ratelimGlobalTbf is the config stage's mcp.ratelim_global_tbf(opts).
func (cs *configStage) ratelimGlobalTbf(L *glua.LState) int {
	ud := L.NewUserData()
	ud.Value = newTbf(L, true)
	ud.Metatable = L.NewTypeMetatable(typeGlobalTbf) // not callable here, as in memcached
	L.Push(ud)
	return 1
}

// tbfMetatables makes the metatables of a worker's limiters.
func (w *worker) tbfMetatables() {
	w.v2.tbfMT = w.callMetatable(typeTbf, tbfCall)
	w.v2.proxyTbfMT = w.callMetatable(typeProxyTbf, tbfCall)
}
