package resp

import (
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// The merges of the RouteAll commands that span every server's keys (see
// Merge). Each fails (false) on a reply of a shape the command does not
// have, and Merge then answers an error: a reply that looks whole but
// is not is worse than none.

// mergeArrays answers KEYS: every server's elements, server by server.
func mergeArrays(dst []byte, replies []codec.Reply) ([]byte, bool) {
	n := 0
	for _, r := range replies {
		m, v := redcon.ReadNextRESP(r.Raw)
		if m == 0 || v.Type != redcon.Array {
			return dst, false
		}
		n += v.Count
	}
	dst = redcon.AppendArray(dst, n)
	for _, r := range replies {
		_, v := redcon.ReadNextRESP(r.Raw)
		dst = append(dst, v.Data...)
	}
	return dst, true
}

// mergeRandom answers RANDOMKEY: the key of one of the servers that
// returned one, each as likely; nil ("$-1", in RESP3 "_") when none did
// (every server empty). A key is not picked uniformly from all keys: a
// server with few keys gives each of them a larger chance.
func mergeRandom(dst []byte, proto uint8, replies []codec.Reply) ([]byte, bool) {
	var have [16]int
	some := have[:0]
	for i, r := range replies {
		_, null, ok := readString(r.Raw)
		if !ok || r.Raw[0] != '$' && !null {
			return dst, false
		}
		if !null {
			some = append(some, i)
		}
	}
	if len(some) == 0 {
		return appendNull(dst, proto), true
	}
	return append(dst, replies[some[rand.IntN(len(some))]].Raw...), true
}

// mergeLibraries answers FUNCTION LIST: the first server's reply when
// every server has the same libraries with the same functions (and code,
// WITHCODE), whatever their order: a server lists its libraries, and a
// library its functions, in its hash table's order, which differs from
// server to server. Servers that differ fail the merge: FCALL would run
// different code depending on its keys' server, and no one list is true.
// FUNCTION LOAD REPLACE or FUNCTION FLUSH through the proxy makes them
// agree again.
func mergeLibraries(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var first []string
	for i, r := range replies {
		libs, ok := canonicalLibraries(r.Raw)
		if !ok {
			return dst, false
		}
		if i == 0 {
			first = libs
		} else if !slices.Equal(first, libs) {
			return dst, false
		}
	}
	return append(dst, replies[0].Raw...), true
}

// canonicalLibraries returns a FUNCTION LIST reply's libraries as
// strings that two servers with the same libraries give alike: each
// library's fields in order, its functions sorted; the libraries sorted.
// A library is a flat array of fields and values in RESP2, a map in
// RESP3.
func canonicalLibraries(raw []byte) ([]string, bool) {
	count, elems, ok := readArray(raw)
	if !ok {
		return nil, false
	}
	libs := make([]string, 0, min(count, len(elems)))
	for range count {
		m := nextValue(elems)
		if m == 0 {
			return nil, false
		}
		s, ok := canonicalLibrary(elems[:m])
		if !ok {
			return nil, false
		}
		libs = append(libs, s)
		elems = elems[m:]
	}
	slices.Sort(libs)
	return libs, true
}

// canonicalLibrary is one library of canonicalLibraries: its field-value
// pairs as they are, but the value of "functions" with its elements
// sorted.
func canonicalLibrary(lib []byte) (string, bool) {
	fields, rest, ok := readFields(lib)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for range fields {
		k := nextValue(rest)
		if k == 0 {
			return "", false
		}
		name, _, _ := readString(rest[:k])
		b.Write(rest[:k])
		rest = rest[k:]
		v := nextValue(rest)
		if v == 0 {
			return "", false
		}
		fns, ok := []string(nil), false
		if string(name) == "functions" {
			fns, ok = sortedElements(rest[:v])
		}
		if ok {
			b.WriteString(strings.Join(fns, ""))
		} else {
			b.Write(rest[:v])
		}
		rest = rest[v:]
	}
	return b.String(), true
}

// readFields reads the header of a field-value aggregate: a RESP2 array
// of an even count, or a RESP3 map. It returns the pairs and the bytes
// after the header.
func readFields(raw []byte) (pairs int, rest []byte, ok bool) {
	if len(raw) == 0 || raw[0] != '*' && raw[0] != '%' {
		return 0, nil, false
	}
	line, next, err := replyLine(raw, 0)
	n, nok := parseInt(line)
	switch {
	case err != nil || !nok || n < 0:
		return 0, nil, false
	case raw[0] == '%':
		return int(n), raw[next:], true
	case n%2 != 0:
		return 0, nil, false
	}
	return int(n / 2), raw[next:], true
}

// sortedElements returns an array's elements, each whole, sorted.
func sortedElements(raw []byte) ([]string, bool) {
	count, elems, ok := readArray(raw)
	if !ok {
		return nil, false
	}
	var out []string
	for range count {
		m := nextValue(elems)
		if m == 0 {
			return nil, false
		}
		out = append(out, string(elems[:m]))
		elems = elems[m:]
	}
	slices.Sort(out)
	return out, true
}
