package memcache

import (
	"bytes"

	"shardproxy/codec"
)

// Name is the name the dialect is registered under.
const Name = "memcache"

// Dialect is the memcached text and meta protocol. The zero value is ready
// to use; it holds no state and is safe for concurrent use.
type Dialect struct{}

var _ codec.Dialect = (*Dialect)(nil)

func init() { codec.Register(&Dialect{}) }

// Name returns "memcache".
func (*Dialect) Name() string { return Name }

// NewRequestParser returns a parser for one client session. Zero limits
// take the defaults: DefaultMaxKey, DefaultMaxLine (retrieval lines; other
// lines stop at MaxCommandLine or MaxLine, whichever is smaller) and
// DefaultMaxValue. Deny names commands ("flush_all") the parser refuses.
func (*Dialect) NewRequestParser(l codec.Options) codec.RequestParser {
	return newParser(l)
}

// Handshake returns the requests that validate a new backend socket:
// "version\r\n", whose "VERSION ..." reply is ReplyOK (and tells the
// server's version: ReadVersion), and with o.Meta or o.MetaProbe
// "mn\r\n", last, which only a server that speaks the meta protocol
// answers ("MN"; memcached before 1.6 says "ERROR"). Password and DB are ignored:
// memcached's text protocol has no AUTH or SELECT to send.
func (*Dialect) Handshake(o codec.HandshakeOptions) []*codec.Request {
	reqs := []*codec.Request{handshakeReq(CmdVersion, "version\r\n")}
	if o.Meta || o.MetaProbe {
		reqs = append(reqs, handshakeReq(CmdMetaNoop, "mn\r\n"))
	}
	return reqs
}

func handshakeReq(cmd int, wire string) *codec.Request {
	b := []byte(wire)
	return &codec.Request{Name: cmdNames[cmd], Cmd: cmd, Route: codec.RouteKey, Wire: b, Buf: b}
}

var _ codec.VersionReader = (*Dialect)(nil)

// ReadVersion implements codec.VersionReader: the version in the reply to
// a "version" request ("VERSION 1.6.18\r\n" gives "1.6.18").
func (*Dialect) ReadVersion(req *codec.Request, reply []byte) (string, bool) {
	if req.Cmd != CmdVersion {
		return "", false
	}
	line, ok := bytes.CutPrefix(reply, []byte("VERSION "))
	if !ok {
		return "", false
	}
	v := string(bytes.TrimRight(line, "\r\n"))
	return v, v != ""
}
