package main

import (
	"bufio"
	"bytes"
	"strconv"
)

// textProto is memcached's text protocol: "set KEY 0 0 SIZE" / "STORED",
// "get KEY..." / "VALUE KEY FLAGS SIZE" ... "END".
type textProto struct{ scratch, key []byte }

var _ protocol = (*textProto)(nil)

func (*textProto) appendSetHead(dst, key []byte, size int) []byte {
	dst = append(dst, "set "...)
	dst = append(dst, key...)
	dst = append(dst, " 0 0 "...)
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, "\r\n"...)
}

func (*textProto) appendGet(dst []byte, keys [][]byte) []byte {
	dst = append(dst, "get"...)
	for _, k := range keys {
		dst = append(dst, ' ')
		dst = append(dst, k...)
	}
	return append(dst, "\r\n"...)
}

func (*textProto) readSet(r *bufio.Reader) error {
	line, err := readLine(r)
	switch {
	case err != nil:
		return err
	case bytes.Equal(line, []byte("STORED")):
		return nil
	case isErrorLine(line), bytes.Equal(line, []byte("NOT_STORED")),
		bytes.Equal(line, []byte("EXISTS")), bytes.Equal(line, []byte("NOT_FOUND")):
		return wrongReply("set", line)
	}
	return brokenf("set: unexpected reply %q", abbrev(line))
}

func (p *textProto) readGet(r *bufio.Reader, keys [][]byte, hit func(int, []byte)) error {
	cur := keyCursor{keys: keys}
	var wrong error
	for {
		line, err := readLine(r)
		switch {
		case err != nil:
			return err
		case bytes.Equal(line, []byte("END")):
			return wrong
		case isErrorLine(line):
			return wrongReply("get", line)
		}
		rest, ok := bytes.CutPrefix(line, []byte("VALUE "))
		if !ok {
			return brokenf("get: unexpected reply %q", abbrev(line))
		}
		key, rest := nextToken(rest)
		_, rest = nextToken(rest) // flags
		sizeTok, _ := nextToken(rest)
		size, ok := parseUint(sizeTok)
		if !ok || len(key) == 0 {
			return brokenf("get: bad VALUE line %q", abbrev(line))
		}
		// The key points into r's buffer, which readData may overwrite.
		p.key = append(p.key[:0], key...)
		data, err := readData(r, &p.scratch, size)
		if err != nil {
			return err
		}
		if pos, ok := cur.find(p.key); ok {
			hit(pos, data)
		} else if wrong == nil {
			wrong = wrongReply("get: key not asked for, repeated or out of order", p.key)
		}
	}
}
