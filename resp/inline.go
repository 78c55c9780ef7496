package resp

// splitArgs splits an inline command line (without its newline; it holds
// no NUL) into arguments as redis-server's sdssplitargs does: arguments
// separated by white space; "double quotes" with \n \r \t \b \a \" \\ and
// \xHH escapes; 'single quotes' with \' only; a closing quote must be
// followed by a space or the end. The arguments are unquoted into p.inline
// and p.args points at them. It reports false for unbalanced quotes.
func (p *parser) splitArgs(line []byte) bool {
	p.inline = p.inline[:0]
	p.args = p.args[:0]
	p.src = nil
	at := func(i int) byte { // the line as a C string: NUL at the end
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			p.src = p.inline
			return true
		}
		start := len(p.inline)
		var inDouble, inSingle, done bool
		for !done {
			c := at(i)
			switch {
			case inDouble:
				switch {
				case c == '\\' && at(i+1) == 'x' && isHex(at(i+2)) && isHex(at(i+3)):
					p.inline = append(p.inline, unhex(at(i+2))<<4|unhex(at(i+3)))
					i += 3
				case c == '\\' && at(i+1) != 0:
					i++
					p.inline = append(p.inline, unescape(at(i)))
				case c == '"':
					if next := at(i + 1); next != 0 && !isSpace(next) {
						return false
					}
					done = true
				case c == 0:
					return false
				default:
					p.inline = append(p.inline, c)
				}
			case inSingle:
				switch {
				case c == '\\' && at(i+1) == '\'':
					i++
					p.inline = append(p.inline, '\'')
				case c == '\'':
					if next := at(i + 1); next != 0 && !isSpace(next) {
						return false
					}
					done = true
				case c == 0:
					return false
				default:
					p.inline = append(p.inline, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inDouble = true
				case '\'':
					inSingle = true
				default:
					p.inline = append(p.inline, c)
				}
			}
			if at(i) != 0 {
				i++
			}
		}
		p.args = append(p.args, span{start, len(p.inline)})
	}
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unescape is the byte a backslash escape in double quotes stands for.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
