// Package admin serves shardproxy's operator endpoints: twemproxy's stats
// port and an HTTP admin server. Both read a Source (a *proxy.Server) and
// never change the proxy themselves; a reload is a function the command
// hands in (HTTPConfig.Reload), so SIGHUP and POST /reload run the same code.
//
// # Stats port
//
// StatsServer speaks nutcracker's stats protocol (src/nc_stats.c): on every
// accepted TCP connection it writes the last aggregated snapshot as one JSON
// object and closes; what the client sends is ignored. Counters are
// re-aggregated every StatsConfig.Interval (nutcracker's -i); uptime and
// timestamp are taken at the accept, as nutcracker does. The bytes are
// nutcracker 0.5.0's: the same keys in the same order, the same separators
// (", " between fields, `"name": {` to open an object, "}," to close one, a
// final "}\n"), pools in twemproxy's order and servers by node name. The
// golden test checks this against a capture from the real nutcracker
// (testdata/nutcracker_stats.json).
//
// Choices, made so that existing twemproxy exporters and plugins work
// unchanged:
//   - "service" is "nutcracker", not "shardproxy": exporters and plugins key
//     on it. "version" is shardproxy's version.
//   - Extra fields appear only in server objects, after nutcracker's 13, and
//     are all integers: "ejects" (times marked bad), "state" (0 up, 1 failing:
//     has consecutive failures but still serves, 2 bad: ejected, failing
//     fast), "failures" (consecutive failures), "retry_at" (usec since the
//     epoch when a bad server is tried again, else 0; while it is probed,
//     when the next probe starts), "probing" (1 while a bad server waits
//     for a health probe to succeed), and the health checks' counters
//     "probes", "probe_failures", "restores", "idle_checks" and
//     "idle_replaced". A redis_cluster pool's
//     nodes add "moved", "ask", "tryagain" (those replies the node sent) and
//     the pool's "slot_map_refreshes", "slot_map_refresh_failures" and
//     "slot_map_age" (seconds, -1 before the first map), the same in every
//     node, having nowhere else to go. A ring pool under a fleet's servers
//     add "ring_version" (the pool's ring's, the same in every server) and
//     "ring_ejected" (1 while the ring takes the server out). Plugins convert every scalar with
//     int() (Diamond) or read numbers only (Telegraf), so a string would
//     break them.
//   - Counters never go backwards across reloads: a server's add up every
//     backend the pool has had under its name, and the pool's server_ejects
//     every server it has had (proxy.PoolStats). docs/operations.md's "The stats port
//     and twemproxy's" says where the counters mean something else than
//     nutcracker's (total_connections and curr_connections count client
//     connections only; client_err; fragments).
//   - Pool objects and the top level carry no extra fields: twemproxy
//     exporters treat every unknown top-level key as a pool and every unknown
//     pool key as a server (stuartnelson3/twemproxy_exporter unmarshals them
//     into server structs and fails the whole scrape on a number; the Sensu
//     plugin iterates them as hashes). Pool requests, protocol errors and
//     reloads are on /metrics instead.
//   - in_queue_bytes and out_queue_bytes are always 0: the backends count
//     queued requests, not their bytes.
//   - After writing, the server half-closes and drains the client's input for
//     up to a second before closing, so a client that sent something (curl)
//     reads the reply instead of a connection reset. nutcracker resets.
//   - Names are written as nutcracker writes them; only a name holding a
//     quote, a backslash, a control byte or invalid UTF-8 is escaped (where
//     nutcracker would write invalid JSON).
//
// # HTTP admin
//
// HTTPServer serves, on its own address (default loopback only):
//
//	GET  /metrics   Prometheus text (client_golang), read from Stats at scrape time
//	GET  /config    the running config as YAML, secrets redacted; source,
//	                checksum and load time in headers and leading comments
//	GET  /backends  JSON: every pool's backends with state, failures, retry time
//	GET  /version   JSON: version, Go version, start time
//	POST /reload    re-read the config file and reload; JSON result
//	POST /drain     start the drain SIGTERM starts (HTTPConfig.Drain); 202
//	GET  /ready     200 "ready", or 503 and why ("starting", "draining"): Source's Ready
//	GET  /live      200 "live" while the process serves
//	GET  /          the status page (HTML); GET /status/live is its live part
//	GET  /status    the status page's figures as JSON
//
// # Status page
//
// The page reads the same Stats as /metrics and the stats port, through
// the same helpers (backendErrors, poolErrors, state) and the pool's
// Latency, which keeps removed servers' counts. An
// HTTPServer samples them once a second while it listens (history.go): it
// keeps the last 11 samples whole, for rates and p50/p99 over the last 10
// seconds (quantiles estimated from the latency buckets as Prometheus's
// histogram_quantile does), and per pool and server a ring of 300 graph
// points (requests, errors and redirects per second); a series no sample
// has had for 300 samples is dropped, so memory follows the running
// configuration. A Handler served without an HTTPServer samples when the
// page is read instead.
//
// The page is rendered on the server by html/template (web/status.html),
// which escapes every name from the configuration for its context; it is
// complete without JavaScript, and reloads itself every 5 seconds then
// (noscript refresh). Its script (web/status.js) fetches GET /status/live
// every second and swaps that HTML in: short polling rather than
// server-sent events, because every admin reply closes its connection and
// has a write timeout, a moved or closed admin drains its requests in a
// few seconds (a stream would hold that up), and a poll needs no state on
// the server; the HTML part rather than JSON, so that one template renders
// both the first load and the updates. Style sheet and script are embedded
// (embed.FS); a Content-Security-Policy allows nothing else.
//
// When the running config sets admin_token, every endpoint but the probes
// (/ready, /live: probers carry no token, and they tell nothing but the
// state) wants "Authorization: Bearer <token>" and answers 401 without it. The token is
// read from the running config at each request, so a reload changes it.
// Every reply closes its connection (no keep-alive): a request never
// meets a connection the server is closing for idleness, which would
// reset it unanswered.
//
// Concurrency: every exported method is safe for concurrent use. Listen may
// be called again to move a server to another address: the new address is
// bound first, and if that fails the old one keeps serving. Close stops
// everything the server started.
package admin
