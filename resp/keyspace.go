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
// A reply is one whole value (the backend framed it), so its elements
// are the bytes after its header: only the headers are read.
func mergeArrays(dst []byte, replies []codec.Reply) ([]byte, bool) {
	n := 0
	for _, r := range replies {
		count, _, ok := readArray(r.Raw)
		if !ok {
			return dst, false
		}
		n += count
	}
	dst = redcon.AppendArray(dst, n)
	for _, r := range replies {
		_, elems, _ := readArray(r.Raw)
		dst = append(dst, elems...)
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
	vals, ok := readElements(raw)
	if !ok {
		return nil, false
	}
	libs := make([]string, len(vals))
	for i, lib := range vals {
		if libs[i], ok = canonicalLibrary(lib); !ok {
			return nil, false
		}
	}
	slices.Sort(libs)
	return libs, true
}

// canonicalLibrary is one library of canonicalLibraries: its field-value
// pairs as they are, but the value of "functions" with its elements
// sorted.
func canonicalLibrary(lib []byte) (string, bool) {
	vals, ok := readFields(lib)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(vals); i += 2 {
		field, value := vals[i], vals[i+1]
		b.Write(field)
		if name, _, _ := readString(field); string(name) == "functions" {
			if fns, ok := sortedElements(value); ok {
				b.WriteString(strings.Join(fns, ""))
				continue
			}
		}
		b.Write(value)
	}
	return b.String(), true
}

// sortedElements returns an array's elements, each whole, sorted.
func sortedElements(raw []byte) ([]string, bool) {
	vals, ok := readElements(raw)
	if !ok {
		return nil, false
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	slices.Sort(out)
	return out, true
}
