package main

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
)

// respProto is Redis's RESP2: SET KEY VALUE / "+OK", GET KEY / a bulk string
// or nil, MGET KEY... / an array of bulk strings and nils in request order.
type respProto struct{ scratch []byte }

var _ protocol = (*respProto)(nil)

// maxRESPDepth bounds the nesting of an unexpected reply being skipped.
const maxRESPDepth = 8

func (*respProto) appendSetHead(dst, key []byte, size int) []byte {
	dst = append(dst, "*3\r\n$3\r\nSET\r\n"...)
	dst = appendBulk(dst, key)
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, "\r\n"...)
}

func (*respProto) appendGet(dst []byte, keys [][]byte) []byte {
	if len(keys) == 1 {
		dst = append(dst, "*2\r\n$3\r\nGET\r\n"...)
		return appendBulk(dst, keys[0])
	}
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(keys)+1), 10)
	dst = append(dst, "\r\n$4\r\nMGET\r\n"...)
	for _, k := range keys {
		dst = appendBulk(dst, k)
	}
	return dst
}

// appendBulk appends b as a RESP bulk string.
func appendBulk(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

func (*respProto) readSet(r *bufio.Reader) error {
	line, err := readLine(r)
	switch {
	case err != nil:
		return err
	case bytes.Equal(line, []byte("+OK")):
		return nil
	}
	return unexpected(r, "SET", line)
}

func (p *respProto) readGet(r *bufio.Reader, keys [][]byte, hit func(int, []byte)) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if len(keys) == 1 {
		if len(line) == 0 || line[0] != '$' {
			return unexpected(r, "GET", line)
		}
		data, found, err := p.readBulk(r, line)
		if found {
			hit(0, data)
		}
		return err
	}
	if len(line) == 0 || line[0] != '*' {
		return unexpected(r, "MGET", line)
	}
	n, ok := parseUint(line[1:])
	if !ok {
		if bytes.Equal(line, []byte("*-1")) {
			return wrongReply("MGET", line)
		}
		return brokenf("MGET: bad array header %q", abbrev(line))
	}
	var wrong error
	misfit := n != len(keys) // then positions mean nothing
	if misfit {
		wrong = wrongReply("MGET: array of "+strconv.Itoa(n)+" for "+
			strconv.Itoa(len(keys))+" keys", line)
	}
	for i := range n {
		elem, err := readLine(r)
		if err != nil {
			return err
		}
		if len(elem) == 0 || elem[0] != '$' {
			if err := unexpected(r, "MGET element", elem); !isReplyError(err) {
				return err
			} else if wrong == nil {
				wrong = err
			}
			continue
		}
		data, found, err := p.readBulk(r, elem)
		if err != nil {
			return err
		}
		if found && !misfit {
			hit(i, data)
		}
	}
	return wrong
}

// readBulk reads the bulk string whose header is line. found is false for
// nil (a miss).
func (p *respProto) readBulk(r *bufio.Reader, line []byte) (data []byte, found bool, err error) {
	if bytes.Equal(line, []byte("$-1")) {
		return nil, false, nil
	}
	n, ok := parseUint(line[1:])
	if !ok {
		return nil, false, brokenf("bad bulk header %q", abbrev(line))
	}
	data, err = readData(r, &p.scratch, n)
	return data, err == nil, err
}

// unexpected handles a reply of the wrong type: it skips the rest of the
// reply when its framing is known and returns a *replyError (the stream stays
// in step), or returns a broken-stream error.
func unexpected(r *bufio.Reader, cmd string, line []byte) error {
	msg := wrongReply(cmd, line)
	if err := skipRESP(r, line, 0); err != nil {
		return err
	}
	return msg
}

// skipRESP consumes what follows the header line of a RESP2 value.
func skipRESP(r *bufio.Reader, line []byte, depth int) error {
	if len(line) == 0 {
		return brokenf("empty reply line")
	}
	switch line[0] {
	case '+', '-', ':':
		return nil
	case '$', '*':
		if bytes.Equal(line[1:], []byte("-1")) {
			return nil
		}
		n, ok := parseUint(line[1:])
		if !ok || depth >= maxRESPDepth {
			return brokenf("bad reply header %q", abbrev(line))
		}
		if line[0] == '$' {
			_, err := r.Discard(n + 2)
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		for range n {
			elem, err := readLine(r)
			if err != nil {
				return err
			}
			if err := skipRESP(r, elem, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return brokenf("unknown reply type %q", abbrev(line))
}
