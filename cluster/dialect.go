package cluster

import (
	"bytes"
	"errors"

	"shardproxy/codec"
	"shardproxy/resp"
)

// Wire bytes the cluster router writes itself.
var (
	// askingWire is ASKING as a multibulk request: "*1\r\n$6\r\nASKING\r\n".
	askingWire = []byte("*1\r\n$6\r\nASKING\r\n")
	// readonlyWire is READONLY: "*1\r\n$8\r\nREADONLY\r\n".
	readonlyWire = []byte("*1\r\n$8\r\nREADONLY\r\n")
	// okReply is the reply to ASKING and READONLY: "+OK\r\n".
	okReply = []byte("+OK\r\n")
)

// askingCmd marks a request whose Wire is ASKING followed by one command,
// in codec.Request.Cmd: no resp command number is negative.
const askingCmd = -1

// nodeDialect is the dialect of a cluster node's backend: resp's, with two
// changes. ParseReply frames the two replies of an ASKING pair (a request
// with Cmd askingCmd) as one, so the pair is one backend call: written in
// one piece on one socket, nothing can come between ASKING and its command.
// Handshake adds READONLY on the sockets of replica nodes, so they serve
// reads of their master's slots.
type nodeDialect struct {
	resp.Dialect
	readonly bool
}

var _ codec.Dialect = (*nodeDialect)(nil)

var (
	masterDialect  = &nodeDialect{}
	replicaDialect = &nodeDialect{readonly: true}
)

// ParseReply implements codec.Dialect. For an ASKING pair the reply is both
// replies, "+OK\r\n" first, and its kind is the command's.
func (d *nodeDialect) ParseReply(buf []byte, req *codec.Request) (int, codec.ReplyKind, error) {
	if req == nil || req.Cmd != askingCmd {
		return d.Dialect.ParseReply(buf, req)
	}
	n, _, err := d.Dialect.ParseReply(buf, nil)
	if err != nil {
		return 0, 0, err
	}
	m, kind, err := d.Dialect.ParseReply(buf[n:], nil)
	if err != nil {
		return 0, 0, err
	}
	return n + m, kind, nil
}

// ResumeReply implements codec.Dialect. An ASKING pair, two small
// replies, is framed from its start each time.
func (d *nodeDialect) ResumeReply(buf []byte, req *codec.Request, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	if req == nil || req.Cmd != askingCmd {
		return d.Dialect.ResumeReply(buf, req, st)
	}
	*st = codec.ReplyState{}
	return d.ParseReply(buf, req)
}

// Handshake implements codec.Dialect: resp's (AUTH, SELECT, PING), then
// READONLY on replica sockets.
func (d *nodeDialect) Handshake(o codec.HandshakeOptions) []*codec.Request {
	reqs := d.Dialect.Handshake(o)
	if d.readonly {
		reqs = append(reqs, &codec.Request{Name: "readonly", Route: codec.RouteAny, Wire: readonlyWire})
	}
	return reqs
}

// errNoAsking reports an ASKING pair whose first reply was not +OK.
var errNoAsking = errors.New("cluster: ASKING was refused")

// splitAsking returns the command's reply out of an ASKING pair's reply.
func splitAsking(raw []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(raw, okReply)
	if !ok {
		return nil, errNoAsking
	}
	return rest, nil
}

// setAsking makes dst the ASKING pair for req: ASKING then req's wire, in
// dst's own storage.
func setAsking(dst, req *codec.Request) {
	buf := append(append(dst.Buf[:0], askingWire...), req.Wire...)
	*dst = codec.Request{Name: req.Name, Cmd: askingCmd, Route: req.Route, Mode: req.Mode, Proto: req.Proto,
		Wire: buf, Buf: buf, Keys: req.Keys}
}
