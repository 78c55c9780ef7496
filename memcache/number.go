package memcache

import "math"

// memcached validates numbers with strtol/strtoul (base 10) wrapped in its
// safe_strto* helpers. The functions here accept exactly what those accept,
// so the proxy rejects what the server would reject and forwards the rest
// for the server to interpret: leading C whitespace, an optional sign, at
// least one digit, no overflow of a 64-bit long, and then either the end of
// the token or a whitespace byte (after which anything is ignored).

// isCSpace reports whether c is C isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// scanNumber reads the sign and the digits of a strtol-style number. It
// returns the magnitude, whether it was negative, and ok=false when there
// is no digit, the magnitude overflows uint64, or the digits are followed
// by a byte that is neither whitespace nor the end of tok.
func scanNumber(tok []byte) (mag uint64, neg, ok bool) {
	i := 0
	for i < len(tok) && isCSpace(tok[i]) {
		i++
	}
	if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
		neg = tok[i] == '-'
		i++
	}
	start := i
	for ; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
		d := uint64(tok[i] - '0')
		if mag > (math.MaxUint64-d)/10 {
			return 0, false, false // ERANGE
		}
		mag = mag*10 + d
	}
	if i == start {
		return 0, false, false
	}
	if i < len(tok) && !isCSpace(tok[i]) {
		return 0, false, false
	}
	return mag, neg, true
}

// parseLong mirrors memcached's safe_strtol before its store into an
// int32: it returns the 64-bit value strtol produces.
func parseLong(tok []byte) (int64, bool) {
	mag, neg, ok := scanNumber(tok)
	if !ok {
		return 0, false
	}
	if neg {
		if mag > 1<<63 {
			return 0, false
		}
		return int64(-mag), true // -(1<<63) wraps to itself
	}
	if mag > math.MaxInt64 {
		return 0, false
	}
	return int64(mag), true
}

// parseUlong mirrors memcached's safe_strtoul and safe_strtoull (unsigned
// long is 64 bits): strtoul negates a signed input modulo 2^64, and the
// result is refused when it is negative as a signed number and the input
// had a minus sign.
func parseUlong(tok []byte) (uint64, bool) {
	mag, neg, ok := scanNumber(tok)
	if !ok {
		return 0, false
	}
	if neg {
		v := -mag
		if int64(v) < 0 {
			return 0, false
		}
		return v, true
	}
	return mag, true
}

// parseLength parses a value length: memcached accepts 0..INT_MAX-2 after
// truncating to int32; the proxy accepts exactly that range of the untruncated
// number, so it never forwards a length the server would read differently.
func parseLength(tok []byte) (int, bool) {
	v, ok := parseLong(tok)
	if !ok || v < 0 || v > math.MaxInt32-2 {
		return 0, false
	}
	return int(v), true
}

// parseDecimal parses the plain unsigned decimal numbers a server writes
// (no sign, no spaces); it refuses values above max.
func parseDecimal(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (max-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
