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
		return p.readGetReply(r, line, hit)
	}
	return p.readMGetReply(r, line, len(keys), hit)
}

// readGetReply reads the rest of a GET's reply, whose header is line.
func (p *respProto) readGetReply(r *bufio.Reader, line []byte, hit func(int, []byte)) error {
	if len(line) == 0 || line[0] != '$' {
		return unexpected(r, "GET", line)
	}
	data, found, err := p.readBulk(r, line)
	if found {
		hit(0, data)
	}
	return err
}

// readMGetReply reads the rest of an MGET's reply for nkeys keys, whose
// header is line. An array of another length is read to its end, its hits
// left out: their positions mean nothing.
func (p *respProto) readMGetReply(r *bufio.Reader, line []byte, nkeys int, hit func(int, []byte)) error {
	n, err := mgetLength(r, line)
	if err != nil {
		return err
	}
	var wrong error
	misfit := n != nkeys
	if misfit {
		wrong = wrongReply("MGET: array of "+strconv.Itoa(n)+" for "+
			strconv.Itoa(nkeys)+" keys", line)
	}
	for i := range n {
		data, found, bad, err := p.readMGetElem(r)
		if err != nil {
			return err
		}
		if wrong == nil {
			wrong = bad
		}
		if found && !misfit {
			hit(i, data)
		}
	}
	return wrong
}

// mgetLength returns the length of the array an MGET's reply header line
// announces, or the error of a reply that is no array.
func mgetLength(r *bufio.Reader, line []byte) (int, error) {
	if len(line) == 0 || line[0] != '*' {
		return 0, unexpected(r, "MGET", line)
	}
	n, ok := parseUint(line[1:])
	if !ok {
		if bytes.Equal(line, []byte("*-1")) {
			return 0, wrongReply("MGET", line)
		}
		return 0, brokenf("MGET: bad array header %q", abbrev(line))
	}
	return n, nil
}

// readMGetElem reads one element of an MGET's array: data and found as
// readBulk returns them, or, for an element that is no bulk string, the
// *replyError wrong once it is skipped. err is a broken stream.
func (p *respProto) readMGetElem(r *bufio.Reader) (data []byte, found bool, wrong, err error) {
	elem, err := readLine(r)
	if err != nil {
		return nil, false, nil, err
	}
	if len(elem) == 0 || elem[0] != '$' {
		err := unexpected(r, "MGET element", elem)
		if isReplyError(err) {
			return nil, false, err, nil
		}
		return nil, false, nil, err
	}
	data, found, err = p.readBulk(r, elem)
	return data, found, nil, err
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
