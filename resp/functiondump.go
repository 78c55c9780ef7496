package resp

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"shardproxy/codec"
)

// cmdFunctionDump is FUNCTION DUMP, which Merge singles out: its error
// names servers.
var cmdFunctionDump = lookup("function|dump")

// A FUNCTION DUMP payload is, per library, the opcode rdbFunction2
// (0xF5) and the library's code as an RDB string; then the RDB version
// (2 bytes, little-endian) and a CRC64 of all before it (8 bytes).
const (
	rdbFunction2 = 0xF5
	dumpTrailer  = 10
)

// mergeFunctionDump answers FUNCTION DUMP: the first server's payload
// when every server's holds the same libraries, else an error naming the
// servers whose libraries are not the first's. A server lists its
// libraries in its own hash order, so two servers with the same
// libraries may dump different bytes: the libraries are compared as
// sets (dumpLibraries), and any of the payloads restores the same ones.
func (d *Dialect) mergeFunctionDump(dst []byte, req *codec.Request, replies []codec.Reply) []byte {
	c := commandOf(cmdFunctionDump)
	if out, failed := d.appendFailure(dst, c, replies); failed {
		return out
	}
	var first []byte
	var differ []string
	for i, r := range replies {
		payload, null, ok := readString(r.Raw)
		if !ok || null {
			return d.disagreement(dst, req, c, replies)
		}
		if i == 0 {
			first = payload
		} else if !sameLibraries(first, payload) {
			differ = append(differ, serverName(r, i))
		}
	}
	if len(differ) > 0 {
		return d.AppendError(dst, codec.ErrServer, "the servers' libraries differ: those of "+strings.Join(differ, ", ")+
			" are not those of "+serverName(replies[0], 0)+"; FUNCTION RESTORE with FLUSH through the proxy makes them the same")
	}
	return append(dst, replies[0].Raw[:nextValue(replies[0].Raw)]...)
}

// sameLibraries reports whether the FUNCTION DUMP payloads a and b hold
// the same libraries in any order, and the same RDB version; payloads it
// cannot read are the same only when their bytes are.
func sameLibraries(a, b []byte) bool {
	libsA, verA, okA := dumpLibraries(a)
	libsB, verB, okB := dumpLibraries(b)
	if !okA || !okB {
		return bytes.Equal(a, b)
	}
	slices.SortFunc(libsA, bytes.Compare)
	slices.SortFunc(libsB, bytes.Compare)
	return bytes.Equal(verA, verB) && slices.EqualFunc(libsA, libsB, bytes.Equal)
}

// dumpLibraries splits a FUNCTION DUMP payload into its libraries, each
// the opcode and the code's RDB string as they are (plain, an integer, or
// LZF-compressed: not decoded, since one server encodes the same code to
// the same bytes), and its RDB version. ok is false when payload is not
// such; its checksum is not checked (redis-server checks it on RESTORE).
// The slices share payload's array.
func dumpLibraries(payload []byte) (libs [][]byte, version []byte, ok bool) {
	if len(payload) < dumpTrailer {
		return nil, nil, false
	}
	body := payload[:len(payload)-dumpTrailer]
	for len(body) > 0 {
		if body[0] != rdbFunction2 {
			return nil, nil, false
		}
		n := rdbStringSize(body[1:])
		if n == 0 {
			return nil, nil, false
		}
		libs = append(libs, body[:1+n:1+n])
		body = body[1+n:]
	}
	trailer := payload[len(payload)-dumpTrailer:]
	return libs, trailer[:2:2], true
}

// rdbStringSize is the size of the RDB string at the start of b (as
// redis-server's rdbGenericLoadStringObject reads one), or 0 when b does
// not start with a whole one.
func rdbStringSize(b []byte) int {
	n, head, enc := rdbLength(b)
	switch {
	case head == 0:
		return 0
	case !enc: // n bytes follow
		if n > uint64(len(b)-head) {
			return 0
		}
		return head + int(n)
	case n <= 2: // an integer of 1, 2 or 4 bytes
		if size := head + 1<<n; size <= len(b) {
			return size
		}
		return 0
	case n == 3: // LZF: the compressed length, the plain length, the compressed bytes
		clen, h1, e1 := rdbLength(b[head:])
		_, h2, e2 := rdbLength(b[head+h1:])
		off := head + h1 + h2
		if h1 == 0 || h2 == 0 || e1 || e2 || clen > uint64(len(b)-off) {
			return 0
		}
		return off + int(clen)
	}
	return 0
}

// rdbLength reads the RDB length at the start of b (redis-server's
// rdbLoadLenByRef): its value, its size in bytes (0 when b does not start
// with a whole one), and whether the value names a string encoding
// rather than a length.
func rdbLength(b []byte) (n uint64, size int, enc bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch b[0] >> 6 {
	case 0: // 6 bits
		return uint64(b[0] & 0x3F), 1, false
	case 1: // 14 bits
		if len(b) < 2 {
			return 0, 0, false
		}
		return uint64(b[0]&0x3F)<<8 | uint64(b[1]), 2, false
	case 3: // an encoding
		return uint64(b[0] & 0x3F), 1, true
	}
	switch {
	case b[0] == 0x80 && len(b) >= 5: // 32 bits, big-endian
		return uint64(binary.BigEndian.Uint32(b[1:5])), 5, false
	case b[0] == 0x81 && len(b) >= 9: // 64 bits, big-endian
		return binary.BigEndian.Uint64(b[1:9]), 9, false
	}
	return 0, 0, false
}
