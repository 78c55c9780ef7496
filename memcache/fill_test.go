package memcache

import (
	"bytes"
	"testing"
	"time"
)

func TestFetchAndFill(t *testing.T) {
	for _, c := range []struct {
		reply string
		hit   bool
		want  Fetched
		bad   bool
	}{
		{reply: "EN\r\n"},
		{reply: "VA 3 f5 t-1\r\nabc\r\n", hit: true, want: Fetched{Value: []byte("abc"), Flags: 5, TTL: -1}},
		{reply: "VA 0 t30 f0\r\n\r\n", hit: true, want: Fetched{Value: []byte{}, TTL: 30}},
		{reply: "VA 3 f5\r\nabc\r\n", bad: true},
		{reply: "VA 3 f5 t1\r\nab\r\n", bad: true},
		{reply: "VA 3 f5 t1\r\nabcd\r\n", bad: true},
		{reply: "SERVER_ERROR out of memory\r\n", bad: true},
		{reply: "EN\r\nEN\r\n", bad: true},
		{reply: "VA 3 f5 t-2\r\nabc\r\n", bad: true},
	} {
		it, hit, err := ParseFetch([]byte(c.reply))
		if (err != nil) != c.bad || hit != c.hit {
			t.Errorf("%q: hit %v err %v", c.reply, hit, err)
			continue
		}
		if hit && (!bytes.Equal(it.Value, c.want.Value) || it.Flags != c.want.Flags || it.TTL != c.want.TTL) {
			t.Errorf("%q: %+v, want %+v", c.reply, it, c.want)
		}
	}
	now := time.Unix(1_000_000_000, 0)
	for _, c := range []struct {
		ttl  int64
		want string
	}{
		{-1, "ms k 1 T0 F7 ME\r\nv\r\n"},
		{60, "ms k 1 T60 F7 ME\r\nv\r\n"},
		{maxRelativeTTL + 1, "ms k 1 T1002592001 F7 ME\r\nv\r\n"},
	} {
		got := string(AppendFill(nil, []byte("k"), Fetched{Value: []byte("v"), Flags: 7, TTL: c.ttl}, now))
		if got != c.want {
			t.Errorf("ttl %d: %q, want %q", c.ttl, got, c.want)
		}
	}
	if got := string(AppendFetch(nil, []byte("k"))); got != "mg k v f t\r\n" {
		t.Errorf("fetch %q", got)
	}
}

// FuzzParseFetch: no panic; a hit's value lies within the reply and
// fills back to a request that carries it whole.
func FuzzParseFetch(f *testing.F) {
	for _, s := range []string{"EN\r\n", "VA 3 f5 t-1\r\nabc\r\n", "VA 0 t30 f0\r\n\r\n", "VA 3 f5\r\nabc\r\n", "VA 99999999999999999999 f1 t1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		it, hit, err := ParseFetch(reply)
		if err != nil || !hit {
			return
		}
		if len(it.Value) > len(reply) || it.TTL < -1 {
			t.Fatalf("%q: %+v", reply, it)
		}
		fill := AppendFill(nil, []byte("k"), it, time.Unix(0, 0))
		if !bytes.HasSuffix(fill, append(append([]byte{}, it.Value...), "\r\n"...)) {
			t.Fatalf("fill %q lost the value", fill)
		}
	})
}
