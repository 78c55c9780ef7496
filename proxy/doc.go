// Package proxy runs shardproxy's listeners and client sessions. It builds,
// from a validated config.Config, one pool per configured pool: a listener,
// a dialect (codec), a sharding.Pool and one backend.Backend per server.
//
// A client session has a reader goroutine: it parses requests with the
// pool's dialect, routes each one (locally, to one backend, or split over
// several), stages the backend calls of one read to send them together, and
// queues a pending slot per request. Replies leave in the order the client
// sent the requests, however the backends interleave: the goroutine that
// answers the oldest request (usually a backend's reader) writes every ready
// reply at the head in one non-blocking write; the session's writer
// goroutine takes over only when a write would block, for big replies
// written without copying, and on TLS (see writer).
//
// Concurrency: Server's methods are safe for concurrent use. A session's
// parser and routing state belong to its reader; its queue of pending slots
// and the right to write are guarded by the writer's mutex.
package proxy
