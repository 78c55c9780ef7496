// Package proxy runs shardproxy's listeners and client sessions. It builds,
// from a validated config.Config, one pool per configured pool: a listener,
// a dialect (codec) and a route.Router. Which router a pool gets is its
// kind's business: each kind is a package that registers itself with
// package kind (a sharded pool: shard; a Redis Cluster: cluster; a Lua
// route file: lua), imported in one place (kinds.go); the session never
// asks which. It asks a router only for what some kinds offer through
// kind's interfaces (kind.Dedicator for dedicated connections,
// route.Watchable for watch).
//
// A client session has a reader goroutine: it parses requests with the
// pool's dialect, answers local commands, applies the pool's limits,
// hands every other request to the pool's router as a route.Exchange, sends
// the backend calls of one read together, and queues a pending slot per
// request. Replies leave in the order the client sent the requests, however
// the backends interleave: the goroutine that answers the oldest request
// (usually a backend's reader) writes every ready reply at the head in one
// non-blocking write; the session's writer goroutine takes over only when a
// write would block, for big replies written without copying, and on TLS
// (see writer).
//
// Reload builds every pool of the new configuration beside the running
// ones (each router takes its backends from a lease of the server's
// backend.Registry, so a server both configurations use keeps its sockets),
// swaps, and retires the old pools once nothing routes with them and every
// request they routed is written: then their routers close and the
// backends only they held drain and close. Every kind retires the same way.
//
// Under a fleet (Options.FleetRing, ring.go) the fleet drives the ring
// pools' distributions (SetRing: now, and in every later generation),
// hears of their servers' local health (WatchHealth, Health), and tells
// its own state for the stats (SetFleetState). The proxy never imports
// the fleet.
//
// Concurrency: Server's methods are safe for concurrent use. A session's
// parser and routing state belong to its reader; its queue of pending slots
// and the right to write are guarded by the writer's mutex.
package proxy
