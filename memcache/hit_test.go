package memcache

import (
	"bytes"
	"testing"

	"shardproxy/codec"
)

func TestHit(t *testing.T) {
	for _, tc := range []struct {
		name, req string
		meta      bool // parse with MetaGets: the reply is mg's
		reply     string
		value     string
		flags     uint32
		ok        bool
	}{
		{"text hit", "get foo\r\n", false, "VALUE foo 5 3\r\nbar\r\nEND\r\n", "bar", 5, true},
		{"text empty value", "get foo\r\n", false, "VALUE foo 0 0\r\n\r\nEND\r\n", "", 0, true},
		{"text gets", "gets foo\r\n", false, "VALUE foo 4294967295 3 77\r\nbar\r\nEND\r\n", "bar", 1<<32 - 1, true},
		{"text flags past 32 bits", "get foo\r\n", false, "VALUE foo 4294967296 3\r\nbar\r\nEND\r\n", "", 0, false},
		{"text miss", "get foo\r\n", false, "END\r\n", "", 0, false},
		{"text other key", "get foo\r\n", false, "VALUE fob 0 3\r\nbar\r\nEND\r\n", "", 0, false},
		{"text short data", "get foo\r\n", false, "VALUE foo 0 4\r\nbar\r\nEND\r\n", "", 0, false},
		{"text no END", "get foo\r\n", false, "VALUE foo 0 3\r\nbar\r\n", "", 0, false},
		{"text error", "get foo\r\n", false, "SERVER_ERROR out of memory\r\n", "", 0, false},
		{"mg hit", "get foo\r\n", true, "VA 3 kfoo f9\r\nbar\r\n", "bar", 9, true},
		{"mg gets", "gets foo\r\n", true, "VA 3 kfoo f9 c12\r\nbar\r\n", "bar", 9, true},
		{"mg miss", "get foo\r\n", true, "EN\r\n", "", 0, false},
		{"mg other key", "get foo\r\n", true, "VA 3 kfob f9\r\nbar\r\n", "", 0, false},
		{"mg trailing bytes", "get foo\r\n", true, "VA 3 kfoo f9\r\nbar\r\nEND\r\n", "", 0, false},
		{"multi-key get", "get foo bar\r\n", false, "VALUE foo 0 3\r\nbar\r\nEND\r\n", "", 0, false},
		{"set", "set foo 0 0 1\r\nx\r\n", false, "STORED\r\n", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := parse(t, codec.Options{MetaGets: tc.meta}, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			v, f, ok := Hit(req, []byte(tc.reply))
			if ok != tc.ok || string(v) != tc.value || f != tc.flags {
				t.Fatalf("Hit(%q) = %q, %d, %t; want %q, %d, %t", tc.reply, v, f, ok, tc.value, tc.flags, tc.ok)
			}
		})
	}
}

func TestAppendHit(t *testing.T) {
	got := AppendHit([]byte("x"), []byte("foo"), 4294967295, []byte("a\r\nb"))
	if want := "xVALUE foo 4294967295 4\r\na\r\nb\r\nEND\r\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// FuzzHit checks that Hit never panics, that a value it finds is what the
// reply holds, and that the text reply AppendHit makes of it reads back
// the same (the near cache's round trip: a filled value is served so).
func FuzzHit(f *testing.F) {
	for _, in := range []string{
		"VALUE foo 5 3\r\nbar\r\nEND\r\n", "VALUE foo 0 3 9\r\nbar\r\nEND\r\n", "END\r\n",
		"VA 3 kfoo f5\r\nbar\r\n", "VA 3 kfoo f5 c1\r\nbar\r\n", "EN\r\n", "VA 1 kZm9v b f0\r\nz\r\n",
	} {
		for m := range 4 {
			f.Add(uint8(m), []byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		in := [2]string{"get foo\r\n", "gets foo\r\n"}[mode&1]
		req, _, err := parse(t, codec.Options{MetaGets: mode&2 != 0}, in)
		if err != nil {
			t.Fatal(err)
		}
		v, flags, ok := Hit(req, data)
		if !ok {
			return
		}
		if !bytes.Contains(data, v) {
			t.Fatalf("value %q is not in %q", v, data)
		}
		text, _, _ := parse(t, codec.Options{}, "get foo\r\n")
		shown := AppendHit(nil, text.Keys[0], flags, v)
		v2, flags2, ok := Hit(text, shown)
		if !ok || string(v2) != string(v) || flags2 != flags {
			t.Fatalf("%q: Hit %q %d; its text %q reads %q %d %t", data, v, flags, shown, v2, flags2, ok)
		}
		if n, kind, err := dialect.ParseReply(shown, text); err != nil || n != len(shown) || kind != codec.ReplyOK {
			t.Fatalf("%q frames as %d of %d, %v, %v", shown, n, len(shown), kind, err)
		}
	})
}
