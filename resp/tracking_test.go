package resp

import (
	"bytes"
	"strings"
	"testing"

	"shardproxy/codec"
)

// trackingCmd is a request for Tracking.Do, parsed as a client sends it.
func trackingCmd(t *testing.T, proto uint8, args ...string) *codec.Request {
	t.Helper()
	p := dialect.NewRequestParser(codec.Options{}).(*parser)
	p.proto = proto
	var req codec.Request
	if _, err := p.ParseRequest([]byte(mb(args...)), &req); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return &req
}

func TestTrackingDo(t *testing.T) {
	exists := func(id int64) bool { return id == 7 }
	steps := []struct {
		args  []string
		proto uint8
		want  string
	}{
		{[]string{"CLIENT", "GETREDIR"}, 0, ":-1\r\n"},
		{[]string{"CLIENT", "CACHING", "yes"}, 0, replyCachingOff},
		{[]string{"CLIENT", "TRACKING", "on", "REDIRECT", "7", "REDIRECT", "7"}, 0, replyRedirectTwice},
		{[]string{"CLIENT", "TRACKING", "on", "REDIRECT", "8"}, 0, replyRedirectGone},
		{[]string{"CLIENT", "TRACKING", "on", "BOGUS"}, 0, replySyntax},
		{[]string{"CLIENT", "TRACKING", "on", "OPTIN", "REDIRECT", "7"}, 0, "+OK\r\n"},
		{[]string{"CLIENT", "GETREDIR"}, 0, ":7\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "OPTOUT"}, 0, replySwitchOpt},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST"}, 0, replySwitchBCAST},
		{[]string{"CLIENT", "CACHING", "no"}, 0, replyCachingNo},
		{[]string{"CLIENT", "CACHING", "maybe"}, 0, replySyntax},
		{[]string{"CLIENT", "CACHING", "yes"}, 0, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, 0, "*6\r\n$5\r\nflags\r\n*3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n" +
			"$8\r\nredirect\r\n:7\r\n$8\r\nprefixes\r\n*0\r\n"},
		{[]string{"CLIENT", "TRACKING", "off"}, 0, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b"}, 0, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab"}, 0,
			"-ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap.\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c"}, 0, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, proto3, "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n" +
			"$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"},
	}
	var tr Tracking
	for _, st := range steps {
		out, _ := tr.Do(nil, trackingCmd(t, st.proto, st.args...), exists)
		if string(out) != st.want {
			t.Fatalf("%v: %q, want %q", st.args, out, st.want)
		}
	}
}

func TestTracks(t *testing.T) {
	for _, tc := range []struct {
		t        Tracking
		readOnly bool
		want     bool
	}{
		{Tracking{}, true, false},
		{Tracking{On: true}, true, true},
		{Tracking{On: true}, false, false},
		{Tracking{On: true, BCAST: true}, true, false},
		{Tracking{On: true, OptIn: true}, true, false},
		{Tracking{On: true, OptIn: true, Caching: true}, true, true},
		{Tracking{On: true, OptOut: true}, true, true},
		{Tracking{On: true, OptOut: true, Caching: true}, true, false},
	} {
		if got := tc.t.Tracks(tc.readOnly); got != tc.want {
			t.Errorf("%+v read-only %v: %v", tc.t, tc.readOnly, got)
		}
	}
}

func TestAppendInvalidate(t *testing.T) {
	for _, tc := range []struct {
		keys  []string
		proto uint8
		want  string
	}{
		{[]string{"k"}, proto3, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"},
		{nil, proto3, ">2\r\n$10\r\ninvalidate\r\n_\r\n"},
		{[]string{"a", "b"}, 0, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{nil, 0, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"},
	} {
		if got := string(AppendInvalidate(nil, tc.keys, tc.proto)); got != tc.want {
			t.Errorf("%v proto %d: %q, want %q", tc.keys, tc.proto, got, tc.want)
		}
	}
}

// invalidateSeeds are the push frames a server with tracking sends, and
// frames that are not invalidations.
var invalidateSeeds = []string{
	">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n",
	">2\r\n$10\r\ninvalidate\r\n*2\r\n$3\r\nfoo\r\n$0\r\n\r\n",
	">2\r\n$10\r\ninvalidate\r\n_\r\n",
	">2\r\n$21\r\ntracking-redir-broken\r\n:5\r\n",
	"+OK\r\n",
	"%1\r\n$5\r\nproto\r\n:3\r\n",
	">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n",
}

// FuzzInvalidate: ReadInvalidate never panics; what it reads encodes
// (AppendInvalidate) to a frame it reads back the same; no strict prefix
// of a valid frame reads.
func FuzzInvalidate(f *testing.F) {
	for _, s := range invalidateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		keys, all, ok := ReadInvalidate(frame)
		if !ok {
			return
		}
		var strs []string
		if !all {
			strs = make([]string, len(keys))
			for i, k := range keys {
				strs[i] = string(k)
			}
		}
		again := AppendInvalidate(nil, strs, proto3)
		keys2, all2, ok2 := ReadInvalidate(again)
		if !ok2 || all2 != all || len(keys2) != len(keys) {
			t.Fatalf("%q: round trip %q", frame, again)
		}
		for i := range keys {
			if !bytes.Equal(keys[i], keys2[i]) {
				t.Fatalf("%q: key %d %q, again %q", frame, i, keys[i], keys2[i])
			}
		}
		for n := range len(again) {
			if _, _, ok := ReadInvalidate(again[:n]); ok {
				t.Fatalf("prefix %q of %q reads", again[:n], again)
			}
		}
	})
}

func TestReadInvalidate(t *testing.T) {
	for _, s := range invalidateSeeds {
		keys, all, ok := ReadInvalidate([]byte(s))
		want := strings.HasPrefix(s, ">2\r\n$10\r\ninvalidate")
		if ok != want {
			t.Errorf("%q: ok %v", s, ok)
		}
		if ok && all != strings.HasSuffix(s, "_\r\n") {
			t.Errorf("%q: all %v, keys %q", s, all, keys)
		}
	}
}
