// Package backend is the one backend connection state machine that every
// protocol shares. A Backend is one server address with up to Config.Conns
// sockets; many client sessions pipeline their requests over them.
//
// Life of a socket: connecting (dial with Config.ConnectTimeout) ->
// validating (the dialect's Handshake: memcache "version", Redis AUTH/SELECT)
// -> ready (requests are written in batches by one writer goroutine and their
// replies matched in FIFO order by one reader goroutine) -> failed (timeout,
// disconnect, desync: every request written on that socket is answered
// exactly once with an *Error naming the cause, and the socket is dropped).
// The next request dials again.
//
// Life of a Backend: each socket failure counts once; a successful reply
// resets the count. At Config.FailureLimit consecutive failures the backend
// is marked bad: requests are answered at once with CauseMarkedBad until
// Config.RetryTimeout has passed, then the next request tries again (a
// further failure marks it bad again at once). Config.OnStateChange hears of
// both transitions, so a pool can eject and restore the server.
//
// Concurrency: all methods of Backend are safe for concurrent use. A Call
// belongs to the backend from Send until its Done function runs; Done runs
// exactly once, on a backend goroutine (or on the caller's goroutine when the
// call fails before it is queued), and must not block.
//
// backend imports codec only: it frames replies through the dialect and never
// looks at a protocol's bytes itself.
package backend
