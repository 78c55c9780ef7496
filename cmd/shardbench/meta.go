package main

import (
	"bufio"
	"bytes"
	"strconv"
)

// metaProto is memcached's meta protocol: "ms KEY SIZE" / "HD", and
// "mg KEY k v" / "VA SIZE kKEY" or "EN". A multi-get is one quiet
// "mg KEY k v q" per key and a closing "mn": hits come back in order, misses
// are silent, and "MN" ends the reply. The k flag makes the server name the
// key it answers for, so a value returned for the wrong key is caught.
type metaProto struct{ scratch, key []byte }

var _ protocol = (*metaProto)(nil)

func (*metaProto) appendSetHead(dst, key []byte, size int) []byte {
	dst = append(dst, "ms "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, "\r\n"...)
}

func (*metaProto) appendGet(dst []byte, keys [][]byte) []byte {
	if len(keys) == 1 {
		dst = append(dst, "mg "...)
		dst = append(dst, keys[0]...)
		return append(dst, " k v\r\n"...)
	}
	for _, k := range keys {
		dst = append(dst, "mg "...)
		dst = append(dst, k...)
		dst = append(dst, " k v q\r\n"...)
	}
	return append(dst, "mn\r\n"...)
}

func (*metaProto) readSet(r *bufio.Reader) error {
	line, err := readLine(r)
	switch {
	case err != nil:
		return err
	case isMetaCode(line, "HD"):
		return nil
	case isErrorLine(line), isMetaCode(line, "NS"), isMetaCode(line, "EX"), isMetaCode(line, "NF"):
		return wrongReply("ms", line)
	}
	return brokenf("ms: unexpected reply %q", abbrev(line))
}

func (p *metaProto) readGet(r *bufio.Reader, keys [][]byte, hit func(int, []byte)) error {
	if len(keys) == 1 {
		return p.readOne(r, keys[0], hit)
	}
	cur := keyCursor{keys: keys}
	var wrong error
	for {
		line, err := readLine(r)
		switch {
		case err != nil:
			return err
		case bytes.Equal(line, []byte("MN")):
			return wrong
		case bytes.HasPrefix(line, []byte("VA ")):
			key, data, err := p.readValue(r, line)
			if err != nil {
				return err
			}
			if pos, ok := cur.find(key); ok {
				hit(pos, data)
			} else if wrong == nil {
				wrong = wrongReply("mg: key not asked for, repeated or out of order", key)
			}
		case isErrorLine(line), isMetaCode(line, "EN"), isMetaCode(line, "HD"):
			// A quiet get shows errors (and never EN or HD); each answers
			// one mg, and MN still ends the reply.
			if wrong == nil {
				wrong = wrongReply("mg", line)
			}
		default:
			return brokenf("mg: unexpected reply %q", abbrev(line))
		}
	}
}

// readOne reads the reply to a single, non-quiet mg.
func (p *metaProto) readOne(r *bufio.Reader, key []byte, hit func(int, []byte)) error {
	line, err := readLine(r)
	switch {
	case err != nil:
		return err
	case isMetaCode(line, "EN"): // memcached 1.6 echoes the k flag here too
		if got := metaKey(line); got != nil && !bytes.Equal(got, key) {
			return wrongReply("mg: miss for another key", got)
		}
		return nil
	case bytes.HasPrefix(line, []byte("VA ")):
		got, data, err := p.readValue(r, line)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, key) {
			return wrongReply("mg: answered for another key", got)
		}
		hit(0, data)
		return nil
	case isErrorLine(line), isMetaCode(line, "HD"):
		return wrongReply("mg", line)
	}
	return brokenf("mg: unexpected reply %q", abbrev(line))
}

// readValue parses "VA SIZE FLAGS..." and reads the data. It returns the key
// of the k flag (nil if absent) and the data.
func (p *metaProto) readValue(r *bufio.Reader, line []byte) (key, data []byte, err error) {
	sizeTok, flags := nextToken(line[len("VA "):])
	size, ok := parseUint(sizeTok)
	if !ok {
		return nil, nil, brokenf("mg: bad VA line %q", abbrev(line))
	}
	key = metaKey(flags)
	// The key points into r's buffer, which readData may overwrite.
	p.key = append(p.key[:0], key...)
	data, err = readData(r, &p.scratch, size)
	return p.key, data, err
}

// isMetaCode reports whether line is the two-letter reply code, alone or
// followed by flags.
func isMetaCode(line []byte, code string) bool {
	return bytes.HasPrefix(line, []byte(code)) && (len(line) == len(code) || line[len(code)] == ' ')
}

// metaKey returns the value of the k flag among a reply line's tokens, or
// nil.
func metaKey(line []byte) []byte {
	for len(line) > 0 {
		var f []byte
		f, line = nextToken(line)
		if len(f) > 1 && f[0] == 'k' {
			return f[1:]
		}
	}
	return nil
}
