// Package shard is the sharded pool kind, twemproxy's: each key goes to
// the server its hash picks in the pool's distribution (sharding), a
// multi-key request is split per server and its replies merged, a request
// for every server fans out, and under auto_eject_hosts a bad server
// leaves the distribution or hands its keys to a failover pool; under a
// fleet (kind.Env.FleetRing) a remap pool's distribution follows the
// fleet's ring instead of its backends' health (ring.go). It
// registers itself with package kind as config.KindSharded, and its rules
// over a pool's keys with config (config.go): the kind of every pool no
// other kind claims, with the native, near cache, Sentinel and replica
// rules.
//
// It owns what only this kind does: following each shard's master through
// Sentinel (sentinel.go, on package sentinel's Monitor), reading from a
// shard's replicas under read_from (replica.go), and a native memcache
// pool's near cache (near.go, near_router.go), which answers hot one-key
// gets from a store in the proxy's memory and stays coherent with the
// writes the pool forwards; and a native memcache pool's delete spool
// (spool.go, on package spool), which keeps the deletes a server missed
// and has its backends send them on a new socket before any request.
//
// What a user configures and sees of this kind is in docs/sharded.md,
// docs/sentinel.md, docs/caches.md and docs/deletes.md at the
// repository's root.
//
// It must not know the proxy: it sees a pool only through kind.Env, takes
// its backends only from the Env's lease, and answers every Exchange
// exactly once (route.Router). Its Route runs on a session's reader and
// must not block, but for one thing: a delete spooled as it is routed
// (its server out of the ring) is written to the spool's file, and under
// fsync always synced, before Route returns.
//
// Concurrency: a router's backend table and replica table are replaced
// whole (atomic pointers), never changed in place, so Route reads them
// without a lock; the Sentinel monitor's goroutine swaps the first, the
// Sentinel monitor and the replica checker the second. The near cache's
// coherence rests on its stripes' locks and epochs (near.go). Close may
// be called once, after the pool's last request was routed.
package shard
