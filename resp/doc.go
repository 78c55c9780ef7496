// Package resp is the Redis protocol (RESP2, and RESP3 for clients that
// ask for it) as a codec.Dialect, registered as "redis". It frames client
// requests (multibulk arrays and inline commands) and backend replies
// (RESP2's simple strings, errors, integers, bulk and null bulk strings,
// arrays; RESP3's maps, sets, doubles, booleans, nulls, big numbers,
// verbatim strings, blob errors, attributes and pushes), words errors as
// redis-server 7.0 does, routes every Redis 7.0 command by its keys, answers
// the connection commands itself, and splits multi-key commands per backend
// and merges their replies.
//
// It owns no I/O, never logs, and imports only the standard library, codec
// and tidwall/redcon (its RESP writers, its command reader for re-reading
// the proxy's own wire, its reply reader for walking replies ParseReply has
// framed). Nothing here dials a server or knows about pools.
//
// # Requests
//
// The parser frames what redis-server 7.0 frames, byte for byte: a request
// starting with '*' is multibulk, anything else an inline command split as
// sdssplitargs splits it (quotes, escapes). Header lines end at the first
// '\r' and the byte after it is skipped, as is the pair after bulk data,
// without being looked at; such a request, and every inline command, is
// re-encoded as a well-formed multibulk frame for the backend (Wire); a
// well-formed one is forwarded as the client sent it. Limits: a bulk
// string of at most MaxValue bytes (default 512 MiB), at most MaxArgs
// arguments, inline commands and count or length lines of at most MaxLine
// bytes (default 64 KiB), a whole request of at most MaxValue + MaxLine +
// 4096 bytes. Breaking them, or the framing, gets redis-server's
// "-ERR Protocol error: ..." and a closed connection, as in Redis.
//
// A framed request is checked in redis-server's order: command name
// ("-ERR unknown command ..."), subcommand, arity, then authentication
// ("-NOAUTH Authentication required."); then the proxy's own rules: denied
// commands, commands it does not carry ("-ERR SWAPDB is not supported
// by shardproxy: it administers a single server").
// These leave the connection open.
//
// # Commands
//
// The command table (commands_gen.go) is generated from a real
// redis-server's COMMAND reply by internal/gencommands, merged with the
// hand-written routing decisions there. Each command is one of: one key
// (RouteKey); split per server (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH:
// RouteMulti); every key on one server (MSETNX, SINTER, RENAME, SMOVE,
// LMOVE, PFMERGE, EVAL with keys, ...: RouteSame); any one server (COMMAND,
// TIME, *|HELP: RouteAny); every server (FLUSHDB, SCRIPT LOAD|EXISTS|FLUSH,
// and with Options.Keyspace KEYS, DBSIZE, RANDOMKEY, FLUSHALL, FUNCTION
// LOAD|DELETE|FLUSH|LIST, with Options.ServerConfig CONFIG
// GET|SET|RESETSTAT|REWRITE, see config.go: RouteAll, merged as Merge
// says); the server a
// cursor names (SCAN, with Options.Keyspace: RouteServer, see scan.go);
// answered by the proxy (PING, ECHO, QUIT, SELECT, AUTH, HELLO, RESET,
// INFO, CLIENT SETNAME|GETNAME|ID|SETINFO: RouteLocal); may block its
// connection (BLPOP, BLMOVE, BZMPOP, ..., XREAD and XREADGROUP with BLOCK:
// RouteBlock, with the timeout its arguments give in Request.Block); keeps
// state on the connection (MULTI, EXEC, DISCARD, WATCH, UNWATCH, WAIT:
// RoutePin, Request.Pin says which); subscribes the client ((P|S)SUBSCRIBE
// and their UNSUBSCRIBEs: RouteSubscribe, Request.Sub says which, Keys are
// the channels or patterns; PUBLISH goes by its channel as RouteKey, and
// PUBSUB's counts are merged, see pubsub.go, which also holds every
// pub/sub frame the proxy makes or reads, RESP2's and a RESP3 client's
// push frames); or not carried (server administration, the keyspace
// commands without Options.Keyspace, CONFIG without Options.ServerConfig,
// and CONFIG SET of a setting the proxy depends on).
// INFO goes to every server instead (RouteAll with WithLocal) when the
// pool's kind sets Options.ServerInfo and the client asks for more than
// the proxy's section: Merge merges the servers' sections by the rules in
// infomerge.go and adds the proxy's, which AddLocal stored in the request
// before it was routed. Keys of commands with movable keys (EVAL, ZUNIONSTORE,
// XREAD, SORT, GEORADIUS, ...) are found as redis-server's getkeys
// functions find them.
//
// # Sessions
//
// A parser holds its session's Redis state: whether the client has
// authenticated (Options.Password), its name and its id. AUTH, HELLO,
// SELECT, RESET and CLIENT are decided while parsing, in the client's
// order, so nothing a client sends before authenticating is forwarded.
// HELLO 3 switches the session to RESP3 and HELLO 2 (or RESET) back, once
// HELLO's options are accepted; every request then carries the protocol
// (codec.Request.Proto 3), so that a backend sends it on sockets that
// speak RESP3 (Handshake with HandshakeOptions.Proto 3 starts with HELLO
// 3) and the server's reply passes through as it is. The proxy's own
// replies follow: HELLO's is a map (a flat array in RESP2), a null is
// "_", INFO is a verbatim string; merges read either version's replies
// (nextValue, readString: redcon's reader knows RESP2 only). A parser
// is a codec.StateUndoer: a HELLO, AUTH or CLIENT SETNAME the session
// refuses after parsing it (RESP2's subscribed mode) is undone.
//
// # Replies
//
// ParseReply frames exactly one reply of either version, nested
// aggregates included, without recursion, and classifies it: -LOADING
// (a simple or blob error) as ReplyFailure (the server is unhealthy),
// other errors (-BUSY of a long script, -OOM of a write at maxmemory
// among them) as ReplyError, null bulk strings, null arrays
// and RESP3 nulls as ReplyMiss, everything else as ReplyOK. A map counts
// two elements a pair, an attribute its pairs and the reply after it. The
// streamed forms of RESP3 (a "?" length, ";" chunks, "." end) are a
// broken stream: redis-server 7.0 never sends them. A push (">")
// is framed as an array; on a shared socket none arrives, because the
// commands that subscribe a connection go on connections of the
// client's own, and client tracking is the proxy's, on connections of its
// own (tracking.go has the words: the commands' replies and errors, the
// invalidation messages, ReadInvalidate for a server's pushes). A malformed
// reply, a line over MaxReplyLine or a bulk string over MaxReplyBulk is an
// error (the sentinels in errors.go): the backend stream is out of step.
// ResumeReply frames a reply that arrives in pieces in linear time: it
// resumes at the element it stopped in, counting the elements still to
// read as ParseReply does, and examines again only that element's line,
// never bulk data (a long line cut short is read twice in all).
//
// # Concurrency and ownership
//
// Dialect is stateless and safe for concurrent use. A parser from
// NewRequestParser belongs to one session. ParseRequest copies what a
// request needs into req.Buf (reusing its capacity) and points req.Wire and
// req.Keys into it, so they stay valid after the input buffer is reused;
// nothing else is retained between calls. Split returns sub-requests with
// their own storage. The Append functions and Merge only append to dst.
package resp
