package shard

import (
	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/memcache"
	"shardproxy/route"
)

// nearRouter is a native memcache pool with a near cache (near.go): it
// answers what the cache can and passes the rest to the pool's
// router, watching the replies that change the cache.
type nearRouter struct {
	inner *router
	cache *nearCache
	fill  [2]bool               // fill from get, from gets
	hot   func(key []byte) bool // near_cache_hot: only the keys it names fill; nil: any

	// The taps, bound once so that setting one costs no allocation.
	tapGet, tapWrite, tapTouch, tapFlush func(*route.Exchange, *backend.Call)
}

var (
	_ route.Router    = (*nearRouter)(nil)
	_ kind.MetaProber = (*nearRouter)(nil)
)

// newNearRouter wraps inner with pc's near cache: the running router's,
// when a reload kept its size and TTL, else a new one.
// A new cache is counted by rc until it closes.
func newNearRouter(inner *router, old route.Router, pc *config.Pool, rc *kind.Counters, hot func([]byte) bool) *nearRouter {
	r := &nearRouter{inner: inner}
	if pc.NearCacheHot {
		r.hot = hot
	}
	if o, ok := old.(*nearRouter); ok && o.cache.keeps(pc) {
		o.cache.Hold()
		r.cache = o.cache
	} else {
		r.cache = newNearCache(pc, rc)
	}
	switch pc.NearCacheFill {
	case config.NearCacheFillGetGets:
		r.fill = [2]bool{true, true}
	case config.NearCacheFillGets:
		r.fill = [2]bool{false, true}
	default:
		r.fill = [2]bool{true, false}
	}
	r.tapGet, r.tapWrite, r.tapTouch, r.tapFlush = r.filled, r.written, r.touched, r.flushed
	return r
}

// asShard returns the sharded router of a native pool's router, with or
// without a near cache, or nil.
func asShard(r route.Router) *router {
	switch r := r.(type) {
	case *router:
		return r
	case *nearRouter:
		return r.inner
	}
	return nil
}

// Route implements route.Router.
func (r *nearRouter) Route(x *route.Exchange) {
	c := r.cache
	switch nearEffectOf(&x.Req) {
	case nearGet:
		key := x.Req.Keys[0]
		if v, flags, ok := c.lookup(key); ok {
			c.hits.Add(1)
			x.Answer(memcache.AppendHit(x.Out(), key, flags, v))
			return
		}
		c.misses.Add(1)
		r.routeFill(x, r.fill[0] && r.admits(key))
	case nearGets:
		r.routeFill(x, r.fill[1] && r.admits(x.Req.Keys[0]))
	case nearWrite:
		r.routeWrite(x)
	case nearTouch:
		for _, k := range x.Req.Keys {
			c.forget(k, 0)
		}
		x.Tap = r.tapTouch
		r.inner.Route(x)
	case nearFlush:
		c.flush(int64(len(r.inner.backends())))
		x.Tap = r.tapFlush
		r.inner.Route(x)
	default:
		r.inner.Route(x)
	}
}

// admits reports whether key may fill the cache: any key, or with
// near_cache_hot one of the pool's hot keys now.
func (r *nearRouter) admits(key []byte) bool {
	return r.hot == nil || r.hot(key)
}

// routeFill sends a one-key get or gets; when fill, its hit fills the
// cache.
func (r *nearRouter) routeFill(x *route.Exchange, fill bool) {
	if fill {
		x.TapArg = r.cache.ticket(x.Req.Keys[0])
		x.Tap = r.tapGet
	}
	r.inner.Route(x)
}

// routeWrite forgets a write's key and counts the write in flight until
// its reply arrives (written), or at once when it is not sent.
func (r *nearRouter) routeWrite(x *route.Exchange) {
	key := x.Req.Keys[0]
	if x.Req.Route != codec.RouteKey { // every memcache write is; be safe
		r.cache.forget(key, 0)
		x.Tap = r.tapTouch
		r.inner.Route(x)
		return
	}
	r.cache.forget(key, 1)
	x.Tap = r.tapWrite
	if !r.inner.routeKey(x) {
		r.cache.forget(key, -1)
	}
}

// filled is a get's tap: a hit fills the cache, if nothing changed since.
func (r *nearRouter) filled(x *route.Exchange, c *backend.Call) {
	if c.Reply.Err != nil || c.Reply.Kind != codec.ReplyOK {
		return
	}
	if v, flags, ok := memcache.Hit(c.Req, c.Reply.Raw); ok {
		r.cache.fill(c.Req.Keys[0], v, flags, x.TapArg)
	}
}

// written is a write's tap: whatever the reply, the key goes again and
// the write is no longer in flight.
func (r *nearRouter) written(x *route.Exchange, c *backend.Call) {
	r.cache.forget(c.Req.Keys[0], -1)
	if r.inner.spool != nil {
		r.inner.spooled(x, c)
	}
}

// touched is the tap of gat, gats and other requests that change their
// keys without being counted in flight.
func (r *nearRouter) touched(_ *route.Exchange, c *backend.Call) {
	for _, k := range c.Req.Keys {
		r.cache.forget(k, 0)
	}
}

// flushed is flush_all's tap, once per server.
func (r *nearRouter) flushed(*route.Exchange, *backend.Call) { r.cache.flush(-1) }

// Stats implements route.Router: the near cache's counters, and the
// delete spool's.
func (r *nearRouter) Stats() []route.Stat {
	st := r.cache.Counters()
	if r.inner.spool != nil {
		st = append(st, r.inner.spool.Counters()...)
	}
	return st
}

// counters implements kind.CounterSource.
func (c *nearCache) Counters() []route.Stat {
	c.swap.Lock() // gone and the store it counts before, never one without the other
	st := c.store.Load().Stats()
	evictions := c.gone.Load() + int64(st.Evictions)
	c.swap.Unlock()
	return []route.Stat{
		{Name: "near_cache_hits", Help: "One-key gets the near cache answered.", Value: c.hits.Load()},
		{Name: "near_cache_misses", Help: "One-key gets the near cache did not hold, sent to the server.", Value: c.misses.Load()},
		{Name: "near_cache_fills", Help: "Values the near cache took from servers' replies.", Value: c.fills.Load()},
		{Name: "near_cache_invalidations", Help: "Keys the near cache forgot for a write, delete or touch (twice per request: routed and answered).", Value: c.invalidations.Load()},
		{Name: "near_cache_flushes", Help: "Times flush_all emptied the near cache (routed, and once per server reply).", Value: c.flushes.Load()},
		{Name: "near_cache_evictions", Help: "Values the near cache dropped to stay within its size.", Value: evictions},
		{Name: "near_cache_items", Help: "Values the near cache holds.", Kind: route.Gauge, Value: st.Items},
		{Name: "near_cache_bytes", Help: "Bytes the near cache counts against its size.", Kind: route.Gauge, Value: st.Bytes},
	}
}

// Backends implements route.Router.
func (r *nearRouter) Backends() []*backend.Backend { return r.inner.Backends() }

// Place is the wrapped router's: where a request's keys live (a route
// pool asks, to skip a key two pools place on one server).
func (r *nearRouter) Place(req *codec.Request, hint uint32) (*backend.Backend, int, []byte) {
	return r.inner.Place(req, hint)
}

// MetaProbed is the wrapped router's: a near cache does not change what
// the servers are asked.
func (r *nearRouter) MetaProbed() ([]*backend.Backend, bool) { return r.inner.MetaProbed() }

// Close implements route.Router: the store closes with its last router.
func (r *nearRouter) Close() {
	r.inner.Close()
	r.cache.release()
}
