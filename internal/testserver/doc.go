// Package testserver starts and stops real cache servers (memcached,
// redis-server, a Redis Cluster, a fleet of Redis shards with replicas
// watched by redis-sentinel, twemproxy's nutcracker) and etcd clusters on
// free loopback ports for tests.
//
// NewPKI makes a throwaway CA with a server and a client certificate for
// the servers and clients that talk TLS; StartEtcdTLS starts etcd with one
// of its own, requiring its client certificate of every client.
//
// It is test-only code: only _test.go files import it. It imports the
// standard library and internal/proc, the process supervisor it shares with
// soak and bench, and adds what tests need: every server belongs to the
// test that started it and is killed by t.Cleanup, and a failure fails the
// test. A missing server binary fails the test with an install hint
// instead of skipping it, so a green run means the integration tests really
// ran; under `go test -short` the Start functions skip the calling test
// instead, which leaves integration tests out of quick runs.
//
// Start functions return once the server answers its protocol (memcached
// "version", Redis PING, nutcracker accepting connections), polling with a
// deadline. The server's stdout and stderr are kept (the last 64 KiB) and
// shown in failure messages and, when the test failed, in the test log.
//
// Shardproxy builds the proxy's own binary once per test process, for the
// tests that run it as an operator would (cmd/shardproxy, examples,
// packaging); their TestMain removes it with RemoveShardproxy. Buffer
// collects such a process's output while the test reads it.
//
// Fake serves scripted stand-ins for backends a real server cannot play
// (hanging, slow, failing), one goroutine per connection, stopped when the
// test ends.
// Mock is such a stand-in for memcached: it answers the version handshake
// (while the test lets it), records the lines it reads, counts its sockets
// and answers each request with what the test's function returns.
//
// A Server's methods are safe for concurrent use, except that Restart and the
// Start functions call t.Fatalf and so belong on the test's goroutine.
package testserver
