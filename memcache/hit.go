package memcache

import (
	"bytes"
	"strconv"

	"shardproxy/codec"
)

// Hit returns the value and client flags that reply, the whole framed
// reply to req, holds when req is a one-key get or gets (as the client
// sent it, or sent as mg in ModeRewrite) and reply is a hit:
//
//	VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\nEND\r\n   (text)
//	VA <bytes> k<key> f<flags>[ c<cas>]\r\n<data>\r\n           (mg)
//
// ok is false for a miss, an error line, any other request, a reply for
// another key, client flags beyond 32 bits (memcached 1.6 keeps 32) or
// anything that does not read as one of these forms. value is a slice of
// reply, valid as long as reply is.
func Hit(req *codec.Request, reply []byte) (value []byte, flags uint32, ok bool) {
	if !isOneKeyGet(req) {
		return nil, 0, false
	}
	line, next, err := readLine(reply, 0)
	if err != nil {
		return nil, 0, false
	}
	var size int
	var flagsTok []byte
	trail := "END\r\n"
	if req.Mode == codec.ModeRewrite {
		v, hit, err := metaGetLine(line, req)
		if err != nil || !hit {
			return nil, 0, false
		}
		size, flagsTok, trail = v.size, v.flags, ""
	} else {
		key, n, err := parseValueLine(line)
		if err != nil || string(key) != string(req.Keys[0]) {
			return nil, 0, false
		}
		size = n
		flagsTok, _, _ = bytes.Cut(line[len("VALUE ")+len(key)+1:], []byte(" "))
	}
	f, okFlags := parseDecimal(flagsTok, 1<<32-1)
	end := next + size
	if !okFlags || len(reply)-end != 2+len(trail) ||
		string(reply[end:end+2]) != "\r\n" || string(reply[end+2:]) != trail {
		return nil, 0, false
	}
	return reply[next:end:end], uint32(f), true
}

// AppendHit appends memcached's reply to "get <key>" that hits a value
// with client flags: "VALUE <key> <flags> <bytes>\r\n<value>\r\nEND\r\n".
func AppendHit(dst, key []byte, flags uint32, value []byte) []byte {
	dst = append(dst, "VALUE "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(flags), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(value)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, value...)
	return append(dst, "\r\nEND\r\n"...)
}
