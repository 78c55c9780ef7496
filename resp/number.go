package resp

import "strconv"

// parseInt reads a decimal integer the way redis-server's string2ll does:
// an optional '-', then digits with no leading zero (except "0" itself),
// nothing else, no more than 20 bytes, within int64. "-0", "+1", " 1" and
// "01" are not numbers.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	v, ok := parseDigits(b)
	switch {
	case !ok:
		return 0, false
	case neg && (v == 0 || v > 1<<63):
		return 0, false
	case neg:
		return -int64(v), true // -1<<63 wraps to itself
	case v > 1<<63-1:
		return 0, false
	}
	return int64(v), true
}

// parseDigits reads digits with no leading zero (except "0" itself) and
// nothing else, within uint64.
func parseDigits(b []byte) (uint64, bool) {
	if len(b) == 0 || b[0] == '0' && len(b) > 1 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1)/10 || v*10 > 1<<64-1-d {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// appendInt appends v in decimal.
func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }
