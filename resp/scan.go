package resp

import (
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// SCAN through a pool walks its servers one after the other, each with
// its own SCAN, and the cursor the client holds says where the walk is:
//
//	proxy cursor = server cursor × 4096 + server number
//
// in bits, the server's number (in the pool's order of servers) in the
// low 12 and the server's own cursor above them. The walk starts at 0:
// server 0, cursor 0. When a server's SCAN ends (its cursor 0), the next
// cursor is the next server's number alone; after the last server it is
// 0. The proxy cursor is an unsigned 64-bit decimal, as Redis's is, so
// a client cannot tell it from a server's. A server cursor of 2^52 or more
// does not fit, and that reply is an error (redis-server's cursors stay
// below its hash table's size, far from it); a pool of more than 4096
// servers cannot SCAN.
//
// The cursor names a server by number only, so it stays good across a
// reload that keeps the pool's servers in their order. When the servers
// change, a cursor goes on with whatever server now has its number: keys
// may be skipped or returned twice, and a number past the last server is
// answered "-ERR invalid cursor". Within one server, Redis's own promise
// holds: a key present from the start to the end of the walk is returned
// at least once; one added or removed meanwhile may be returned or not;
// a key may be returned more than once (a table that is resized).

// Where a server's number sits in a proxy cursor.
const (
	cursorServerBits = 12
	// MaxScanServers is the most servers a pool may have and still SCAN.
	MaxScanServers = 1 << cursorServerBits
	// maxServerCursor bounds a server cursor that fits a proxy cursor.
	maxServerCursor = 1<<(64-cursorServerBits) - 1
)

var cmdSCAN = lookup("scan")

// ParseCursor reads a SCAN cursor as redis-server does: decimal digits,
// optionally after one "+" or "-" (which negates modulo 2^64, as C's
// strtoul does), leading zeros allowed, the empty string 0; no spaces, no
// other characters, nothing above 2^64-1. ok is false where redis-server
// answers "-ERR invalid cursor".
func ParseCursor(b []byte) (cursor uint64, ok bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if cursor > (1<<64-1-d)/10 {
			return 0, false
		}
		cursor = cursor*10 + d
	}
	if neg {
		cursor = -cursor
	}
	return cursor, true
}

// SplitCursor returns the server number and that server's cursor a proxy
// cursor holds.
func SplitCursor(cursor uint64) (server int, serverCursor uint64) {
	return int(cursor & (MaxScanServers - 1)), cursor >> cursorServerBits
}

// JoinCursor returns the proxy cursor of server's serverCursor; false
// when serverCursor does not fit or server is no server number.
func JoinCursor(server int, serverCursor uint64) (uint64, bool) {
	if server < 0 || server >= MaxScanServers || serverCursor > maxServerCursor {
		return 0, false
	}
	return serverCursor<<cursorServerBits | uint64(server), true
}

// scanRequest builds a SCAN for the server its cursor names: the same
// arguments with the server's cursor in place of the proxy's (MATCH,
// COUNT and TYPE go as they are). A cursor redis-server would refuse is
// refused with its words.
func (p *parser) scanRequest(n int, req *codec.Request, cmd int, c *command) (int, error) {
	cursor, ok := ParseCursor(p.arg(1))
	if !ok {
		return 0, reject("-ERR invalid cursor\r\n", n)
	}
	server, serverCursor := SplitCursor(cursor)
	var num [20]byte
	sc := strconv.AppendUint(num[:0], serverCursor, 10)
	size := p.encodedSize() - bulkSize(len(p.arg(1))) + bulkSize(len(sc))
	b := req.Buf[:0]
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	b = redcon.AppendArray(b, p.argc())
	for i := range p.argc() {
		if i == 1 {
			b = redcon.AppendBulk(b, sc)
		} else {
			b = redcon.AppendBulk(b, p.arg(i))
		}
	}
	*req = codec.Request{Name: c.name, Cmd: cmd, Route: codec.RouteServer, Mode: codec.ModeRewrite,
		Target: server, Keys: req.Keys[:0], Buf: b, Wire: b[:len(b):len(b)]}
	return n, nil
}

// appendScanReply appends what the client sees of a server's reply to a
// SCAN: the same keys under the proxy's cursor (see the top of this
// file). Error replies pass as they are.
func appendScanReply(dst []byte, req *codec.Request, reply []byte) []byte {
	if len(reply) > 0 && reply[0] == '-' {
		return append(dst, reply...)
	}
	m, r := redcon.ReadNextRESP(reply)
	if m == 0 || r.Type != redcon.Array || r.Count != 2 {
		return redcon.AppendError(dst, "ERR unexpected reply from the server to SCAN")
	}
	k, first := redcon.ReadNextRESP(r.Data)
	serverCursor, ok := ParseCursor(first.Data)
	if k == 0 || first.Type != redcon.Bulk || !ok {
		return redcon.AppendError(dst, "ERR unexpected reply from the server to SCAN")
	}
	var next uint64
	switch {
	case req.Servers > MaxScanServers:
		return redcon.AppendError(dst, "ERR SCAN is not supported by shardproxy in a pool of more than "+
			strconv.Itoa(MaxScanServers)+" servers")
	case serverCursor != 0:
		if next, ok = JoinCursor(req.Target, serverCursor); !ok {
			return redcon.AppendError(dst, "ERR server cursor "+strconv.FormatUint(serverCursor, 10)+
				" does not fit shardproxy's SCAN cursor")
		}
	case req.Target+1 < req.Servers:
		next = uint64(req.Target + 1)
	}
	var num [20]byte
	dst = redcon.AppendArray(dst, 2)
	dst = redcon.AppendBulk(dst, strconv.AppendUint(num[:0], next, 10))
	return append(dst, r.Data[k:]...)
}
