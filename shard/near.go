package shard

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/memcache"
	"shardproxy/store"
)

// A native memcache pool with near_cache answers hot one-key gets from a
// store in the proxy's memory (nearRouter, wrapping the pool's
// router) and keeps that store coherent with the writes the proxy
// itself forwards.
//
// What it serves and fills:
//   - a one-key get (text, or sent as mg under server_protocol meta) that
//     the store holds is answered at once, in memcached's words; one it
//     does not hold goes to the server, and a hit reply fills the store
//     with the value and client flags for near_cache_ttl;
//   - a one-key gets always goes to the server (its CAS must be the
//     server's) and fills the store when near_cache_fill says gets;
//   - multi-key gets, gat and gats, and mg, me, mn are forwarded untouched
//     and fill nothing.
//
// What it forgets: a request that can change or remove an item (set, add,
// replace, append, prepend, cas, incr, decr, touch, delete, gat, gats,
// ms, md, ma, and mg with N or T) removes its keys from the store twice:
// when it is routed, before it is sent, and when its reply (or failure)
// arrives, before the client has the reply (route.Exchange.Tap).
// flush_all empties the store both times. A noreply or quiet write is no
// exception: a native pool sends it without noreply (or followed by mn)
// and hides the server's reply, so its reply is seen too.
//
// Why a fill cannot bring back an old value. The keys are spread over
// nearStripes stripes by hash, each with a lock, an epoch and a count of
// the writes in flight; every change to a stripe's part of the store
// happens under its lock. A write, when routed, bumps its stripe's epoch,
// counts itself in flight and deletes its key; when its reply arrives it
// bumps the epoch again, counts itself out and deletes the key again. A
// get that misses records its stripe's epoch when routed; its reply fills
// the store only if, under the lock, the epoch is still that one and no
// write of the stripe is in flight. Take a value V a get's reply carries,
// and a write W of the same key whose client has its reply:
//   - W's reply arrived before the get was routed: the server had applied
//     W before the get was sent, so V is W's value or a later one;
//   - W's reply arrived after the get was routed: the epoch moved, so V is
//     not filled (if the fill came first, W's reply deleted it);
//   - W was routed after the get: the same.
//
// And a client that pipelines "set k; get k" reads its own write: the set
// deleted k when routed and no fill of k's stripe lands until its reply,
// so the get misses and follows the set on the same server socket. That
// is what the in-flight count is for: a get of another client, routed
// after the set but read by the server before it, would otherwise fill the
// old value in between.
//
// What it cannot see: writes that do not pass through this pool of this
// process (other proxies, clients of the servers themselves, other pools
// sharing the servers, items expiring on the server, flush_all with a
// delay, a write that times out here and is applied later). A value such
// a write replaced is served until its near_cache_ttl runs out: the TTL
// is the bound on staleness.
//
// The store lives as long as some router holds it: a reload that keeps
// the pool's near_cache and near_cache_ttl hands it on (nearCache.Holds),
// with its stripes, so old and new routers share one coherent cache while
// the old one drains. A reload that changes them starts a new cache,
// which does not see the writes the old pool's sessions still route while
// they drain: the TTL bounds that too.

// nearStripes is the number of stripes of a near cache's coherence state.
const nearStripes = 1024

// nearStripe is one stripe: its lock, its epoch (bumped by every change,
// read without the lock by a get that misses) and its writes in flight.
type nearStripe struct {
	mu       sync.Mutex
	epoch    atomic.Uint64
	inflight int64
	_        [64 - 8 - 8 - 8]byte // one stripe per cache line
}

// nearCache is a pool's near cache: the store, the stripes and counters,
// shared by the routers of successive generations while its settings
// stay.
type nearCache struct {
	size     int64         // bytes (near_cache)
	ttl      time.Duration // near_cache_ttl
	itemSize int           // the largest item: the pool's item_size_max and room for the key
	store    atomic.Pointer[store.Store]
	seed     maphash.Seed
	kind.Holds

	// flushing counts the flush_all calls in flight: no fill lands while
	// one is.
	flushing atomic.Int64

	stripes [nearStripes]nearStripe

	hits, misses, fills, invalidations, flushes atomic.Int64
	gone                                        atomic.Int64 // evictions of the stores flushes replaced
	swap                                        sync.Mutex   // held to replace the store and count its evictions in gone
}

// newNearCache makes pc's near cache, empty, held once and counted by rc.
func newNearCache(pc *config.Pool, rc *kind.Counters) *nearCache {
	c := &nearCache{
		size:     int64(pc.NearCache) << 20,
		ttl:      pc.NearCacheTTL,
		itemSize: pc.ItemSizeMax + nearItemRoom,
		seed:     maphash.MakeSeed(),
	}
	c.store.Store(c.newStore())
	c.Start(rc, c)
	return c
}

// nearItemRoom is what an item needs besides its value, as the store
// counts it (memcached's measure: a header, the longest key, flags, CAS).
const nearItemRoom = 512

// newStore makes an empty store of c's size.
func (c *nearCache) newStore() *store.Store {
	return store.New(store.Config{MaxBytes: c.size, ItemSizeMax: min(c.itemSize, int(c.size))})
}

// keeps reports whether c can serve pc: the same size and TTL.
func (c *nearCache) keeps(pc *config.Pool) bool {
	return c.size == int64(pc.NearCache)<<20 && c.ttl == pc.NearCacheTTL
}

// release gives back a hold; the last closes the store.
func (c *nearCache) release() {
	c.Drop(c, func() { c.store.Load().Close() })
}

// stripe returns key's stripe number.
func (c *nearCache) stripe(key []byte) uint64 {
	return maphash.Bytes(c.seed, key) % nearStripes
}

// lookup returns key's value and flags if the store holds it.
func (c *nearCache) lookup(key []byte) ([]byte, uint32, bool) {
	v, flags, _, ok := c.store.Load().Get(keyString(key))
	return v, flags, ok
}

// forget removes key; inflight says what it does to the stripe's writes
// in flight (+1 when a write is routed, -1 when its reply arrives, 0 for
// a touch).
func (c *nearCache) forget(key []byte, inflight int64) {
	st := &c.stripes[c.stripe(key)]
	st.mu.Lock()
	st.epoch.Add(1)
	st.inflight += inflight
	c.store.Load().Delete(keyString(key))
	st.mu.Unlock()
	c.invalidations.Add(1)
}

// fill stores key's value if nothing changed its stripe since the get
// that read it was routed at epoch (ticket packs stripe and epoch).
func (c *nearCache) fill(key, value []byte, flags uint32, ticket uint64) {
	st := &c.stripes[ticket%nearStripes]
	st.mu.Lock()
	if st.epoch.Load() == ticket/nearStripes && st.inflight == 0 && c.flushing.Load() == 0 {
		if _, err := c.store.Load().Set(string(key), value, flags, c.ttl); err == nil {
			c.fills.Add(1)
		}
	}
	st.mu.Unlock()
}

// ticket returns what a get that misses key keeps for its fill: key's
// stripe and its epoch now.
func (c *nearCache) ticket(key []byte) uint64 {
	i := c.stripe(key)
	return c.stripes[i].epoch.Load()*nearStripes + i
}

// flush empties the store; inflight is as forget's, for flush_all calls.
// Every stripe's epoch moves first, so no fill whose get came before
// lands; the new store replaces the old one after, so a fill that beat
// the bump lands in the store that goes.
func (c *nearCache) flush(inflight int64) {
	c.flushing.Add(inflight)
	for i := range c.stripes {
		st := &c.stripes[i]
		st.mu.Lock()
		st.epoch.Add(1)
		st.mu.Unlock()
	}
	c.swap.Lock()
	old := c.store.Swap(c.newStore())
	c.gone.Add(int64(old.Stats().Evictions))
	c.swap.Unlock()
	go old.Close() // waits for the sweep to stop; a get that still holds old may read it
	c.flushes.Add(1)
}

// keyString views key as a string for the store's lookups, which do not
// keep it.
func keyString(key []byte) string {
	return unsafe.String(unsafe.SliceData(key), len(key))
}

// nearEffect is what a request does to the near cache.
type nearEffect uint8

const (
	nearNone  nearEffect = iota // nothing: forwarded untouched
	nearGet                     // a one-key get: answered from the store, or fills it
	nearGets                    // a one-key gets: forwarded, may fill
	nearWrite                   // changes or removes its one key
	nearTouch                   // gat, gats: changes its keys' expiry
	nearFlush                   // flush_all
)

// nearEffectOf classifies a memcache request.
func nearEffectOf(req *codec.Request) nearEffect {
	switch req.Cmd {
	case memcache.CmdGet, memcache.CmdGets:
		if req.Route != codec.RouteKey || len(req.Keys) != 1 ||
			req.Mode != codec.ModeNormal && req.Mode != codec.ModeRewrite {
			return nearNone
		}
		if req.Cmd == memcache.CmdGet {
			return nearGet
		}
		return nearGets
	case memcache.CmdGat, memcache.CmdGats:
		return nearTouch
	case memcache.CmdSet, memcache.CmdAdd, memcache.CmdReplace, memcache.CmdAppend, memcache.CmdPrepend,
		memcache.CmdCAS, memcache.CmdIncr, memcache.CmdDecr, memcache.CmdTouch, memcache.CmdDelete,
		memcache.CmdMetaSet, memcache.CmdMetaDelete, memcache.CmdMetaArithmetic:
		return nearWrite
	case memcache.CmdMetaGet:
		if memcache.MetaGetWrites(req.Wire) {
			return nearWrite
		}
	case memcache.CmdFlushAll:
		return nearFlush
	}
	return nearNone
}
