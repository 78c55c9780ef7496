package resp

import (
	"bytes"
	"cmp"
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// Name is the name the dialect is registered under.
const Name = "redis"

// Dialect is the Redis RESP2 protocol. The zero value is ready to use; it
// holds no state and is safe for concurrent use.
type Dialect struct{}

var _ codec.Dialect = (*Dialect)(nil)

func init() { codec.Register(&Dialect{}) }

// Name returns "redis".
func (*Dialect) Name() string { return Name }

// NewRequestParser returns a parser for one client session.
//
// Zero limits take the defaults: MaxLine DefaultMaxLine (the longest inline
// command, and count or length line), MaxValue DefaultMaxValue (the longest
// bulk string), MaxKey none. A whole request may not exceed MaxValue +
// MaxLine + 4096 bytes. Deny names commands ("keys", "client|kill"; the
// memcached "flush_all" means FLUSHDB and FLUSHALL) the parser refuses.
// Without Keyspace, the commands that span every server's keys (SCAN,
// KEYS, DBSIZE, RANDOMKEY, FLUSHALL, FUNCTION LOAD/DELETE/FLUSH/LIST) are
// refused. With Password
// set, every command but AUTH, HELLO, QUIT and RESET is refused with
// -NOAUTH until the client authenticates (as Username, "" meaning Redis's
// "default" user). SELECT accepts DB only.
func (*Dialect) NewRequestParser(o codec.Options) codec.RequestParser {
	return newParser(o)
}

// Handshake returns what a new backend socket sends before use: AUTH
// [username] password when a password is set, SELECT db when db is not 0,
// then PING. A RESP3 socket (o.Proto 3) starts with HELLO 3 instead,
// which authenticates too (HELLO 3 AUTH username password, the username
// "default" when none is set). Each gets ReplyOK from a healthy server.
func (*Dialect) Handshake(o codec.HandshakeOptions) []*codec.Request {
	var reqs []*codec.Request
	if o.Proto == proto3 {
		hello := []string{"3"}
		if o.Password != "" {
			hello = append(hello, "auth", cmp.Or(o.Username, "default"), o.Password)
		}
		reqs = append(reqs, newRequest("hello", hello...))
	} else if o.Password != "" {
		if o.Username != "" {
			reqs = append(reqs, newRequest("auth", o.Username, o.Password))
		} else {
			reqs = append(reqs, newRequest("auth", o.Password))
		}
	}
	if o.DB != 0 {
		reqs = append(reqs, newRequest("select", strconv.Itoa(o.DB)))
	}
	return append(reqs, newRequest("ping"))
}

// Busy implements codec.BusyReader: -BUSY, a server running a script
// past its busy-reply-threshold (not -BUSYKEY, -BUSYGROUP).
func (*Dialect) Busy(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("-BUSY "))
}

// newRequest builds a request the proxy itself sends to a backend.
func newRequest(name string, args ...string) *codec.Request {
	b := redcon.AppendArray(nil, 1+len(args))
	b = redcon.AppendBulkString(b, name)
	for _, a := range args {
		b = redcon.AppendBulkString(b, a)
	}
	cmd := lookup(name)
	return &codec.Request{Name: name, Cmd: cmd, Route: codec.RouteAny, Wire: b, Buf: b}
}

// AppendReply implements codec.Dialect: the client sees the reply as the
// backend sent it, but a SCAN's under the proxy's cursor (scan.go).
func (*Dialect) AppendReply(dst []byte, req *codec.Request, reply []byte, _ codec.ReplyKind) []byte {
	if req != nil && req.Mode == codec.ModeRewrite && req.Cmd == cmdSCAN {
		return appendScanReply(dst, req, reply)
	}
	return append(dst, reply...)
}

// AppendError implements codec.Dialect: "-CROSSSLOT <msg>\r\n" for keys on
// different servers (Redis Cluster's code for the same refusal), "-ERR
// <msg>\r\n" otherwise. Line breaks in msg become spaces.
func (*Dialect) AppendError(dst []byte, kind codec.ErrorKind, msg string) []byte {
	if kind == codec.ErrCrossServer {
		return redcon.AppendError(dst, "CROSSSLOT "+msg)
	}
	return redcon.AppendError(dst, "ERR "+msg)
}
