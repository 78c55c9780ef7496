// Package backend is the one backend connection state machine that every
// protocol shares. A Backend is one server address with up to Config.Conns
// sockets; many client sessions pipeline their requests over them.
//
// Life of a socket: connecting (dial with Config.ConnectTimeout) ->
// validating (the dialect's Handshake: memcache "version", Redis AUTH/SELECT;
// a codec.VersionReader dialect's reply tells the server's version, which
// Backend.Version keeps; with HandshakeOptions.MetaProbe, whether the
// server speaks memcached's meta protocol, which Backend.Meta keeps and
// which lets Config.MetaRewrite rewrite the calls written on that socket;
// then Config.Replay's requests, a pool's spooled deletes: replay.go)
// -> ready (requests are written in batches by one writer goroutine and their
// replies matched in FIFO order by one reader goroutine; a codec.Joiner
// dialect's joinable requests in a batch go as one, memcache's one-key text
// gets as one multi-get, whose reply is framed back into each call's:
// join.go; a long value in the reply to a Call.Splice call is spliced from
// the socket into a pipe, not read, and the client's writer splices it on:
// splice.go) -> failed (timeout,
// disconnect, desync: every request written on that socket is answered
// exactly once with an *Error naming the cause, and the socket is dropped).
// The next request dials again.
//
// Life of a Backend: each socket failure counts once; a successful reply
// resets the count. At Config.FailureLimit consecutive failures the backend
// is marked bad: requests are answered at once with CauseMarkedBad until
// Config.RetryTimeout has passed, then the next request tries again (a
// further failure marks it bad again at once). With Config.HealthInterval
// set, the retry time starts probes instead, and only a successful probe
// ends the bad period; idle sockets are checked too (health.go).
// Config.OnStateChange hears of both transitions, so a pool can eject and
// restore the server.
//
// Concurrency: all methods of Backend are safe for concurrent use. A Call
// belongs to the backend from Send until its Done function runs; Done runs
// exactly once, on a backend goroutine (or on the caller's goroutine when the
// call fails before it is queued), and must not block or call Close.
//
// Ownership, per socket slot (redispipe's model: one writer and one reader
// per socket, a FIFO of pending calls between them):
//
//   - Sessions (Send, Batch.Flush) take the slot's queue lock only, to
//     append to its queue. Nothing else is done under that lock: no
//     framing, no completion, no socket I/O.
//   - The writer goroutine owns the queued calls once it has swapped the
//     queue out, and the slot's current socket: it dials (in a helper
//     goroutine), fails calls that time out or whose connect failed, and
//     writes batches. Before writing a batch it hands it to the socket's
//     reader (sock.handoff, under a lock only the writer, the reader and
//     a socket's killer take); from then on the calls are the reader's.
//     It finds out that a socket died from its dead flag, and dials a new
//     one for the next batch; a dead socket is never written again.
//   - The reader goroutine owns the in-flight list (taken from the
//     hand-off when it runs out of calls), the read buffer, the reply
//     chunks and the ReplyState of the reply at the head. It frames
//     replies holding no lock, resuming an unfinished reply where the last
//     read left it, and it is the only goroutine that completes calls
//     handed to it: with their replies, in order, and when the socket
//     dies, with the cause, in order.
//   - Anyone who finds a socket broken (the writer on a write error, the
//     reader on a read error, a misread or its read deadline, Close) kills
//     it: marks it dead with the cause, closes it and (but for Close) counts
//     the failure against the backend. The reader, woken by the close,
//     fails what is in flight, but only once the writer has left the
//     system call that may still be reading those calls' request bytes.
//   - Close fails the queue, kills the current socket, and waits for the
//     writer and the readers to finish.
//
// A request of another protocol version (codec.Request.Proto: a RESP3
// client's) goes on a second set of Config.Conns slots, made when the
// first such request is sent, whose handshake asks for that version
// (HandshakeOptions.Proto); the first set never sees such a request, and
// a backend no RESP3 client uses has no second set.
//
// A Dedicated (Backend.Dedicate) is one more socket slot of the same
// kind, outside the shared ones, for one client at a time (Redis blocking
// commands and transactions): same dial, handshake and health counting,
// but it dials once; after its socket fails every call fails at once.
// In push mode (Backend.DedicatePush: Redis subscribed mode, always in
// RESP2) its reader frames whatever the server sends and hands each
// frame to a PushFunc, and its calls complete once written.
//
// InQueue counts calls from Send until they are handed to a reader (or
// failed); OutQueue from the hand-off until they complete. A call moves
// into OutQueue before it leaves InQueue, so a drain that waits for both
// to be zero never misses a call under way.
//
// backend imports codec only: it frames replies through the dialect and never
// looks at a protocol's bytes itself.
package backend
