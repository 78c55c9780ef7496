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
			return p.unquote(line, i+1, '"')
		case '\'':
			return p.unquote(line, i+1, '\'')
		default:
			p.inline = append(p.inline, c)
			i++
		}
	}
}

// unquote appends the text quoted by q (a double or a single quote) from
// line[i] to its closing quote to p.inline, escapes replaced.
func (p *parser) unquote(line []byte, i int, q byte) (int, bool) {
	for {
		c := at(line, i)
		switch c {
		case 0:
			return i, false
		case q:
			return closeQuote(line, i)
		case '\\':
			if b, n := escape(line, i, q); n > 0 {
				p.inline = append(p.inline, b)
				i += n
				continue
			}
		}
		p.inline = append(p.inline, c)
		i++
	}
}

// escape reads the backslash escape at line[i] in text quoted by q and
// returns the byte it stands for and its length, 0 when it is none (the
// backslash is then itself). Double quotes have \xHH and \ before any
// byte (unescape); single quotes only \'.
func escape(line []byte, i int, q byte) (byte, int) {
	next := at(line, i+1)
	switch {
	case q == '\'':
		if next == '\'' {
			return '\'', 2
		}
	case next == 'x' && isHex(at(line, i+2)) && isHex(at(line, i+3)):
		return unhex(at(line, i+2))<<4 | unhex(at(line, i+3)), 4
	case next != 0:
		return unescape(next), 2
	}
	return 0, 0
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
