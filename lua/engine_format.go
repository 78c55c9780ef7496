package lua

import (
	"math"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// Lua 5.4's string.format("%q", v), which memcached's proxy runs route
// files with, writes v as a literal Lua reads back: a number or a boolean
// bare (17, true, nil), a string quoted with control bytes as decimal
// escapes. gopher-lua (Lua 5.1) quotes whatever it is given as a string
// ("17", "true"). format5_4 rewrites each bare %q of a format into %s of
// the argument's 5.4 literal and hands the rest to gopher-lua's format;
// a format without %q costs one substring search.

// wrapFormat replaces string.format in str by format5_4 around orig.
func wrapFormat(L *glua.LState, str *glua.LTable) {
	orig := str.RawGetString("format").(*glua.LFunction).GFunction
	str.RawSetString("format", L.NewFunction(func(L *glua.LState) int {
		if f, ok := L.Get(1).(glua.LString); ok && strings.Contains(string(f), "%q") {
			L.Replace(1, glua.LString(quoteArgs(L, string(f))))
		}
		return orig(L)
	}))
}

// quoteArgs replaces, on L's stack, the argument of each bare %q of f by
// its Lua 5.4 literal and returns f with those directives made %s.
func quoteArgs(L *glua.LState, f string) string {
	b := []byte(f)
	arg := 1
	for i := 0; i < len(b); i++ {
		if b[i] != '%' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '%' {
			i++
			continue
		}
		arg++
		j := i + 1
		for j < len(b) && strings.IndexByte("-+ #0123456789.", b[j]) >= 0 {
			j++
		}
		if j == i+1 && j < len(b) && b[j] == 'q' && arg <= L.GetTop() {
			L.Replace(arg, glua.LString(literal(L, arg)))
			b[j] = 's'
		}
		i = j
	}
	return string(b)
}

// literal is argument n written as Lua 5.4's %q writes it.
func literal(L *glua.LState, n int) string {
	switch v := L.Get(n).(type) {
	case glua.LString:
		return quote5_4(string(v))
	case glua.LNumber:
		return numberLiteral(float64(v))
	case glua.LBool, *glua.LNilType:
		return v.String()
	}
	L.ArgError(n, "value has no literal form")
	return ""
}

// numberLiteral writes an integral number as an integer and any other as
// a hexadecimal float, as 5.4 writes its integers and floats.
func numberLiteral(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "1e9999"
	case math.IsInf(f, -1):
		return "-1e9999"
	case math.IsNaN(f):
		return "(0/0)"
	case f == math.Trunc(f) && math.Abs(f) < 1<<63:
		return strconv.FormatInt(int64(f), 10)
	}
	s := strconv.FormatFloat(f, 'x', -1, 64) // 0x1.8p+00; C's %a: 0x1.8p+0
	mant, exp, _ := strings.Cut(s, "p")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	if digits == "" {
		digits = "0"
	}
	return mant + "p" + sign + digits
}

// quote5_4 quotes s as Lua 5.4's %q: '"', '\\' and a newline escaped by
// a backslash, every other control byte as \N (\00N before a digit).
func quote5_4(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '\n':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\')
			if i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				b = append(b, '0'+c/100, '0'+c/10%10, '0'+c%10)
			} else {
				b = strconv.AppendInt(b, int64(c), 10)
			}
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
