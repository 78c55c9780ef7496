package memcache

import "shardproxy/codec"

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

// Handshake returns the one request that validates a new backend socket,
// "version\r\n", whose "VERSION ..." reply is ReplyOK. The options are
// ignored: memcached's text protocol has no AUTH or SELECT to send.
func (*Dialect) Handshake(codec.HandshakeOptions) []*codec.Request {
	b := []byte("version\r\n")
	return []*codec.Request{{
		Name:  cmdNames[CmdVersion],
		Cmd:   CmdVersion,
		Route: codec.RouteKey,
		Wire:  b,
		Buf:   b,
	}}
}
