package lua

import (
	"math"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// wrapFormat replaces str.format, gopher-lua's, which hands its arguments
// to Go's fmt, with one that gives %q Lua 5.4's meaning, as memcached's
// route files expect: the argument written as a Lua literal that reads
// back as the same value. A string is quoted with Lua's escapes, a number
// with an integer value written as an integer, any other number as a hex
// float (1e9999, -1e9999 and (0/0) for the infinities and NaN), nil and
// the booleans as their names; any other value, or %q with a flag, width
// or precision, raises an error as Lua 5.4's does. Every other conversion
// is gopher-lua's. A format without a 'q' costs one scan.
func wrapFormat(L *glua.LState, str *glua.LTable) {
	format := str.RawGetString("format").(*glua.LFunction)
	str.RawSetString("format", L.NewFunction(func(L *glua.LState) int {
		if fs := L.CheckString(1); strings.IndexByte(fs, 'q') >= 0 {
			L.Replace(1, glua.LString(quoteArgs(L, fs)))
		}
		top := L.GetTop()
		L.Push(format)
		for i := 1; i <= top; i++ {
			L.Push(L.Get(i))
		}
		L.Call(top, 1)
		return 1
	}))
}

// quoteArgs turns, in place on L's stack, each argument of
// string.format(fs, ...) that a %q of fs takes into its literal, and
// returns fs with those %q as %s.
func quoteArgs(L *glua.LState, fs string) string {
	out := []byte(fs)
	n := 1 // the argument the last conversion took
	for i := 0; i < len(fs)-1; i++ {
		if fs[i] != '%' {
			continue
		}
		if fs[i+1] == '%' {
			i++
			continue
		}
		j := len(fs) - len(strings.TrimLeft(fs[i+1:], "-+ #0123456789."))
		q := j < len(fs) && fs[j] == 'q'
		n++
		switch {
		case q && j > i+1:
			L.RaiseError("invalid conversion '%s' to 'format'", fs[i:j+1])
		case n > L.GetTop() && q:
			L.ArgError(n, "no value")
		case n > L.GetTop():
			return string(out) // gopher-lua reports the missing values
		}
		if q {
			L.Replace(n, glua.LString(literal(L, n, L.Get(n))))
			out[j] = 's'
		}
		i = j
	}
	return string(out)
}

// literal is Lua 5.4's %q of v, argument number n of string.format.
func literal(L *glua.LState, n int, v glua.LValue) string {
	switch v := v.(type) {
	case glua.LString:
		return quote(string(v))
	case glua.LNumber:
		return numberLiteral(float64(v))
	case glua.LBool:
		return strconv.FormatBool(bool(v))
	}
	if v == glua.LNil {
		return "nil"
	}
	L.ArgError(n, "value has no literal form")
	return ""
}

// numberLiteral writes f as Lua 5.4's %q does: gopher-lua has no integer
// subtype, so a float with an integer value is written as the integer.
func numberLiteral(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "1e9999"
	case math.IsInf(f, -1):
		return "-1e9999"
	case math.IsNaN(f):
		return "(0/0)"
	case f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64:
		return strconv.FormatInt(int64(f), 10)
	}
	s := strconv.FormatFloat(f, 'x', -1, 64) // 0x1.8p+01: C's %a has no leading zero in the exponent
	if i := strings.LastIndexAny(s, "+-"); i > 0 && i+2 < len(s) && s[i+1] == '0' {
		s = s[:i+1] + s[i+2:]
	}
	return s
}

// quote is Lua 5.4's quoted string: '"', '\\' and a newline escaped with a
// backslash, a control byte as \ and its decimal code (three digits when
// a digit follows).
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '\n':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteByte('\\')
			if i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				b.WriteString(strconv.FormatInt(int64(c)+1000, 10)[1:])
			} else {
				b.WriteString(strconv.Itoa(int(c)))
			}
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
