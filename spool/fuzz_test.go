package spool

import (
	"bytes"
	"log/slog"
	"testing"
)

// FuzzReadRecord: no input panics; a record read encodes back to the
// bytes it was read from; every strict prefix of them is incomplete.
func FuzzReadRecord(f *testing.F) {
	f.Add(AppendRecord(nil, Record{Op: OpDelete, Server: "mc1", Key: []byte("user:1")}))
	f.Add(AppendRecord(nil, Record{Op: OpDone, Server: "10.0.0.1:11211:1", Count: 3}))
	f.Add(append(AppendRecord(nil, Record{Op: OpDelete, Server: "a", Key: []byte("k")}), 1, 2, 3))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ReadRecord(b)
		if err != nil {
			return
		}
		if n > len(b) || n < headerLen+2 {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		again := AppendRecord(nil, r)
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("%+v encodes as %x, read from %x", r, again, b[:n])
		}
		for i := range n {
			if _, _, err := ReadRecord(b[:i]); err != ErrShort {
				t.Fatalf("prefix of %d: %v", i, err)
			}
		}
	})
}

// FuzzLoad: any file content loads without panic, and the records kept
// survive a reopen.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(Magic))
	f.Add(append([]byte(Magic), AppendRecord(nil, Record{Op: OpDelete, Server: "s", Key: []byte("k")})...))
	f.Add([]byte("SPDE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &Spool{path: "fuzz", log: discard, servers: map[string]*server{}}
		if err := s.load(b); err != nil {
			return
		}
		var n int
		for _, sv := range s.servers {
			n += len(sv.keys)
		}
		if int64(n) != s.pending.Load() {
			t.Fatalf("%d keys, %d pending", n, s.pending.Load())
		}
	})
}

var discard = slog.New(slog.DiscardHandler)
