package sentinel

import (
	"bufio"
	"errors"
	"strconv"
)

// Bounds on what readValue accepts. Sentinel's replies are small: an
// address, a role, a pub/sub message naming two addresses. A ROLE reply
// of a master lists its replicas, three fields each.
const (
	maxLine     = 4 << 10  // a simple string, error or integer line
	maxBulk     = 64 << 10 // a bulk string
	maxElements = 1024     // elements of one array
	maxDepth    = 3        // nesting of arrays (ROLE: array of arrays)
)

// value is one RESP2 reply read into a tree. kind is '+', '-', ':', '$'
// or '*'; a null bulk string or array has null set.
type value struct {
	kind byte
	null bool
	str  string
	num  int64
	arr  []value
}

// readValue reads one reply from r. Everything it reads is bounded (see
// maxLine and the others), so a broken or hostile peer cannot make it
// allocate much; any violation is errBadReply, after which r's position is
// lost and its connection must be closed.
func readValue(r *bufio.Reader) (value, error) { return readDepth(r, 0) }

// readDepth reads one reply nested depth arrays deep.
func readDepth(r *bufio.Reader, depth int) (value, error) {
	line, err := readLine(r)
	if err != nil {
		return value{}, err
	}
	if len(line) == 0 {
		return value{}, badReply("empty line")
	}
	kind, rest := line[0], string(line[1:])
	switch kind {
	case '+', '-':
		return value{kind: kind, str: rest}, nil
	case ':':
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return value{}, badReply("integer %q", rest)
		}
		return value{kind: kind, num: n}, nil
	case '$':
		return readBulk(r, rest)
	case '*':
		return readArray(r, rest, depth)
	}
	return value{}, badReply("unknown type %q", kind)
}

// readBulk reads a bulk string whose length line, after its '$', is size.
func readBulk(r *bufio.Reader, size string) (value, error) {
	n, err := length(size, maxBulk)
	if err != nil || n < 0 {
		return value{kind: '$', null: n < 0}, err
	}
	buf := make([]byte, n+2)
	if _, err := readFull(r, buf); err != nil {
		return value{}, err
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return value{}, badReply("bulk string not followed by CRLF")
	}
	return value{kind: '$', str: string(buf[:n])}, nil
}

// readArray reads an array, depth arrays deep, whose count line, after
// its '*', is count.
func readArray(r *bufio.Reader, count string, depth int) (value, error) {
	n, err := length(count, maxElements)
	if err != nil || n < 0 {
		return value{kind: '*', null: n < 0}, err
	}
	if depth >= maxDepth {
		return value{}, badReply("arrays nested deeper than %d", maxDepth)
	}
	v := value{kind: '*', arr: make([]value, 0, min(n, 16))}
	for range n {
		e, err := readDepth(r, depth+1)
		if err != nil {
			return value{}, err
		}
		v.arr = append(v.arr, e)
	}
	return v, nil
}

// length reads a bulk or array length: -1 (null) or 0..limit.
func length(s string, limit int) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil || n < -1:
		return 0, badReply("length %q", s)
	case n > limit:
		return 0, badReply("length %d over %d", n, limit)
	}
	return n, nil
}

// readLine returns one line without its CRLF, at most maxLine bytes; the
// slice is valid until the next read from r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxLine+2:
		return nil, badReply("line longer than %d bytes", maxLine)
	case err != nil:
		return nil, err
	case len(line) < 2 || line[len(line)-2] != '\r':
		return nil, badReply("line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// appendCommand appends args as a RESP array of bulk strings, the form
// every command is sent in.
func appendCommand(dst []byte, args ...string) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// appendValue encodes v as RESP2 (the fuzz target's round trip).
func appendValue(dst []byte, v value) []byte {
	switch {
	case v.null && v.kind == '$':
		return append(dst, "$-1\r\n"...)
	case v.null:
		return append(dst, "*-1\r\n"...)
	}
	dst = append(dst, v.kind)
	switch v.kind {
	case '+', '-':
		dst = append(dst, v.str...)
	case ':':
		dst = strconv.AppendInt(dst, v.num, 10)
	case '$':
		dst = strconv.AppendInt(dst, int64(len(v.str)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, v.str...)
	case '*':
		dst = strconv.AppendInt(dst, int64(len(v.arr)), 10)
		dst = append(dst, '\r', '\n')
		for _, e := range v.arr {
			dst = appendValue(dst, e)
		}
		return dst
	}
	return append(dst, '\r', '\n')
}

// isString reports whether v is a bulk or simple string (a null bulk
// string too: check null where it matters).
func (v value) isString() bool { return v.kind == '$' || v.kind == '+' }

// strings returns the elements of an array of bulk or simple strings, and
// false for anything else.
func (v value) strings() ([]string, bool) {
	if v.kind != '*' || v.null {
		return nil, false
	}
	out := make([]string, len(v.arr))
	for i, e := range v.arr {
		if !e.isString() || e.null {
			return nil, false
		}
		out[i] = e.str
	}
	return out, true
}

// err returns an error reply as a *ReplyError, else nil.
func (v value) err() error {
	if v.kind == '-' {
		return &ReplyError{Msg: v.str}
	}
	return nil
}

// arrayHead returns the first element of an array when it is a string.
func (v value) arrayHead() (string, bool) {
	if v.kind != '*' || v.null || len(v.arr) == 0 || !v.arr[0].isString() {
		return "", false
	}
	return v.arr[0].str, true
}
