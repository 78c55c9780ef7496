// Package memcache is the memcached text and meta protocol as a
// codec.Dialect, registered as "memcache". It frames client requests
// (classic get/gets/gat/gats, set/add/replace/append/prepend/cas,
// incr/decr, touch, delete, flush_all; meta mg/ms/md/ma/me/mn; the local
// version, verbosity, stats and quit) and backend replies, words errors as
// memcached 1.6.18 does, and splits multi-key retrievals per backend and
// merges their replies. It answers "version" with the servers' version
// (codec.VersionEnv), learned from the handshake's "VERSION" reply
// (ReadVersion), and stats subcommands as memcached does (appendStats).
//
// It owns no I/O, keeps no connection state beyond one session's parser,
// never logs, and imports only the standard library, codec and
// internal/mcbase64 (the base64 key decoder store shares). Nothing here
// dials a server or knows about pools.
//
// # Requests
//
// The parser accepts what memcached accepts: lines ending in "\r\n" or a
// bare "\n", tokens separated by spaces, case-sensitive verbs, numbers as
// memcached's strtol-based checks read them. It rejects what memcached
// rejects with memcached's reply text, and keeps the connection where
// memcached keeps it. Where memcached's own recovery would let value bytes
// run as commands although their length is known, the proxy does better:
// a rejected storage line whose length is usable has its value swallowed
// (ProtocolError.Discard). One whose length is not (negative, too large,
// not a number) is rejected alone and what follows is read as commands; a
// value not followed by "\r\n" is rejected and reading goes on after its
// announced length, both as memcached does. Only a line over its limit
// and memcached's HTTP case close the connection. A retrieval line has no
// limit: one longer than MaxLine is cut into parts as it streams in
// (codec.PartParser, stream.go), each a retrieval request of its own, and
// the client sees one reply (Dialect.TrimPart drops each earlier part's
// END). Errors that memcached
// hides from a noreply request are hidden too (ProtocolError.Reply is
// empty).
//
// A set or ms whose value is over the limit is rejected with memcached's
// error, and, as memcached drops the key's old value then, the parser
// turns it into a delete of the key (ProtocolError.Forward: "delete
// <key>", "md <key> [b]") whose reply AppendReply shows as that error.
//
// "noreply" is removed from the wire (the proxy needs every backend reply
// to keep replies in order) and AppendReply shows the client nothing. A
// quiet meta request ("q" flag) is sent followed by "mn\r\n"; the reply
// runs to the "MN\r\n" line, which AppendReply drops, so what a client sees
// in quiet mode is exactly what memcached shows. With
// codec.Options.ProxyWire the parser speaks as memcached's built-in proxy
// instead: the "q" flag is overwritten by a space (req.Arg records where),
// "noreply" is sent as "noreplY" (but for delete), the backend answers
// one reply and AppendReply hides what quiet mode or noreply hide. A
// base64 key ("b" flag) is decoded for routing only.
//
// # Replies
//
// ParseReply frames exactly one reply and classifies it: hits, stored,
// numbers, deleted, touched, NOT_STORED, EXISTS, NS, EX as ReplyOK; END
// without a value, NOT_FOUND, EN, NF as ReplyMiss; ERROR, CLIENT_ERROR and
// SERVER_ERROR as ReplyError. Anything else, a line over MaxReplyLine or a
// value over MaxReplyValue is an error (the sentinels in errors.go): the
// backend stream is out of step. ResumeReply frames a multi-get's reply
// that arrives in pieces in linear time: it resumes at the VALUE block it
// stopped in, with the next key to match, and reads again only that
// block's line. Other replies, one value at most, are framed again from
// their first line; values are always skipped by length.
//
// # Concurrency and ownership
//
// Dialect is stateless and safe for concurrent use. A parser from
// NewRequestParser belongs to one session. ParseRequest copies what a
// request needs into req.Buf (reusing its capacity) and points req.Wire and
// req.Keys into it, so they stay valid after the input buffer is reused;
// nothing else is retained between calls but the state of a line being
// cut into parts (its verb and exptime). Split returns sub-requests with
// their own storage. The Append functions and Merge only append to dst.
package memcache
