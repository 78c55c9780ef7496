// Command shardbench is a load generator for memcached, Redis and the
// proxies in front of them (shardproxy, twemproxy). It speaks memcached's
// text protocol (-proto text: set / get, multi-get), memcached's meta
// protocol (-proto meta: ms / mg, multi-get as quiet mg + mn) and Redis's
// RESP (-proto resp: SET / GET, MGET). It imports no shardproxy package, so
// that it measures the proxy from the outside.
//
// # Load
//
// Each of -conns connections is one goroutine that writes -pipeline requests
// in one write and then reads their replies, batch after batch. The
// goroutines run on -procs threads (default: every core; on a small machine
// -procs 1 leaves more to the servers it measures, as redis-benchmark's one
// thread does). A request is a set or a get, drawn by -ratio (set:get); a
// get reads -mget distinct keys (a multi-get when more than one). Keys come
// from a space of -keys names, -prefix followed by the zero-padded key
// number, picked by -dist (uniform, or zipf with -zipf-theta). With -rate, batches are paced to that many
// requests per second over all connections, and latency counts from each
// batch's scheduled start, so a server that falls behind is not flattered
// (coordinated omission). A connection sleeps to its next start, and a
// sleep can end late: the run reports those delays (pacing lateness), which
// are the generator's own and part of the latency. On a loaded 2-core
// machine they reach a millisecond at p99; a paced latency percentile below
// the lateness's says little about the server. A precise sleep (a timerfd
// per connection, in the runtime's poller) was tried: at 38,000 req/s over
// 50 connections with -procs 1 it took the generator from 15 to 26 µs of
// CPU per request, and its one thread, so busy, started batches later.
//
// A run dials every connection, sets every key once (-prefill), runs
// -warmup unmeasured, then measures for -duration or until -requests
// requests have been answered. Latency is the time from a batch's write to
// each reply, recorded in HDR histograms (ns, 3 significant digits) and
// reported as p50/p90/p99/p99.9/max.
//
// # Verification
//
// Every reply is checked. The value of key k at version v is a pure function
// of (k, v): a 16-byte header "KKKKKKKKVVVVVVVV" (hex) and a slice of a fixed
// padding chosen by k and v. A get's value is right when it has -value bytes,
// names the key asked for and a version the generator has issued for that
// key, and has that version's body; a set is right when the server stores it
// (STORED, HD, +OK). A miss is right only when no set of the key had been
// acknowledged when the get was sent, so after -prefill every miss is wrong.
// Values left by another run are caught too (their versions were never
// issued), which is why the default -prefix is fresh for every run.
//
// Wrong replies (an error reply, a wrong or corrupt value, a key not asked
// for, a miss) are counted and the first ten are described; a reply whose
// framing cannot be trusted fails the rest of its batch and the connection
// is redialed. Any wrong reply makes the exit status 1.
//
// # Output
//
// Text by default; -json prints one object with the settings, counts,
// req/s, latency percentiles in microseconds, the generator's own CPU per
// request, and, for each -server-pid, that process's CPU time per request
// over the measured part (utime+stime from /proc/PID/stat, 10 ms ticks).
//
// Example, against `make run`'s proxy:
//
//	shardbench -addr 127.0.0.1:22120 -proto text -conns 50 -pipeline 16 -duration 10s
//
// Exit status: 0 when every reply was right, 1 on wrong replies or when the
// run could not start, 2 on a usage error.
package main
