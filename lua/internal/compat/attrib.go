// Package compat makes the Lua 5.4 that route files written for
// memcached's proxy use readable by gopher-lua, which implements Lua 5.1.
// It works on source text only and knows nothing of the proxy API.
//
// Route files commonly use one 5.4 feature the 5.1 grammar lacks:
// attributes on local variables ("local STAT_X <const> = 1"). Both
// attributes are promises the compiler checks (const) or cleanups that
// matter for to-be-closed values the proxy API never hands out (close), so
// dropping them keeps the meaning. StripAttribs blanks them before parsing,
// keeping every byte offset, so error lines and columns stay right.
package compat

// StripAttribs returns src with "<const>" and "<close>" after the names of
// a local statement replaced by spaces. Strings and comments are left
// alone. src is not modified.
func StripAttribs(src []byte) []byte {
	out := append([]byte(nil), src...)
	for i := 0; i < len(out); {
		c := out[i]
		switch {
		case c == '-' && i+1 < len(out) && out[i+1] == '-':
			i = skipComment(out, i+2)
		case c == '"' || c == '\'':
			i = skipQuoted(out, i)
		case c == '[' && longBracket(out, i) >= 0:
			i = skipLong(out, i, longBracket(out, i))
		case isIdentStart(c):
			j := i
			for j < len(out) && isIdentChar(out[j]) {
				j++
			}
			if string(out[i:j]) == "local" && (i == 0 || !isIdentChar(out[i-1])) {
				j = blankLocalAttribs(out, j)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// blankLocalAttribs handles the name list after "local" (at i) and returns
// where scanning continues.
func blankLocalAttribs(b []byte, i int) int {
	for {
		i = skipSpace(b, i)
		j := i
		for j < len(b) && isIdentChar(b[j]) {
			j++
		}
		if j == i || !isIdentStart(b[i]) || string(b[i:j]) == "function" {
			return i
		}
		i = skipSpace(b, j)
		if i < len(b) && b[i] == '<' {
			if end := attribEnd(b, i); end > 0 {
				for k := i; k < end; k++ {
					if b[k] != '\n' {
						b[k] = ' '
					}
				}
				i = skipSpace(b, end)
			}
		}
		if i >= len(b) || b[i] != ',' {
			return i
		}
		i++
	}
}

// attribEnd returns the end of "<const>" or "<close>" (spaces allowed
// inside) starting at b[i] == '<', or -1.
func attribEnd(b []byte, i int) int {
	j := skipSpace(b, i+1)
	k := j
	for k < len(b) && isIdentChar(b[k]) {
		k++
	}
	if name := string(b[j:k]); name != "const" && name != "close" {
		return -1
	}
	k = skipSpace(b, k)
	if k < len(b) && b[k] == '>' {
		return k + 1
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipComment skips a comment whose "--" ends at i.
func skipComment(b []byte, i int) int {
	if i < len(b) && b[i] == '[' {
		if level := longBracket(b, i); level >= 0 {
			return skipLong(b, i, level)
		}
	}
	for i < len(b) && b[i] != '\n' {
		i++
	}
	return i
}

// skipQuoted skips the string literal opening at i.
func skipQuoted(b []byte, i int) int {
	q := b[i]
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case q, '\n':
			return i + 1
		}
	}
	return i
}

// longBracket returns the level of the long bracket "[==[" opening at i,
// or -1.
func longBracket(b []byte, i int) int {
	j := i + 1
	for j < len(b) && b[j] == '=' {
		j++
	}
	if j < len(b) && b[j] == '[' {
		return j - i - 1
	}
	return -1
}

// skipLong skips a long string or comment of the given level opening at i.
func skipLong(b []byte, i, level int) int {
	for i += level + 2; i < len(b); i++ {
		if b[i] != ']' {
			continue
		}
		j := i + 1
		for j < len(b) && b[j] == '=' {
			j++
		}
		if j < len(b) && b[j] == ']' && j-i-1 == level {
			return j + 1
		}
	}
	return len(b)
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }
