package cluster

import (
	"bytes"
	"strconv"
)

// value is one RESP2 reply read into a tree, for the few replies the
// cluster package reads itself (CLUSTER SHARDS, CLUSTER SLOTS). The proxy
// never builds such trees for client traffic.
type value struct {
	kind byte    // '+', '-', ':', '$', '*'; '_' for a null bulk string or array
	str  []byte  // simple string, error or bulk string: a slice of the input
	num  int64   // integer
	arr  []value // array elements
}

// maxDepth bounds the nesting of a topology reply: CLUSTER SHARDS nests four
// levels deep (shards, shard map, nodes, node map).
const maxDepth = 8

// readValue reads one whole reply from b. A reply that is cut short, nested
// deeper than maxDepth, malformed, or followed by other bytes is an error.
// Every element takes at least three bytes of input, so the tree is never
// much larger than b.
func readValue(b []byte) (value, error) {
	v, n, err := readAt(b, 0, 0)
	if err != nil {
		return value{}, err
	}
	if n != len(b) {
		return value{}, errorf("%d bytes after the reply", len(b)-n)
	}
	return v, nil
}

// readAt reads the reply at b[pos:], nested depth arrays deep, and
// returns it and the offset after it.
func readAt(b []byte, pos, depth int) (value, int, error) {
	if depth > maxDepth {
		return value{}, 0, errorf("reply nested deeper than %d", maxDepth)
	}
	if pos >= len(b) {
		return value{}, 0, errorf("reply cut short")
	}
	i := bytes.Index(b[pos:], []byte("\r\n"))
	if i < 1 {
		return value{}, 0, errorf("reply line not terminated by \\r\\n")
	}
	kind, line, next := b[pos], b[pos+1:pos+i], pos+i+2
	switch kind {
	case '+', '-':
		return value{kind: kind, str: line}, next, nil
	case ':':
		n, err := strconv.ParseInt(string(line), 10, 64)
		if err != nil {
			return value{}, 0, errorf("bad integer %q", line)
		}
		return value{kind: kind, num: n}, next, nil
	case '$':
		return readBulk(b, line, next)
	case '*':
		return readArray(b, line, next, depth)
	}
	return value{}, 0, errorf("unexpected reply type %q", kind)
}

// readBulk reads the bulk string whose length line (after its '$') is
// line and whose data starts at b[next:].
func readBulk(b, line []byte, next int) (value, int, error) {
	n, err := strconv.Atoi(string(line))
	switch {
	case err == nil && n == -1:
		return value{kind: '_'}, next, nil
	case err != nil || n < 0 || n > len(b)-next-2:
		return value{}, 0, errorf("bad bulk length %q", line)
	case b[next+n] != '\r' || b[next+n+1] != '\n':
		return value{}, 0, errorf("bulk string not followed by \\r\\n")
	}
	return value{kind: '$', str: b[next : next+n]}, next + n + 2, nil
}

// readArray reads the array, depth arrays deep, whose count line (after
// its '*') is line and whose elements start at b[next:].
func readArray(b, line []byte, next, depth int) (value, int, error) {
	n, err := strconv.Atoi(string(line))
	switch {
	case err == nil && n == -1:
		return value{kind: '_'}, next, nil
	case err != nil || n < 0 || n > (len(b)-next)/3:
		return value{}, 0, errorf("bad array length %q", line)
	}
	v := value{kind: '*', arr: make([]value, n)}
	for j := range v.arr {
		var err error
		if v.arr[j], next, err = readAt(b, next, depth+1); err != nil {
			return value{}, 0, err
		}
	}
	return v, next, nil
}

// text returns a string-like value's bytes as a string, and false for
// other kinds.
func (v value) text() (string, bool) {
	switch v.kind {
	case '+', '$':
		return string(v.str), true
	}
	return "", false
}

// field returns the value after the key name in a flat RESP2 map (an array
// of alternating keys and values), as CLUSTER SHARDS sends its maps.
func (v value) field(name string) (value, bool) {
	if v.kind != '*' || len(v.arr)%2 != 0 {
		return value{}, false
	}
	for i := 0; i < len(v.arr); i += 2 {
		if k, ok := v.arr[i].text(); ok && k == name {
			return v.arr[i+1], true
		}
	}
	return value{}, false
}
