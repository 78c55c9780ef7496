package memcache

import (
	"strings"
	"testing"
)

// metaGetWritesSlow is MetaGetWrites by the book: a flag token after the
// key starting with N or T, tokens separated by spaces as memcached
// separates them.
func metaGetWritesSlow(wire []byte) bool {
	line, _, _ := strings.Cut(string(wire), "\n")
	line, _, _ = strings.Cut(line, "\r")
	i := 0
	for _, tok := range strings.Split(line, " ") {
		if tok == "" {
			continue
		}
		if i >= 2 && (tok[0] == 'N' || tok[0] == 'T') {
			return true
		}
		i++
	}
	return false
}

func FuzzMetaGetWrites(f *testing.F) {
	for _, s := range []string{"mg k v\r\n", "mg k T1 v\r\n", "mg  N  x\r\n", "mg k\r\nmn\r\n", "mg k v\r\nT"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		if got, want := MetaGetWrites(wire), metaGetWritesSlow(wire); got != want {
			t.Fatalf("%q: %t, want %t", wire, got, want)
		}
	})
}
