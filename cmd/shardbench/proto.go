package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// protocol encodes the generator's requests and decodes their replies for
// one wire protocol. An instance belongs to one connection (it keeps a
// scratch buffer for values); the bytes passed to a hit callback are valid
// only during the call.
//
// A decoder returns nil for a right reply; a *replyError for a wrong reply
// that it read completely, so the stream is still in step and the next reply
// can be read; and any other error when the stream is broken (an I/O error,
// a reply whose framing cannot be trusted), after which the connection must
// be dropped.
type protocol interface {
	// appendSetHead appends a set of key with a value of size bytes, up to
	// the value; the caller appends the value and then "\r\n".
	appendSetHead(dst, key []byte, size int) []byte
	// appendGet appends a read of keys: a get, or a multi-get when there
	// is more than one.
	appendGet(dst []byte, keys [][]byte) []byte
	// readSet reads a set's reply.
	readSet(r *bufio.Reader) error
	// readGet reads the reply to appendGet(keys), calling hit with the
	// position in keys and the value of every key found. Keys it does not
	// report are misses.
	readGet(r *bufio.Reader, keys [][]byte, hit func(pos int, value []byte)) error
}

// protocols maps -proto names to constructors.
var protocols = map[string]func() protocol{
	"text": func() protocol { return &textProto{} },
	"meta": func() protocol { return &metaProto{} },
	"resp": func() protocol { return &respProto{} },
}

// replyError is a wrong reply read completely: the stream is still in step.
type replyError struct{ msg string }

func (e *replyError) Error() string { return e.msg }

// wrongReply returns a *replyError quoting the reply line.
func wrongReply(what string, line []byte) error {
	return &replyError{msg: fmt.Sprintf("%s: %q", what, abbrev(line))}
}

// brokenf returns an error for a stream that cannot be trusted any more.
func brokenf(format string, args ...any) error {
	return fmt.Errorf("broken stream: "+format, args...)
}

// isReplyError reports whether err leaves the stream in step.
func isReplyError(err error) bool {
	var re *replyError
	return errors.As(err, &re)
}

// readBufferSize is the size of a connection's read buffer, which bounds a
// reply line (values are read past it).
const readBufferSize = 16 << 10

// readLine returns the next line without its "\r\n", valid until the next
// read from r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, brokenf("reply line longer than %d bytes", r.Size())
	case err == io.EOF && len(line) == 0:
		return nil, io.EOF
	case err != nil:
		return nil, err
	case len(line) < 2 || line[len(line)-2] != '\r':
		return nil, brokenf("reply line %q does not end in \\r\\n", abbrev(line))
	}
	return line[:len(line)-2], nil
}

// readData reads n bytes of data and the "\r\n" after them into *scratch
// (grown as needed) and returns the data.
func readData(r *bufio.Reader, scratch *[]byte, n int) ([]byte, error) {
	if cap(*scratch) < n+2 {
		*scratch = make([]byte, n+2)
	}
	buf := (*scratch)[:n+2]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return nil, brokenf("%d bytes of data not followed by \\r\\n", n)
	}
	return buf[:n], nil
}

// parseUint parses a non-negative decimal that fits an int32.
func parseUint(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 1<<31-1
}

// nextToken splits off the first space-separated token of line.
func nextToken(line []byte) (tok, rest []byte) {
	line = bytes.TrimLeft(line, " ")
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return line, nil
	}
	return line[:i], line[i+1:]
}

// isErrorLine reports whether line is one of memcached's error replies,
// which answer a whole request.
func isErrorLine(line []byte) bool {
	return bytes.Equal(line, []byte("ERROR")) ||
		bytes.HasPrefix(line, []byte("SERVER_ERROR")) ||
		bytes.HasPrefix(line, []byte("CLIENT_ERROR"))
}

// keyCursor maps the keys of a multi-get reply, which come in request order
// with misses left out, to their positions in the request.
type keyCursor struct {
	keys [][]byte
	next int
}

// find returns key's position, at or after the previous one's, or false.
func (c *keyCursor) find(key []byte) (int, bool) {
	for p := c.next; p < len(c.keys); p++ {
		if bytes.Equal(c.keys[p], key) {
			c.next = p + 1
			return p, true
		}
	}
	return 0, false
}
