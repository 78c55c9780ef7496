package memcache

import (
	"strings"
	"testing"

	"shardproxy/codec"
)

func TestSpliceSpan(t *testing.T) {
	for _, tc := range []struct {
		in, reply string
		meta      bool
		data      int // -1: not ok
		size      int
		trailer   string
	}{
		{"get foo\r\n", "VALUE foo 5 3\r\nb", false, 15, 3, textTrailer},
		{"gets foo\r\n", "VALUE foo 5 3 77\r\n", false, 18, 3, textTrailer},
		{"get foo\r\n", "VALUE bar 5 3\r\n", false, -1, 0, ""},     // not the request's key
		{"get foo\r\n", "VALUE foo 5 3", false, -1, 0, ""},         // header cut short
		{"get foo\r\n", "END\r\n", false, -1, 0, ""},               // a miss
		{"get foo bar\r\n", "VALUE foo 5 3\r\n", false, -1, 0, ""}, // two keys
		{"gat 10 foo\r\n", "VALUE foo 5 3\r\n", false, -1, 0, ""},  // not a get
		{"get foo\r\n", "SERVER_ERROR busy\r\n", false, -1, 0, ""},
		{"get foo\r\n", "VA 3 kfoo f5\r\nba", true, 14, 3, metaTrailer},
		{"gets foo\r\n", "VA 3 kfoo f5 c9\r\n", true, 17, 3, metaTrailer},
		{"gets foo\r\n", "VA 3 kfoo f5\r\n", true, -1, 0, ""}, // gets without its cas
		{"get foo\r\n", "VA 3 kbar f5\r\n", true, -1, 0, ""},
		{"get foo\r\n", "EN\r\n", true, -1, 0, ""},
		{"get foo\r\n", "VA 3 kfoo f5", true, -1, 0, ""},
	} {
		req, _, err := parse(t, codec.Options{MetaGets: tc.meta}, tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		data, size, trailer, ok := dialect.SpliceSpan([]byte(tc.reply), req)
		if tc.data < 0 {
			if ok {
				t.Errorf("%q to %q: span %d+%d %q, want none", tc.reply, tc.in, data, size, trailer)
			}
			continue
		}
		if !ok || data != tc.data || size != tc.size || trailer != tc.trailer {
			t.Errorf("%q to %q: span %d+%d %q (%v), want %d+%d %q", tc.reply, tc.in, data, size, trailer, ok,
				tc.data, tc.size, tc.trailer)
		}
	}
}

// FuzzSpliceSpan checks SpliceSpan against ParseReply: a reply made of
// the header it accepts, a value of the length it returns and its
// trailer is one whole reply, a hit, for ParseReply; and any reply
// ParseReply frames as one value block for a one-key get, SpliceSpan
// accepts with the same parts.
func FuzzSpliceSpan(f *testing.F) {
	for _, in := range []string{
		"VALUE foo 5 3\r\n", "VALUE foo 0 0 12\r\n", "VA 3 kfoo f5\r\n", "VA 3 kfoo f5 c1\r\n",
		"VALUE foo 5 3\r\nbar\r\nEND\r\n", "VA 3 kfoo f5\r\nbar\r\n", "END\r\n", "EN\r\n",
	} {
		for _, meta := range []bool{false, true} {
			f.Add(meta, false, []byte(in))
			f.Add(meta, true, []byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, meta, gets bool, reply []byte) {
		in := "get foo\r\n"
		if gets {
			in = "gets foo\r\n"
		}
		req, _, err := parse(t, codec.Options{MetaGets: meta}, in)
		if err != nil {
			t.Fatal(err)
		}
		if data, size, trailer, ok := dialect.SpliceSpan(reply, req); ok {
			if data > len(reply) || size < 0 || size > MaxReplyValue {
				t.Fatalf("%q: span %d+%d of %d bytes", reply, data, size, len(reply))
			}
			whole := string(reply[:data]) + strings.Repeat("x", size) + trailer
			n, kind, err := dialect.ParseReply([]byte(whole), req)
			if err != nil || n != len(whole) || kind != codec.ReplyOK {
				t.Fatalf("%q: span %d+%d %q, but ParseReply takes %d of %d bytes (kind %d): %v",
					reply, data, size, trailer, n, len(whole), kind, err)
			}
		}
		n, kind, err := dialect.ParseReply(reply, req)
		if err != nil || kind != codec.ReplyOK {
			return
		}
		data, size, trailer, ok := dialect.SpliceSpan(reply[:n], req)
		if !ok || data+size+len(trailer) != n || string(reply[n-len(trailer):n]) != trailer {
			t.Fatalf("%q is a hit of %d bytes, but its span is %d+%d %q (%v)", reply[:n], n, data, size, trailer, ok)
		}
	})
}
