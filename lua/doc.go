// Package lua routes a pool's requests with a route file written against
// the Lua API of memcached's built-in proxy, generation V1 (memcached
// 1.6.12 to 1.6.29: pools called as functions, mcp.await) and the core of
// generation V2 (function generators, request contexts, routers; see
// "V2"), on
// github.com/yuin/gopher-lua. Scripts written for memcached run unchanged,
// on memcached pools and, through the same objects, on Redis pools.
//
// # Configuration
//
// A pool of the YAML configuration names its route file with the key lua
// (instead of servers); its listen address, protocol (redis: true) and
// limits still apply. The file is compiled once. It runs in a config state,
// where mcp_config_pools() builds backends (mcp.backend) and pools
// (mcp.pool), and then in each worker state, where mcp_config_routes(pools)
// receives a copy of what mcp_config_pools returned (tables, strings,
// numbers, booleans; each pool becomes a callable pool proxy) and attaches
// handlers with mcp.attach. A syntax error, a missing function, an error
// raised at either stage (an unknown option, an argument of the wrong
// type), or a route stage that attaches nothing is a *ConfigError naming
// the file and the line, and the proxy does not start (or, on reload, keeps
// the old configuration).
//
// A call of what memcached's proxy has and shardproxy lacks (rctx:tls_peer_cn)
// or of what the sandbox removes (os.execute; and, while the file loads,
// io) raises an error naming it as written, at the line of the call:
// "rctx:tls_peer_cn is not supported by shardproxy yet", "io is not available
// in shardproxy route files". While the file loads, a config file of memcached's routelib
// loaded as the route file itself gets "pools belongs to memcached's
// routelib: give the pool lua: ROUTELIB.lua ... and lua_arg: THIS_FILE"
// (see "routelib") and an undefined global "attempt to call a nil value
// (global 'NAME')"; a name of mcp that memcached lacks too is "mcp.NAME
// does not exist". Reading such a name still gives nil, so a file that
// tests `if os.execute then` takes its other branch; a constant read as
// a value (mcp.MCMC_CODE_MISS) is nil and fails only where it is used,
// with that function's own error. (The mcp, os and method tables,
// and the globals while the file loads, get an __index metamethod that
// notes absent names read, and nil a metatable whose __call and __index
// name the one read on the caller's line; reads of present names never
// reach them.)
//
// dofile(path), loadfile(path) and require(name) load other Lua files
// while the file loads (its top level, mcp_config_pools,
// mcp_config_routes; not in a handler or a cron): the files in the route
// file's directory and below, and the file lua_arg names
// (Config.StartArgFile; the exact text of mcp.start_arg names it), nowhere
// else; a path that leads out, by ".." or a symbolic link, is refused
// naming the directory. A relative path is relative to the route file's
// directory (memcached's, to its working directory). require resolves
// a.b as a/b.lua, then a/b/init.lua, runs a module once per Lua state and
// returns what it returned (true for nothing). Each file is read and
// compiled once per router.
//
// Config stage: mcp.backend(label, host, port) (an empty label is
// accepted, as memcached does; shardproxy's logs and ketama then name the
// backend by its address) and the table form with
// label, host, port, connecttimeout, retrytimeout (retrywaittime),
// readtimeout (seconds, fractions allowed), failurelimit, tcpkeepalive,
// connections (1-8), down and, a shardproxy addition, weight (for the
// twemproxy distributions); memcached's other options (depthlimit,
// flaptime, tls, log, ...) are accepted and ignored with a warning, an
// unknown option is an error. mcp.pool(backends, {dist=, hash=, seed=,
// filter="stop"|"tags", filter_conf=, beprefix=, iothread=, omode=,
// obuckets=}). mcp.backend_connect_timeout, backend_retry_timeout
// (backend_retry_waittime), backend_read_timeout, backend_failure_limit,
// tcp_keepalive set the defaults of the backends made after them, as in
// memcached; active_req_limit(n) and buffer_memory_limit(kb) bound the
// requests in flight through the router; add_stat(id, name) and
// stat_limit(n) declare counters (they show in the pool's stats and
// "stats proxy" as user_NAME); ratelim_global_tbf and server_stats (see
// "Rate limits and server stats"); the remaining tunables of later
// memcached versions are accepted and ignored. The route stage has the
// tunables (and mcp.register_cron) too, as no-ops, so a file may set them
// at its top level, which runs in every state.
//
// mcp.start_arg is Config.StartArg (the pool's YAML lua_arg, memcached's
// proxy_arg) in every stage: false when unset, the string, or, when it
// contains ':', a table of its items ("a:b_2:c_x_y" is {a = true, b = "2",
// c = "x"}).
//
// mcp.register_cron(name, {every = seconds, func = f[, rerun = false]}),
// at config time (mcp_config_pools or the top level), calls f with no
// arguments every `every` whole seconds (the first time `every` seconds
// after the router starts), or once with rerun = false; a later cron of
// the same name replaces the earlier one. A missing func or every, or
// every below 1, is a load error. memcached runs crons in its config
// state; shardproxy closes that state once the file has loaded, so f is
// rebuilt in worker 0's state from its compiled code and runs there as an
// event of that worker's queue, never beside its handlers and bounded by
// MaxRun: it reads and sets worker 0's globals (what its handlers see), and
// the locals of enclosing functions it uses are copies made at load time,
// as mcp_config_routes's argument is (a local holding a function is a load
// error; a pool becomes a pool proxy, though f cannot wait for a backend).
// An error in f is logged once per distinct message. Close stops the crons
// first.
//
// Every backend a memcache pool's file declares (even one of a pool no
// handler uses) is dialled and validated ("version\r\n", answered
// VERSION) when the router starts, before any request, as memcached's
// proxy does; one that fails is logged and dialled again every retry
// timeout until it is up or marked bad. Config.Preconnect says so (the
// pool's YAML preconnect: false turns it off). Clients of a memcache Lua
// pool get memcached proxy's words for malformed requests (see
// codec.Options.ProxyErrors).
//
// Backend defaults are memcached's (connect 5s, retry 3s, read 3s, failure
// limit 3, one connection) unless the pool's YAML sets timeout,
// connect_timeout, server_retry_timeout, server_failure_limit,
// server_connections or tcpkeepalive (see Config.Defaults); pools that name
// the same backend (label, address and settings) share its connections.
//
// Placement is package sharding's, with memcached's defaults: jump hash
// over XXH3-64 of the key, seeded with XXH3 of the pool's seed string, over
// the backends in the order given. mcp.dist_ring_hash is memcached's ring
// (omode "default", "ketama", "twemproxy", "evcache"; obuckets points;
// hash = mcp.dist_ring_hash.hash for md5); mcp.dist_ketama, mcp.dist_modula
// and mcp.dist_random are twemproxy's, over the backends' labels as node
// names (so labels written as twemproxy names - "host:port", "host" for
// port 11211, or an explicit name - with hash = mcp.hash_fnv1a_64 place
// keys exactly as a native YAML pool of the same servers). Hashes:
// mcp.hash_xxhash (memcached's, XXH3), and mcp.hash_NAME for every hash of
// package sharding (hash_md5, hash_fnv1a_64, hash_murmur, hash_crc32, ...;
// sharding's XXH64 is hash_xxh64). The "stop" filter hashes the key up to
// filter_conf; "tags" hashes what lies between filter_conf's two
// characters (memcached searches the closing tag from the opening one
// itself; here from the byte after it, which only differs for equal tags).
//
// # Handlers
//
// mcp.attach(cmd, func[, tag]) attaches a handler for mcp.CMD_* (numbered
// as memcached numbers them), CMD_ANY (every command but mn) or
// CMD_ANY_STORAGE (every key command); a later attach overrides what an
// earlier one set, command by command. A handler attached with a tag
// (1-8 characters) serves the router whose Config.Tag matches and takes
// precedence over the untagged one. A command without a handler is
// answered from the proxy's own cache (Config.Internal), as memcached
// answers it from its storage, and a route file may attach nothing; without
// a cache (Redis) it is answered "SERVER_ERROR no route for command NAME",
// and a route file must attach something. Commands the proxy
// answers itself (version, stats, mn, quit, verbosity; Redis PING, ECHO,
// AUTH, ...) never reach a handler.
//
// A handler receives the request and returns what the client sees: a
// response object (its reply as the backend sent it, or, when there was
// none, memcached proxy's "SERVER_ERROR backend failure" whatever the
// cause, which goes to the log and the backend's stats; on a Redis pool
// "-ERR backend failure: CAUSE"), a string (sent raw), or anything else
// ("SERVER_ERROR bad response"). An error raised by the
// handler answers "SERVER_ERROR lua failure" and is logged once per
// distinct message, with the script's file and line. A noreply request
// shows the client nothing, whatever the handler returned.
//
// Like memcached's proxy, a multi-key get (and a Redis command split per
// key, such as MGET or DEL) runs the handler once per key, and the answers
// are merged in the client's key order. On a memcache pool each key's
// answer takes its place, as in memcached's proxy: a hit's VALUE block,
// nothing for a miss, "SERVER_ERROR ..." for a failed backend or handler,
// a handler's string as it is (less a final "END"), "CLIENT_ERROR key too
// long" for a key over the limit (which reaches no handler), then one
// END; a line whose first key starts past its 20th byte is answered
// "CLIENT_ERROR malformed request". (A Redis pool's command fails as a
// whole when a key fails.)
//
// pool(r) sends r to the backend owning its key, waits and returns the
// response; a request without a key raises "cannot route commands without
// key" (a Redis command whose answer does not depend on keys goes to any
// backend). mcp.await(r, pools[, wait_for[, mode]]) sends r to every pool
// and returns a table of responses in arrival order, with memcached's
// exact semantics (mcplib_await_return): wait_for 0 (the default) means
// all pools and is capped at their number; AWAIT_GOOD (the default) counts
// responses that are ok and not a miss (code other than END), AWAIT_ANY
// every response, AWAIT_OK ok ones (misses too), AWAIT_FIRST only the first
// pool's (and returns only it), AWAIT_FASTGOOD returns at the first hit or
// after wait_for ok misses, AWAIT_BACKGROUND returns an empty table at once
// and drops the responses; responses that arrive after the table was
// returned are not added to it. mcp.await_logerrors also logs every error
// response with a detail string. A request sent by mcp.await is copied, so
// it may outlive the handler (AWAIT_BACKGROUND, AWAIT_FIRST).
//
// mcp.request(line[, value]) parses a request with the pool's dialect
// (value: a string ending in "\r\n", or a response or request whose value
// is copied). Request methods: command() (the CMD_* number; on a Redis pool
// the lower-case name), key() (the key token as sent; on Redis the first
// key), ltrimkey(n), rtrimkey(n), token(n[, new]) (token 1 is the command;
// "" removes a token; the command cannot be replaced), ntokens(),
// has_flag(f), flag_token(f[, new]) (returns whether the flag is there and
// its token; new replaces the flag's whole token, "" removes it) and
// tostring(r); and memcached V2's: raw_line() (the request line without
// its line end), raw_value() (the value block with its "\r\n", or nil),
// token_int(n) (token n as an integer; nil for the command, a token that
// is not one, or out of range), flag_token_int(f) (false when f is absent,
// has no token or one longer than 22 bytes; true and the integer; true
// alone when it is not an integer), flag_add(f[, tok]) (adds f at the end
// of the line unless it is there), flag_set(f[, tok]) (replaces f's token
// in place, or adds it), flag_replace(f, g[, tok]) (puts flag g where f
// was, or adds it), flag_del(f) (each returns whether it changed the
// request; tok is a string or a number) and match_res(res) (true, nil when
// res's k flag matches the key and its O flag r's opaque; false and the
// reason on a mismatch; false, nil when there was nothing to compare). The
// flag edits keep the other bytes of the line as they were; a text
// request has no flags, so flag_add and flag_set append the token to it,
// as memcached does.
// A rewrite re-parses the request, so keys and routing follow
// it. ltrimkey and rtrimkey return n and, as memcached's proxy does, turn
// the trimmed bytes into spaces on the wire ("mg abcdef v" with
// ltrimkey(3) goes as "mg    def v"); n may be the whole key, more raises
// "ltrimkey cannot zero out key".
//
// Quiet and noreply requests of a memcache pool go to the backend as
// memcached's proxy sends them (codec.Options.ProxyWire): the "q" flag
// overwritten by a space and no "mn" after it; "noreply" as "noreplY"
// (but for delete, which memcached refuses so and whose noreply is
// removed). The backend always answers; the client sees what the flag
// asks (the answer to noreply never; of a quiet request, what memcached's
// proxy shows: not EN, and not HD for other commands than mg). The handler
// sees the request as the client sent it (has_flag("q") is true, ntokens
// counts "noreply") and the backend's real answer. Response methods: ok(), hit(), vlen(), code() (mcp.MCMC_CODE_*
// as memcached's mcmc classifies the reply; MCMC_CODE_SERVER_ERROR when
// the backend failed), line() (as mcmc gives it: a meta reply's text
// after its code and one space, after the size for VA, so flags blanked
// with spaces keep them; nil when nothing follows the code, so a bare HD
// has none; a VALUE reply's key; nil for every other reply and a
// failure), elapsed() (microseconds from sending to the reply),
// raw_string() (the reply as received, value included; nil for none),
// flag_blank(f) (overwrites a meta reply's flag f and its token with
// spaces, which the client then sees; returns whether it found it) and
// close() (drops the reply's bytes: raw_string is nil, code 0, and
// returning it sends the client nothing, as in memcached).
// mcp.MCMC_CODE_MISS, the miss code of memcached 1.6.12 to 1.6.17 (later
// versions have none), is END's value, since a miss is END here.
// mcp.time_real_millis()
// (epoch milliseconds) and mcp.time_mono_millis() (milliseconds since the
// process started, on the monotonic clock) return whole numbers, in the
// route stage only: at config time they are nil, as in memcached.
//
// mcp.log(msg), mcp.log_req(r, res, detail[, cfd]) and
// mcp.log_reqsample(ms, rate, allerrors, r, res, detail[, cfd]) write to
// the proxy's log; print does too. A client of a memcache pool may also
// follow them as memcached's proxy lets it: "watch proxyuser" (mcp.log),
// "watch proxyreqs" (log_req, log_reqsample), "watch proxyevents" (a
// handler's error, a failed backend call), any combination, answered
// "OK", after which the connection reads no more requests and gets lines
// in memcached 1.6.45's format ("ts=SEC.USEC gid=N type=proxy_user
// msg=...", "type=proxy_req elapsed= type= code= status= res=good|ok|any
// cfd= be=host:port detail= req=...", "type=proxy_error msg=...",
// "type=proxy_backend error=CAUSE name= port= label= depth=0 rbuf="),
// each ending in "\n". memcached's other stream names (fetchers,
// mutations, ...) are accepted and stream nothing; an unknown one is
// "ERROR". Each watcher has a 256 KiB buffer (at most 20 watchers,
// "SERVER_ERROR route: log watcher limit reached" past that): a watcher
// whose client reads too slowly loses lines, counted on a "skipped=N"
// line before the next one it gets, and never holds the proxy up. The
// watchers are the pool's: a reload keeps them. (memcached's proxy logs a
// backend's failure once per broken connection, and a backend marked bad;
// shardproxy logs each failed call but those failed at once while the
// backend is marked bad.) mcp.stat(id,
// delta) adds to a counter of mcp.add_stat; Router.Stats lists them.
//
// # V2: function generators (memcached 1.6.45's API)
//
// The V2 API of memcached's proxy runs beside V1, in the same states, and
// a file may use both. mcp.funcgen_new() makes a function generator;
// fgen:new_handle(pool) adds a handle (a number, from 0) and
// fgen:ready({f = generator, a = arg, n = name, u = count}) makes it
// attachable: generator(rctx, arg) must return the handler function(r)
// (ready calls it once, so a broken generator fails the route stage; a is
// the argument, u the number of objects rctx:request_new may make, as in
// memcached). mcp.attach(cmd, fgen[, tag]) attaches it. Each request takes
// a request context (rctx) from its generator's free list, a new one (and
// a new call to the generator) when the list is empty, and runs the
// context's handler in a coroutine like a V1 handler; a context serves one
// request at a time and returns to the list once its handler has finished
// and every call it sent has come back, so a handler's upvalues are its
// context's own. A generator that fails at that point answers the request
// "SERVER_ERROR lua start failure".
//
// rctx:enqueue(r, h | {h, ...}) queues r to handles without sending (a
// handle already used by this request is left alone);
// rctx:enqueue_and_wait(r, h[, timeout]) queues, sends everything queued
// and returns h's response; rctx:wait_handle(h[, timeout]) waits for a
// handle already queued or sent; rctx:wait_cond(n[, mode[, timeout]])
// sends everything queued and waits until n handles satisfy mode
// (mcp.WAIT_ANY, the default: any answer; WAIT_OK: not an error;
// WAIT_GOOD: not an error and not a miss; WAIT_FASTGOOD: counts like
// WAIT_OK and returns at the first good one) and returns how many did;
// n = 0 sends and returns 0. A wait also returns when no call is left in
// flight; with a timeout (seconds), it returns at the timeout with the
// count (nil for a handle) and true; the calls are not cancelled.
// rctx:sleep(seconds). rctx:res_good(h), res_ok(h), res_any(h) return h's
// response if it is good, good or ok, or any; rctx:result(h) returns it and
// its flag (mcp.RES_GOOD 8, RES_OK 16, RES_ANY 32 for an error or no
// answer), nil, nil before it is answered; best_result and worst_result
// pick from a table of handles. A request is copied once for the calls
// (they may outlive the handler).
//
// mcp.router_new({map = {prefix = fgen | {[mcp.CMD_X] = fgen}}, cmap =
// {[mcp.CMD_X] = fgen}, mode = "prefix" | "anchor", start =, stop =,
// default = fgen}) picks a generator by the key: in prefix mode (stop "/"
// by default) the part before the first stop, in anchor mode the part
// between a leading start and the next stop ("/" and "/" by default); then
// by command in a map entry that is a table (CMD_ANY_STORAGE as its
// default). No match falls back to cmap, then default; without either the
// request is answered "SERVER_ERROR lua start failure". start and stop are
// read only when mode is given, as in memcached.
//
// rctx:request_new() and rctx:response_new() make an empty request (no
// command, no key: it cannot be queued until a mutator fills it) and an
// empty response (ok() true, code 0, nothing for the client) that belong
// to the context for its life: a context may make u (fgen:ready's) of
// them, usually in the generator, and past that, or without u, the call
// raises "rctx request new: object count limit reached". A request's
// value and a response's reply are dropped when the context finishes a
// request, so the objects are reused by the context's next request.
//
// Inspectors and mutators (mcp.req_inspector_new, res_inspector_new,
// req_mutator_new, res_mutator_new, route stage only) take a list of step
// tables ({t = "keyis", str = "a"}, ...), checked and compiled when made;
// an unknown step, a step of the other kind or a missing argument is an
// error naming the step's position ("mutator step 2: must provide 'idx'
// argument", memcached's wording; memcached calls an unknown step
// incompatible, here it is "unknown step type 'NAME'"). ins(obj) returns
// its steps' values in order: sepkey (sep "/" and pos 1 by default: the
// pos-th part of the key, empty parts counted, or map[part] with a map;
// nil for an empty or missing part), keybegin and keyis (str), hasflag
// (flag; raises "inspector error: response is not meta protocol" for a
// reply that is not a meta reply), flagtoken, flagint and flagis (flag,
// str: whether the flag is there, then its token, its integer or whether
// it equals str; false, nil when absent). mut(obj, args...) rewrites obj,
// a request (request_new's, or any other without a value) or a response
// (response_new's, empty), from steps that each write one token, joined
// by single spaces: cmdset (cmd), keyset (val), rescodeset (val), reserr
// (code "error" | "server" | "client", msg), flagset (flag[, val]) write
// constants; cmdcopy, keycopy, rescodecopy, flagcopy (flag), flagcopyall,
// valcopy and resnull copy from argument idx (1 is the first after obj):
// a string as it is (flagcopy: the flag and the string; valcopy: a value
// ending in "\r\n", whose length is written and which is attached), a
// request's command (with the space after it, as memcached copies it),
// key, flag and token or value, a meta reply's code, flag or flags, or,
// for resnull, the reply a request's command gives for a missing item
// (EN, NS, NF, END, NOT_STORED, NOT_FOUND). flagcopy of nil, false or of a
// request or reply without the flag writes nothing. The call returns
// nothing, or false when a source is missing or of the wrong kind (obj is
// left unchanged); a result that does not parse raises "mutator: failed to
// parse new request" (or result), and rewriting a request that has a value
// or a response that has a reply raises "... has already been rendered".
// The steps and their behaviour are memcached 1.6.45's, observed on it;
// where memcached crashes (an inspector on an empty response, raw_line of
// an empty request) shardproxy answers as for a reply without flags or an
// empty line.
//
// A generator may be a handle of another: fgen:new_handle(child), where
// child is ready before the parent's ready (so a generator is never its
// own handle). A request queued to it runs the child's handler, in a
// request context from the child's free list and a coroutine of its own,
// once the parent's handler yields or returns; it gets its own request
// object over a copy of the request, and may outlive the parent's
// handler. Its result is the handle's response, as memcached 1.6.45 makes
// it: a response is classified and waited for like a pool's; a string is
// the result as it is, flagged RES_ANY (res_any and result give the
// string; returned, it is sent raw); anything else, or an error (logged),
// gives an error response (ok() false; "SERVER_ERROR backend failure" if
// the parent returns it). Its backend calls count towards the request's
// limit.
//
// rctx:handle_set_cb(h, func) sets a callback on handle h of that
// context, for every request it serves: func(res, req) runs when h's
// response comes back, before a wait counts it; returning mcp.WAIT_GOOD
// or mcp.WAIT_OK makes the result RES_GOOD or RES_OK, and a true second
// value (mcp.WAIT_RESUME) ends the current wait at once. It cannot wait;
// an error in it is logged and ignored. A child's string result runs no
// callback.
//
// fgen:new_handle(mcp.internal_handler) is a handle to the proxy's own
// cache (see "The proxy's own cache"). Not supported yet: rctx:tls_peer_cn (shardproxy asks clients for no certificate);
// rctx:cfd() gives the number shardproxy keeps for the client
// connection, the same for all its requests. Where memcached fails each request, a generator attached
// before ready, or a router or unready generator given to a router, is
// refused at load time instead.
//
// # The proxy's own cache
//
// A memcache pool's Config.Internal (the pool's lua_internal_cache, 64 MiB
// by default, memcached's -m) is what memcached's storage is to its proxy:
// mcp.internal(r) (a handler's V1 call) returns r's answer from it at once
// as a response object; fgen:new_handle(mcp.internal_handler) makes a
// handle whose requests it answers (enqueue, enqueue_and_wait, wait_cond
// as for a pool); and it serves every command no handler is attached for.
// It answers as memcached 1.6 does, byte for byte but for cas uniques
// (package store). Its items outlive a reload that keeps the size. On a
// Redis pool both raise "the pool has no internal cache".
//
// # Rate limits and server stats
//
// mcp.ratelim_tbf({limit =, fillrate =, tickrate =}) (route stage) makes
// a token bucket of the worker state that makes it; mcp.ratelim_global_tbf
// (config stage) one shared by every worker, passed to mcp_config_routes
// in what mcp_config_pools returns (or to a cron) and safe across them.
// lim(n) takes n tokens and returns true when the bucket held more than n
// (memcached's strict comparison: a full bucket of limit tokens grants
// limit-1 takes of 1), else false, taking nothing; n is required, 0 is
// true while the bucket is not empty, a negative n false. The bucket
// starts full and gains fillrate tokens (0 reads as 1) per whole tickrate
// milliseconds (0 reads as 1) of wall clock, up to limit. Options are
// whole numbers from 0 to 2^32-2; a missing one is 0.
//
// mcp.server_stats([section]) (config stage, and crons) returns a table
// of strings: with no section pid, uptime, time, pointer_size, threads and
// the router's lua_* counters; "settings" num_threads, lua_max_run_ms,
// lua_queue; "proxy" the router's counters and user_NAME counters;
// memcached's storage and connection sections an empty table; another
// section raises "unknown subcommand passed to server_stats". In a
// handler it raises an error (memcached's route stage lacks it).
//
// # routelib
//
// memcached's route library runs unchanged: give a pool lua: the path of
// routelib.lua and lua_arg: the routelib configuration (pools{},
// routes{}, route_direct{}, ...), which routelib loads with
// dofile(mcp.start_arg). routelib.lua is not part of shardproxy; a user
// has it from memcached: in memcached's source it is
// vendor/routelib/routelib.lua (vendor/fetch.sh fetches it; memcached
// 1.6.45 also builds it into its binary as proxy_config=routelib), and
// the memcached-proxylibs repository (github.com/memcached/memcached-proxylibs)
// keeps it as lib/routelib/routelib.lua. Every route constructor it
// registers works as under memcached (route_allasync is defined but not
// registered by routelib, so no configuration reaches it); a child named
// "internal" is the proxy's own cache; local_zone_from_env and local_zone_from_file, which read the
// environment and files, fail. Its tests run when
// SHARDPROXY_ROUTELIB names a routelib.lua (make test ROUTELIB=PATH).
//
// # Redis pools
//
// On a pool with redis: true the same objects work on RESP: mcp.CMD_NAME is
// the lower-case command name (mcp.CMD_GET == "get", mcp.CMD_HGETALL ==
// "hgetall", for the common commands listed in constants.go), and any
// command can be attached by its name as a string; CMD_ANY_STORAGE covers
// every command with a key. r:command() is the lower-case name, r:key() the
// first key, r:token(n) the n-th argument (1 is the command). A response's
// hit() is false for a nil reply (code MCMC_CODE_END), ok() false for an
// error reply (MCMC_CODE_ERROR; -LOADING, -BUSY, -OOM are
// MCMC_CODE_SERVER_ERROR), line() is the reply's first line, vlen() a bulk
// string's length. has_flag and flag_token find no flags. raw_line() is
// the request as sent (without its final "\r\n"), raw_value() nil,
// token_int(n) the n-th argument as an integer. What is about meta flags
// has no meaning for RESP and raises an error naming it: flag_add,
// flag_set, flag_replace, flag_del, match_res and res:flag_blank ("flag_add:
// meta flags have no meaning for a Redis request"), the flag steps of an
// inspector or a mutator and a mutator's valcopy (refused when made), and
// res_inspector_new and res_mutator_new (RESP replies have no meta codes or
// flags: a handler returns a RESP string instead). A request mutator's
// tokens are the command's arguments (cmdset, cmdcopy, keyset, keycopy
// build a RESP array), and inspectors' key steps read the first key.
//
// # Sandbox
//
// Route code gets the base library without module and a collectgarbage
// that stops the world (it is a no-op; dofile, loadfile and require only
// load the files named above, while the file loads), and the
// string (string.rep bounded to 16 MiB, no string.dump), table and math
// libraries and os.time, os.clock, os.date and os.difftime: no io, no
// os.execute, no debug, no package, no coroutine. Lua 5.4's local
// attributes (<const>, <close>), table.unpack and load of a string, which
// memcached's scripts use, are accepted. gopher-lua is Lua 5.1: integer
// division, bitwise operators and the utf8 library are not there.
//
// Route code is bounded per run: a handler from its start, or the resume
// after a wait, to its next wait or its end; one call of a function
// generator; one cron; one stage of the setup. A run longer than
// Config.MaxRun (the pool's lua_timeout, 100ms) is stopped and answered
// "SERVER_ERROR lua timeout"; a run during which the process's heap grew
// by more than Config.MaxAlloc (lua_max_alloc, 256 MiB) is stopped and
// answered "SERVER_ERROR lua memory limit" (a function generator stopped
// so answers the same; a cron is logged). Either is logged once per
// distinct message with the reason, the file and the line the run was at.
// At setup the time bound is Config.SetupTimeout (10s), and either bound
// refuses the file: "routes.lua:2: mcp_config_pools: ran longer than 10s".
// Both bounds end by cancelling the context gopher-lua checks between two
// VM instructions; the watchdog goroutine decides, every tick of at most
// 10ms, for the runs it has seen span a tick, so a handler that returns
// in microseconds costs two atomic stores and the check (guard.go has the
// measured cost and why memory is counted process-wide: neither Go nor
// gopher-lua counts it per state). A string grown by `..` is made in one
// instruction, so a run that doubles one stops after the concatenation in
// progress, holding a few times the budget for a moment. string.rep is
// bounded to 16 MiB a call. What a run keeps in its state's globals stays
// there after it is stopped: a handler that adds to a global table on
// every request grows the state without bound, as in memcached.
//
// A stopped run raised a Lua error at an instruction boundary, as error()
// would there: the state is consistent (what the handler changed before
// stays changed, as after any error) and goes on serving; only the
// stopped coroutine is dropped. So the state is not rebuilt. A handler
// that returns anything but a response or a string (nil, a number, a
// table, a boolean) is answered "SERVER_ERROR bad response", a raised
// error "SERVER_ERROR lua failure", as memcached's proxy does. A request
// may make at most 1024 backend calls.
// pool(r) and mcp.await (but for AWAIT_BACKGROUND) cannot wait inside
// pcall, xpcall, table.sort or string.gsub, which gopher-lua cannot
// suspend: they raise an error there. Waiting inside a metamethod cannot be
// caught beforehand; gopher-lua panics, and the request is answered "lua
// failure" once its backend call has returned.
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
