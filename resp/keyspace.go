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
// returned one, each as likely; nil ("$-1") when none did (every server
// empty). A key is not picked uniformly from all keys: a server with few
// keys gives each of them a larger chance.
func mergeRandom(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var have [16]int
	some := have[:0]
	for i, r := range replies {
		m, v := redcon.ReadNextRESP(r.Raw)
		if m == 0 || v.Type != redcon.Bulk {
			return dst, false
		}
		if v.Data != nil {
			some = append(some, i)
		}
	}
	if len(some) == 0 {
		return append(dst, "$-1\r\n"...), true
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
func canonicalLibraries(raw []byte) ([]string, bool) {
	m, v := redcon.ReadNextRESP(raw)
	if m == 0 || v.Type != redcon.Array {
		return nil, false
	}
	libs := make([]string, 0, v.Count)
	ok := true
	v.ForEach(func(lib redcon.RESP) bool {
		var s string
		if s, ok = canonicalLibrary(lib); ok {
			libs = append(libs, s)
		}
		return ok
	})
	slices.Sort(libs)
	return libs, ok
}

// canonicalLibrary is one library of canonicalLibraries: its field-value
// pairs as they are, but the value of "functions" with its elements
// sorted.
func canonicalLibrary(lib redcon.RESP) (string, bool) {
	if lib.Type != redcon.Array || lib.Count%2 != 0 {
		return "", false
	}
	var b strings.Builder
	field := ""
	i := 0
	lib.ForEach(func(e redcon.RESP) bool {
		if i%2 == 0 {
			field = string(e.Data)
			b.Write(e.Raw)
		} else if field == "functions" && e.Type == redcon.Array {
			var fns []string
			e.ForEach(func(f redcon.RESP) bool {
				fns = append(fns, string(f.Raw))
				return true
			})
			slices.Sort(fns)
			b.WriteString(strings.Join(fns, ""))
		} else {
			b.Write(e.Raw)
		}
		i++
		return true
	})
	return b.String(), true
}
