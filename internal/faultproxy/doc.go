// Package faultproxy is a TCP proxy for tests that sits between shardproxy
// and a real backend and injects faults on command: added latency, a
// bandwidth cap, a blackhole (bytes dropped) or a hold (bytes kept until it
// ends), a reset or a close after N bytes, writes split into small slices,
// garbage bytes at a position or at once, a slow close, dropping or
// resetting every connection, losing every live connection silently
// (LoseAll: a path that died with no FIN or RST), and a backend restart (the listener stops,
// so new connects are refused, and starts again on the same address).
//
// It is test code: _test.go files import it, and so does soak, the long
// run of bin/shardproxy under faults; it imports the standard library
// only. A Proxy belongs to the test that made it; New registers Close with
// t.Cleanup. A program that is no test makes one with Listen and closes
// it itself.
//
// Directions: Downstream is what the backend sends back (the replies),
// Upstream is what the client sends (the requests). Each direction has its
// own Toxic, which the test may change at any time, also while connections
// are live: a change applies from the next chunk a connection reads in that
// direction. Byte positions (Cut.After, Inject.At) count the bytes a
// connection forwards in that direction from the moment it first sees the
// toxic: for a connection that was live when the toxic was set, from the
// set; for a later connection, from its start (a new backend connection's
// first downstream bytes are the reply to the proxy's handshake). Each
// Cut and Inject acts at most once per connection.
//
// Concurrency: every method is safe for concurrent use, and no method calls
// t.Fatal (only New does), so a background goroutine may flap the backend.
// Each connection runs two goroutines, one per direction, that read a
// chunk, apply the direction's toxic and write it; the data of one
// direction stays in order, and InjectNow writes between two chunks.
// Close stops the listener, closes every connection and waits for every
// goroutine, so a test that closed its Proxy leaks nothing. Jitter comes
// from a generator with a fixed seed, so a run is repeatable.
package faultproxy
