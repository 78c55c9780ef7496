package store

import (
	"bytes"
	"testing"
)

// fuzzSep separates requests in a fuzz input.
const fuzzSep = "\xff\xfe"

// FuzzDo drives Do with arbitrary bytes, cut into a sequence of requests
// at fuzzSep, on a small store: no request may panic, every reply must be
// empty or end in CRLF, and the store must stay within its limit.
func FuzzDo(f *testing.F) {
	for _, steps := range transcripts {
		var seq []string
		for _, st := range steps {
			if len(st.send) < 4096 {
				seq = append(seq, st.send)
			}
		}
		f.Add([]byte(join(seq)))
	}
	f.Add([]byte("ms a 5 T1 I C0 MA b k c\r\nhello\r\n" + fuzzSep + "ma YQ== b N0 J9 MD v"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := New(Config{MaxBytes: 64 << 10, ItemSizeMax: 16 << 10, Shards: 2, SweepInterval: -1})
		defer s.Close()
		var out []byte
		for _, req := range bytes.Split(in, []byte(fuzzSep)) {
			out = s.Do(out[:0], req)
			if len(out) > 0 && !bytes.HasSuffix(out, []byte("\r\n")) {
				t.Fatalf("%q: reply %q does not end in CRLF", req, out)
			}
			if st := s.Stats(); st.Bytes > st.Limit {
				t.Fatalf("%q: %d bytes over the limit %d", req, st.Bytes, st.Limit)
			}
		}
	})
}

func join(reqs []string) string {
	var b bytes.Buffer
	for i, r := range reqs {
		if i > 0 {
			b.WriteString(fuzzSep)
		}
		b.WriteString(r)
	}
	return b.String()
}
