// Package combine is the route pool kind: a pool with a route key, which
// has no servers of its own and answers through the routers of the pools
// its route names. It builds routers of routers: a migration between two
// pools in phases and a warm-up (migrate.go, migrate_write.go,
// migrate_warm.go, with the fill guard of guard.go), a shadow
// (shadow.go) and a failover pool (failover.go), stacked as the route
// says (kind.go). The user's manual is docs/migrations.md.
//
// # What it owns
//
// A route pool's router (top) owns its parts and their counters; it owns
// none of the routers it sends to: they are the named pools', built in
// the same generation and given by kind.Env.Link, and it never closes
// them nor shows their stats (borrowed). What it sends goes through
// route.Sub: a copy of the client's request (or one it writes: a delete,
// a fetch, a fill) routed through a pool's router as a client's would be,
// whose answer comes back to a function instead of a session. The client
// is answered with Exchange.Complete and the bytes of the answer that
// decides (AppendReply of a Sub), or routed through a pool's router
// unchanged when one pool alone answers and nothing is inspected (reads
// of a migration, the primary of a shadow).
//
// A migration's fill guard (guard.go) is handed from router to router
// across reloads that keep the route's two pools, so writes in flight
// through the old router still stop fills of the new one.
//
// # Concurrency
//
// Route runs on the session's reader and never blocks: every Sub is sent
// (staged in the client's batch when sent from Route, else at once) and
// answered later, on the goroutine of the backend that answers it, or on
// the caller's when the router answers at once (a backend marked bad).
// The follow-ups (a fallback read, a fill, the delete after a failed
// set, the failover request) are sent from that goroutine; none waits.
// A request's pieces are joined with an atomic count (writeOp, getOp);
// the guard's stripes are the only locks, held for a few instructions
// and the staging of one fill.
//
// It must not add work for requests a route does not look at: a route
// pool is a pool of its own, and the pools it names serve their own
// clients unchanged.
package combine
