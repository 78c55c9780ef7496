// Package proxy runs shardproxy's listeners and client sessions. It builds,
// from a validated config.Config, one pool per configured pool: a listener,
// a dialect (codec), a sharding.Pool and one backend.Backend per server.
//
// A client session has two goroutines: the reader parses requests with the
// pool's dialect, routes each one (locally, to one backend, or split over
// several) and queues a pending slot for it; the writer waits for the slots
// in the order the client sent them and writes the replies, batching every
// reply that is ready into one write. A client therefore always reads its
// replies in its own request order, however the backends interleave.
//
// Concurrency: Server's methods are safe for concurrent use. Everything a
// session owns is touched by its two goroutines only, handing off through the
// pending queue.
package proxy
