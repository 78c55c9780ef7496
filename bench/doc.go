// Command bench is the harness behind `make bench`: it measures shardproxy
// side by side with twemproxy (nutcracker) and with the backends alone, and
// writes the report in bench/report/.
//
// It starts 4 memcached and 4 redis-server on free loopback ports, then for
// each load a fresh shardproxy and a fresh nutcracker from one twemproxy
// YAML (shardproxy's memcache pools add server_protocol: meta, except in
// the memcache-p1-text load, and shardproxy runs with -threads 1, except in
// the memcache-p1-threads load), and runs cmd/shardbench (a separate process, so that a proxy's CPU
// time is its own) against direct (the first backend alone), shardproxy
// and nutcracker in rounds whose order rotates. Each load's table gives the
// median of the rounds: requests per second, the ratio to direct,
// p50/p99/p99.9 latency, the proxy's and the backends' CPU time per request
// (utime+stime from /proc/PID/stat), the proxy's peak RSS (VmHWM), and the
// CPU that other processes on the machine used meanwhile. It also measures
// the RSS per idle client connection (10,000 by default; it raises
// RLIMIT_NOFILE for itself and its children), runs scaling series (client
// connections, backend servers, value size) drawn as PNG plots with
// gonum.org/v1/plot, cross-checks shardbench against redis-benchmark, and
// checks issue 8's goals against the figures.
//
// The lua-v2 loads measure a V2 Lua route (one function generator whose
// handler sends every key command with enqueue_and_wait to one pool of one
// memcached; the harness writes the file for the backend's port) against
// one memcached: shardproxy with a Lua pool running it (shardproxy-v2, and
// shardproxy-v2-meta with server_protocol meta: the gets the route
// forwards untouched go as mg),
// shardproxy's native pool of the same memcached (with server_protocol meta,
// and as shardproxy-text with text, which sends what a Lua pool sends),
// and, when -memcached-proxy
// names a memcached built with its proxy, memcached's proxy running the same
// file with -t 1 (one worker thread, as shardproxy runs one thread and so
// one Lua state); without it those rows are absent and the table says so.
// They check issue 25's speed goals.
//
// The goal loads (memcache p1/p16, 1 KB, 100 KB, 1,000 connections, Redis
// p1/p16, the V2 route, and the fixed-rate loads) run under a second,
// independent generator too, memtier_benchmark (-memtier; make bench builds
// 2.3.0 from its public source when none is on PATH), in the same rounds as
// shardbench, the generators' order alternating from round to round
// (memtier.go). A second table per load shows both generators' medians side
// by side and flags each figure on which they are more than 15% apart.
//
// The fixed-rate loads (memcache-p1-half, redis-p1-half, lua-v2-p1-half)
// run the same targets at half of nutcracker's peak in the same run (or
// -fixed-rate), rounded to whole requests per second per connection as
// memtier's --rate-limiting takes them, and report CPU per request and
// p50/p99/p99.9 by both generators.
//
// The scaling series vary client connections (10 to 10,000), memcached
// servers behind the pool (1 to 100, each a process of its own), pipeline
// depth (1 to 64) and value size, and draw throughput, CPU per request and
// the proxy's peak RSS against each.
//
// The memcache-near load runs shardproxy's native pool over the 4
// memcached with and without a near cache (shardproxy-near: near_cache 64,
// the default near_cache_ttl and fill) under zipf keys (YCSB's theta 0.99)
// and 1:9 set:get, beside the first server alone (direct).
//
// With -baseline naming another shardproxy binary (an earlier build), a
// row shardproxy-baseline runs right after shardproxy in every load that
// has it, with the same options, and the goals table judges the
// saturation loads by shardproxy's req/s over the baseline's, by each
// generator: a change told from the host's drift in the same rounds.
//
// Run it from the repository root after building bin/shardproxy and
// bin/shardbench, which `make bench` does:
//
//	make bench                                # about 40 minutes on 2 cores
//	BENCH_QUICK=1 make bench                  # a few minutes; report in a temporary directory
//	make bench BENCH_ARGS='-memtier off'      # shardbench only
//	make bench BENCH_ARGS='-only loads -loads memcache-p1-half,redis-p1-half -fixed-rate 25000'
//	make bench BENCH_ARGS='-rounds 7 -duration 10s'
//	make bench BENCH_ARGS='-only crosscheck'
//	make bench BENCH_ARGS='-only loads -loads redis-p16 -baseline /tmp/shardproxy-old'
//	make bench MEMCACHED_PROXY=/path/to/memcached BENCH_ARGS='-only loads -loads lua-v2-p1,lua-v2-p16'
//
// The harness imports no shardproxy package: it drives the binaries as an
// operator would. It is a module of its own (bench/go.mod), so that the
// plotting libraries are no dependency of shardproxy; `make test` and
// `make lint` run its tests and checks from this directory. The exit status is 1 when a load generator saw a wrong
// reply, a target did not start or run, or (except in a quick run, whose
// runs are too short to be steady) the cross-check is off by more than 15%;
// issue 8's goals are reported, not enforced. It is Linux-only
// (/proc).
package main
