package store

// memcached parses numbers with C's strtoul family wrapped in its safe_*
// helpers; these functions give the same answers, quirks included: leading
// white space and a sign are accepted, a number may be followed by white
// space, and a 32-bit result keeps the low bits of the 64-bit one.

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// cDigits reads what strtoull reads from s: white space, a sign, decimal
// digits. It returns the magnitude (saturated, with overflow set past
// 2^64-1), whether a '-' came first, the index after the digits, and
// whether there were any digits at all.
func cDigits(s []byte) (mag uint64, neg bool, end int, any, overflow bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if mag > (^uint64(0)-d)/10 {
			overflow = true
		} else if !overflow {
			mag = mag*10 + d
		}
		i++
	}
	if i == start {
		return 0, false, 0, false, false
	}
	return mag, neg, i, true, overflow
}

// terminated reports whether s ends at end the way memcached's safe_*
// helpers want: at the end of the token, a NUL or white space.
func terminated(s []byte, end int) bool {
	return end == len(s) || s[end] == 0 || isCSpace(s[end])
}

// hasMinus reports whether s holds a '-' before its first NUL (C's strchr).
func hasMinus(s []byte) bool {
	for _, c := range s {
		if c == 0 {
			return false
		}
		if c == '-' {
			return true
		}
	}
	return false
}

// safeStrtoull is memcached's safe_strtoull.
func safeStrtoull(s []byte) (uint64, bool) {
	mag, neg, end, any, overflow := cDigits(s)
	if !any || overflow || !terminated(s, end) {
		return 0, false
	}
	v := mag
	if neg {
		v = -mag
	}
	if int64(v) < 0 && hasMinus(s) {
		return 0, false
	}
	return v, true
}

// safeStrtoul is memcached's safe_strtoul on a 64-bit machine: parsed as
// 64 bits, kept as 32.
func safeStrtoul(s []byte) (uint32, bool) {
	v, ok := safeStrtoull(s)
	return uint32(v), ok
}

// safeStrtol is memcached's safe_strtol on a 64-bit machine: parsed as a
// 64-bit long, kept as 32 bits.
func safeStrtol(s []byte) (int32, bool) {
	mag, neg, end, any, overflow := cDigits(s)
	if !any || overflow || !terminated(s, end) {
		return 0, false
	}
	var v int64
	if neg {
		if mag > 1<<63 {
			return 0, false
		}
		v = int64(-mag)
	} else {
		if mag > 1<<63-1 {
			return 0, false
		}
		v = int64(mag)
	}
	return int32(v), true
}
