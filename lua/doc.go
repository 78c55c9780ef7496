// Package lua routes a pool's requests with a route file written against
// the Lua API of memcached's built-in proxy, generation V1 (memcached
// 1.6.12 to 1.6.29: pools called as functions, mcp.await), generation V2
// (memcached 1.6.45: function generators, request contexts, routers) and
// memcached's routelib, on github.com/yuin/gopher-lua. Scripts written for
// memcached run unchanged, on memcached pools and, through the same
// objects, on Redis pools.
//
// The user manual (the pool keys, every mcp function and method, the
// sandbox and its bounds, what differs from memcached's proxy) is
// docs/lua.md at the repository's root. This comment is for the package's
// developers: what it owns, which goroutine may run Lua, and what it must
// not do.
//
// # What it owns
//
// A Router owns one route file: it compiles the file once, runs
// mcp_config_pools in a config state that it closes once the file has
// loaded, and runs mcp_config_routes in each of its worker states, each
// handed a copy of what mcp_config_pools returned. A failure at any stage
// is a *ConfigError naming the file and the line, and no router is built
// (on reload, the old one stays). The router owns the backends the file
// declares (taken from Config.Backends, so pools that name the same backend
// share it), the crons (rebuilt in worker 0's state, since the config state
// is gone), the rate limiters and the counters Stats lists.
// Config.Internal (the pool's own cache) and Config.Hub (the pool's log
// watchers) are the caller's and outlive a reload: the router only
// reaches them.
//
// The package is one subject in layers: the engine (workers, tasks,
// awaits, the guard, the states) runs handlers and their waits; the V1 API
// and the V2 API (function generators, request contexts, routers) sit on
// it, with the inspectors and mutators; the compatibility shims name what
// memcached has and shardproxy lacks; and the fast paths run, without
// entering Lua, the handlers that only forward a request (see Concurrency).
//
// Route code is bounded per run (Config.MaxRun, Config.MaxAlloc; at setup
// Config.SetupTimeout): a watchdog goroutine per router (engine_guard.go) cancels
// the context gopher-lua checks between two VM instructions. engine_guard.go has
// the measured cost and why memory is counted process-wide (neither Go nor
// gopher-lua counts it per state). A stopped run raised a Lua error at an
// instruction boundary, so the state stays consistent and is not rebuilt.
//
// # Concurrency
//
// A Router has Config.Workers Lua states (GOMAXPROCS by default, at most
// 16); a client (Route's hint) always uses the same one, as a memcached
// connection stays on its worker thread, so what a handler keeps in its
// state is consistent for the client. A state is used by one goroutine at
// a time, under a mutex, and has a goroutine of its own that runs the
// events queued for it. Route runs a request's handler on the calling
// goroutine (the session's reader) when the state is free and no request
// is queued for it, and runs nothing else there; otherwise it queues the
// request, so a client's requests start in order. A backend's reply is
// always queued: the goroutines that read and write backend sockets never
// run Lua, so a handler that runs long after its reply holds up neither
// the replies behind it on that socket nor other states' clients. (A call
// answered while its handler is still sending it, failed at once by a
// backend down or marked bad, or answered that fast, is taken by the
// goroutine sending it once the handler yields.) So a backend's Done never runs Lua, Route runs at most the
// caller's own request (its CPU time bounded by MaxRun), and neither
// waits for a lock or a channel. Each request runs in a coroutine (pooled and reused), which yields while
// it waits for backends, so a state has many requests in flight. A
// watchdog goroutine enforces MaxRun. Close stops the workers' goroutines
// and answers every request still queued or in flight.
//
// A handler that is exactly `return P(r)` or `return T.k(r)`, where P (or
// the field k of table T) is a pool the handler closes over, is recognised
// by its bytecode when attached and run without entering Lua: the request
// goes to the pool's backend and the reply to the client, from the
// backend's goroutine (it runs no Lua), with no coroutine and no request
// or response object. For memcache pools, while no Lua code has run in the
// state since such a request was routed and no request is queued for the
// state, the next one of the same command does not even take the state's
// lock. The
// upvalue is read again after any Lua code ran, so a script that changes
// it is followed; anything unusual (no key, a value that is not a pool, a
// changed __call) takes the Lua way. The client cannot tell the
// difference.
//
// Likewise a V2 handler that is exactly `return rctx:enqueue_and_wait(r,
// h)` (or `local res = rctx:enqueue_and_wait(r, h) return res`), where rctx
// is the request context its generator was given and h a handle (an
// upvalue or a number), is recognised by its bytecode and, for a request
// with one key, run without entering Lua: the request goes to the handle's
// pool and the reply to the client from the backend's goroutine, with no
// coroutine, request or response object, or copy of the request. At each
// request the context's own handler is checked again (its context, the
// context's enqueue_and_wait, the handle); anything else takes the Lua
// way. The context is free again at once rather than when the reply comes,
// which is what a handler in Lua gives when requests do not overlap. When
// the generator is attached to the command itself (not picked by a
// router), the lock-free way above serves the command's next requests
// too, until Lua code runs or a request context of the state is freed
// (the next request might take another context, whose handler differs).
//
// A request a direct handler (V1 or V2) sends on the session's goroutine
// joins the session's batch of the client's read (route.Exchange.Batch,
// through RouteBatch), so a pipelined read reaches each backend in one
// write; a request that runs in Lua, or is queued for the state, first
// flushes what the read staged, so it never overtakes the client's
// earlier requests.
//
// Ownership: the request handed to Route belongs to the router until it
// calls Completion.Complete; the handler's request object is then detached
// (using it later raises "request used after its reply was sent"). Calls
// that may outlive the handler (mcp.await) send a copy. Responses own
// their bytes.
//
// # What it must not do
//
// It imports codec, sharding and backend (and gopher-lua), never a dialect:
// the memcached semantics (command numbers, mcmc codes) are chosen by
// Config.Redis, not by a dialect's name. It does no I/O but through
// backend, and reads no file but the route file and, while it loads, what
// dofile, loadfile and require may read.
package lua
