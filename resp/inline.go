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
		var ok bool
		if i, ok = p.unquoteArg(line, i); !ok {
			return false
		}
		p.args = append(p.args, span{start, len(p.inline)})
	}
}

// at is line[i] read as a C string: NUL at the end.
func at(line []byte, i int) byte {
	if i < len(line) {
		return line[i]
	}
	return 0
}

// unquoteArg appends the argument that starts at line[i] to p.inline and
// returns the offset after it and its separator. An argument's plain
// bytes end at a space, a tab, a newline or the end; a quote ends it
// with its closing quote.
func (p *parser) unquoteArg(line []byte, i int) (int, bool) {
	for {
		switch c := at(line, i); c {
		case 0:
			return i, true
		case ' ', '\n', '\r', '\t':
			return i + 1, true
		case '"':
			return p.unquoteDouble(line, i+1)
		case '\'':
			return p.unquoteSingle(line, i+1)
		default:
			p.inline = append(p.inline, c)
			i++
		}
	}
}

// unquoteDouble appends the double-quoted text from line[i] to its
// closing quote to p.inline, escapes replaced.
func (p *parser) unquoteDouble(line []byte, i int) (int, bool) {
	for {
		c := at(line, i)
		switch {
		case c == '\\' && at(line, i+1) == 'x' && isHex(at(line, i+2)) && isHex(at(line, i+3)):
			p.inline = append(p.inline, unhex(at(line, i+2))<<4|unhex(at(line, i+3)))
			i += 4
		case c == '\\' && at(line, i+1) != 0:
			p.inline = append(p.inline, unescape(at(line, i+1)))
			i += 2
		case c == '"':
			return closeQuote(line, i)
		case c == 0:
			return i, false
		default:
			p.inline = append(p.inline, c)
			i++
		}
	}
}

// unquoteSingle appends the single-quoted text from line[i] to its
// closing quote to p.inline, \' replaced.
func (p *parser) unquoteSingle(line []byte, i int) (int, bool) {
	for {
		c := at(line, i)
		switch {
		case c == '\\' && at(line, i+1) == '\'':
			p.inline = append(p.inline, '\'')
			i += 2
		case c == '\'':
			return closeQuote(line, i)
		case c == 0:
			return i, false
		default:
			p.inline = append(p.inline, c)
			i++
		}
	}
}

// closeQuote returns the offset after the closing quote at line[i], which
// must be followed by a space or the end.
func closeQuote(line []byte, i int) (int, bool) {
	if next := at(line, i+1); next != 0 && !isSpace(next) {
		return i, false
	}
	return i + 1, true
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
