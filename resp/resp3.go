package resp

import (
	"strconv"

	"github.com/tidwall/redcon"
)

// This file holds what the proxy's own replies need to speak RESP3 to a
// client that asked for it (HELLO 3; codec.Request.Proto 3), and a way to
// walk replies of either version: redcon's reader knows RESP2 only.

// proto3 is codec.Request.Proto for a RESP3 client.
const proto3 = 3

// appendNull appends a null: "$-1\r\n" in RESP2, "_\r\n" in RESP3.
func appendNull(dst []byte, proto uint8) []byte {
	if proto == proto3 {
		return append(dst, "_\r\n"...)
	}
	return append(dst, "$-1\r\n"...)
}

// appendFieldsHeader appends the header of a field-value aggregate of
// pairs pairs, as Redis answers one (readFields reads it): a map in RESP3,
// "%<pairs>\r\n"; a flat array of fields and values in RESP2,
// "*<2*pairs>\r\n".
func appendFieldsHeader(dst []byte, pairs int, proto uint8) []byte {
	if proto != proto3 {
		return redcon.AppendArray(dst, 2*pairs)
	}
	dst = append(dst, '%')
	dst = strconv.AppendInt(dst, int64(pairs), 10)
	return append(dst, '\r', '\n')
}

// appendText appends text as Redis answers INFO and CLIENT INFO: a bulk
// string in RESP2, a verbatim string of format "txt" in RESP3
// ("=<len+4>\r\ntxt:<text>\r\n").
func appendText(dst []byte, proto uint8, text []byte) []byte {
	if proto != proto3 {
		return redcon.AppendBulk(dst, text)
	}
	dst = append(dst, '=')
	dst = strconv.AppendInt(dst, int64(len(text)+4), 10)
	dst = append(dst, "\r\ntxt:"...)
	dst = append(dst, text...)
	return append(dst, '\r', '\n')
}

// nextValue returns the length of the whole reply (of any RESP2 or RESP3
// type) at the start of b, 0 when there is none.
func nextValue(b []byte) int {
	n, _, err := parseReply(b, 0, 1, nil)
	if err != nil {
		return 0
	}
	return n
}

// readString reads the string reply at the start of raw: a bulk string,
// or in RESP3 a verbatim string (its data after the "txt:" format). null
// reports a null ("$-1" or "_"); ok is false for any other reply.
func readString(raw []byte) (data []byte, null, ok bool) {
	n := nextValue(raw)
	if n == 0 {
		return nil, false, false
	}
	switch raw[0] {
	case '_':
		return nil, true, true
	case '$', '=':
		line, next, _ := replyLine(raw, 0)
		if string(line) == "-1" {
			return nil, true, raw[0] == '$'
		}
		data = raw[next : n-2]
		if raw[0] == '=' {
			data = data[4:]
		}
		return data, false, true
	}
	return nil, false, false
}

// readInt reads the integer reply at the start of raw; ok is false for
// any other reply.
func readInt(raw []byte) (n int64, ok bool) {
	if len(raw) == 0 || raw[0] != ':' {
		return 0, false
	}
	line, _, err := replyLine(raw, 0)
	n, ok = parseInt(line)
	return n, ok && err == nil
}

// readArray reads the header of the array reply at the start of raw: its
// count and the bytes of its elements (and of whatever follows them).
// ok is false for any other reply, a null array included.
func readArray(raw []byte) (count int, elems []byte, ok bool) {
	return readHeader(raw, '*')
}

// readElements reads the array reply at the start of raw: its elements,
// each whole, as splitValues cuts them. ok is false for any other reply.
func readElements(raw []byte) ([][]byte, bool) {
	count, elems, ok := readArray(raw)
	if !ok {
		return nil, false
	}
	return splitValues(elems, count)
}

// readFields reads the field-value aggregate reply at the start of raw,
// a RESP2 array of an even count or a RESP3 map: its fields and values in
// turn, each whole. ok is false for any other reply.
func readFields(raw []byte) (vals [][]byte, ok bool) {
	pairs, rest, ok := readHeader(raw, '%')
	if !ok {
		var count int
		if count, rest, ok = readArray(raw); !ok || count%2 != 0 {
			return nil, false
		}
		pairs = count / 2
	}
	return splitValues(rest, 2*pairs)
}

// readHeader reads the header of the aggregate reply of type t ('*' an
// array, '%' a map) at the start of raw, as readArray does: its count (a
// map's pairs) and the bytes after the header. ok is false for a reply
// of any other type or a null.
func readHeader(raw []byte, t byte) (count int, rest []byte, ok bool) {
	if len(raw) == 0 || raw[0] != t {
		return 0, nil, false
	}
	line, next, err := replyLine(raw, 0)
	n, nok := parseInt(line)
	if err != nil || !nok || n < 0 || n > MaxReplyElements {
		return 0, nil, false
	}
	return int(n), raw[next:], true
}

// splitValues cuts the first count whole replies (of any RESP2 or RESP3
// type) off b, each its own slice of b; ok is false when b holds fewer.
// What follows them is left.
func splitValues(b []byte, count int) (vals [][]byte, ok bool) {
	for range count {
		m := nextValue(b)
		if m == 0 {
			return nil, false
		}
		vals = append(vals, b[:m])
		b = b[m:]
	}
	return vals, true
}
