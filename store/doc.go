// Package store is shardproxy's own memcached-compatible cache, kept in
// the process: the store behind the Lua API's internal cache and a near
// cache for native pools. Of the rest of shardproxy it imports only
// internal/mcbase64, the base64 key decoder memcache routes with, so that
// both read a "b" key as the same bytes.
//
// Do answers one framed client request with memcached 1.6's reply bytes:
// the text commands get, gets, gat, gats, set, add, replace, append,
// prepend, cas, incr, decr, touch and delete, with noreply, and the meta
// commands mg, ms, md, ma, mn and me with their flags (base64 keys, CAS,
// client flags, TTL, opaque, quiet mode, vivify, recache, invalidate, and
// the W, X and Z marks of stale items and recache tokens). Where memcached
// versions differ, Do answers as 1.6.18 (Debian's, which TestDifferential
// runs): memcached 1.6.45's mcp.internal rejects a '+' before numbers and
// a replace without a CAS token, hides ma's reply to a q vivify, and does
// not check the M token's length. The E (explicit CAS) and x (empty the
// value) flags, which 1.6.18 does not know, follow 1.6.45.
// Other memcached commands (stats, version, flush_all, verbosity ...) get
// no bytes, as 1.6.45's proxy answers them when a route passes them to
// mcp.internal.
//
// Get, Set, Delete and Touch are the same store without protocol text.
//
// Memory: Config.MaxBytes bounds the keys, values and ItemOverhead of all
// items; each of the store's shards has an equal share and evicts its least
// recently used items past it. Items expire when looked up after their
// time, and a background sweep (stopped by Close) removes the others.
//
// Concurrency: every method is safe for many goroutines. A key's shard,
// found by hash, has its own mutex, index and LRU list; no lock spans
// shards, so Stats sums shards one at a time. Values returned by Get are
// shared, never modified by the store, and must not be modified.
package store
