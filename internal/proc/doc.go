// Package proc starts, watches and stops the real server processes that
// shardproxy's tests, its soak test and its benchmark harness run:
// memcached, redis-server, nutcracker and shardproxy itself. It is the one
// supervisor the three share: internal/testserver builds the tests'
// servers on it, soak/ and bench/ run their fleets with it.
//
// A Process is made by New from a Config (binary, arguments, the address
// it listens on, a readiness probe) and may be started and stopped many
// times. Start returns once the server answers its probe, or fails with an
// error that quotes the server's last output lines; a server that exits
// before it answers is never mistaken for a ready one. Stop kills at once,
// or sends SIGTERM and kills after Config.StopGrace. On Linux the kernel
// kills every server when the process that started it dies, so none
// outlives a crashed or interrupted run.
//
// Output: a server's stdout and stderr are kept in memory (the last 64
// KiB, across restarts) and, with Config.LogFile, appended to a file.
//
// Ports: FreePort hands out loopback ports below the kernel's ephemeral
// range, never the same one twice in a process, and claims each with a
// lock file so that concurrent test binaries (go test ./... runs them at
// once) and harnesses do not pick the same one. SHARDPROXY_PORT_RANGE=LO-HI
// confines it to those ports (a machine shared with other port users).
//
// It imports the standard library only and is not shardproxy code: only
// tests, internal/testserver, soak and bench import it. A Process's
// methods are safe for concurrent use.
package proc
