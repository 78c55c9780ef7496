package memcache

import (
	"errors"
	"fmt"

	"shardproxy/codec"
)

// Reply framing errors. ParseReply wraps them with the offending line
// (quoted, cut to 64 bytes); match them with errors.Is. Each one means the
// backend stream cannot be trusted any more.
var (
	// ErrReplyLineTooLong reports a reply line longer than MaxReplyLine.
	ErrReplyLineTooLong = errors.New("memcache: reply line too long")
	// ErrReplyLineEnding reports a reply line ended by a bare "\n".
	ErrReplyLineEnding = errors.New("memcache: reply line not terminated by \\r\\n")
	// ErrUnexpectedReply reports a reply line that does not answer the request.
	ErrUnexpectedReply = errors.New("memcache: unexpected reply line")
	// ErrBadValueLine reports a malformed VALUE or VA header line.
	ErrBadValueLine = errors.New("memcache: malformed value header")
	// ErrValueLength reports a value length above MaxReplyValue.
	ErrValueLength = errors.New("memcache: value length out of range")
	// ErrValueTerminator reports value data not followed by "\r\n".
	ErrValueTerminator = errors.New("memcache: value data not followed by \\r\\n")
	// ErrNoReply reports a request the proxy never forwards (it has no reply
	// to frame).
	ErrNoReply = errors.New("memcache: request has no backend reply")
)

// replyErr wraps a framing sentinel with the line that caused it.
func replyErr(sentinel error, line []byte) error {
	const show = 64
	if len(line) > show {
		line = line[:show]
	}
	return fmt.Errorf("%w: %q", sentinel, line)
}

// Client error replies, worded as memcached 1.6.18 words them.
const (
	replyError          = "ERROR\r\n"
	replyBadFormat      = "CLIENT_ERROR bad command line format\r\n"
	replyBadDelete      = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
	replyBadExptime     = "CLIENT_ERROR invalid exptime argument\r\n"
	replyBadDelta       = "CLIENT_ERROR invalid numeric delta argument\r\n"
	replyBadChunk       = "CLIENT_ERROR bad data chunk\r\n"
	replyLineTooLong    = "CLIENT_ERROR line too long\r\n"
	replyTooLarge       = "SERVER_ERROR object too large for cache\r\n"
	replyMetaFlagsLong  = "CLIENT_ERROR options flags too long\r\n"
	replyDisabledSuffix = " is disabled for this pool\r\n"
	replyNotCarried     = " is not supported by this proxy\r\n"
)

// rejectLine rejects a request line of n bytes that carries no data (or
// whose data memcached would not read either); the connection stays.
func rejectLine(reply string, n int) *codec.ProtocolError {
	return &codec.ProtocolError{Reply: reply, N: n}
}

// rejectFatal rejects a request after which the stream cannot be
// resynchronised: the proxy sends reply and closes the connection.
func rejectFatal(reply string, n int) *codec.ProtocolError {
	return &codec.ProtocolError{Reply: reply, Close: true, N: n}
}

// rejectData rejects a storage request line of n bytes whose value of
// vlen bytes (plus "\r\n") follows and is dropped unread.
func rejectData(reply string, n, vlen int) *codec.ProtocolError {
	return &codec.ProtocolError{Reply: reply, N: n, Discard: int64(vlen) + 2}
}

// quiet hides reply from a client that asked for noreply: memcached sets
// noreply before it validates a request, so its error replies to a
// noreply request are never sent.
func quiet(reply string, noreply bool) string {
	if noreply {
		return ""
	}
	return reply
}
