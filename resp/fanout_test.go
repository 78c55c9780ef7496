package resp

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"shardproxy/codec"
)

func mustParse(t testing.TB, in string) *codec.Request {
	t.Helper()
	req, n, err := parse(t, codec.Options{}, in)
	if err != nil {
		t.Fatalf("%s", describeRequest(req, n, err))
	}
	return req
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		targets []int
		subs    []string
		subTgts []int
		keys    [][]string
	}{
		{"mget", mb("MGET", "a", "b", "c", "a"), []int{0, 1, 0, 0},
			[]string{mb("mget", "a", "c", "a"), mb("mget", "b")}, []int{0, 1}, [][]string{{"a", "c", "a"}, {"b"}}},
		{"mset keeps values with keys", mb("MSET", "a", "1", "b", "2", "c", "3"), []int{2, 0, 2},
			[]string{mb("mset", "a", "1", "c", "3"), mb("mset", "b", "2")}, []int{2, 0}, [][]string{{"a", "c"}, {"b"}}},
		{"del", mb("DEL", "x", "y"), []int{1, 0},
			[]string{mb("del", "x"), mb("del", "y")}, []int{1, 0}, [][]string{{"x"}, {"y"}}},
		{"exists duplicates stay together", mb("EXISTS", "k", "j", "k"), []int{0, 1, 0},
			[]string{mb("exists", "k", "k"), mb("exists", "j")}, []int{0, 1}, [][]string{{"k", "k"}, {"j"}}},
		{"unlink inline", "unlink a b\r\n", []int{0, 1},
			[]string{mb("unlink", "a"), mb("unlink", "b")}, []int{0, 1}, [][]string{{"a"}, {"b"}}},
		{"touch binary keys", mb("TOUCH", "a\r\n", ""), []int{3, 4},
			[]string{mb("touch", "a\r\n"), mb("touch", "")}, []int{3, 4}, [][]string{{"a\r\n"}, {""}}},
	}
	// Every case in fresh storage, then every case in one scratch that
	// the cases before it used: their bytes, keys and targets must not
	// show through.
	var shared codec.SplitScratch
	for pass, tc := range append(tests, tests...) {
		var scratch *codec.SplitScratch
		if pass >= len(tests) {
			scratch = &shared
		}
		t.Run(tc.name, func(t *testing.T) {
			req := mustParse(t, tc.in)
			subs, subTargets, _ := dialect.Split(req, tc.targets, scratch)
			if scratch != nil { // every field as in fresh storage
				fresh, _, _ := dialect.Split(mustParse(t, tc.in), tc.targets, nil)
				for i := range min(len(fresh), len(subs)) {
					if !reflect.DeepEqual(*subs[i], *fresh[i]) {
						t.Errorf("sub %d from a used scratch: %+v, fresh: %+v", i, *subs[i], *fresh[i])
					}
				}
			}
			if !slices.Equal(subTargets, tc.subTgts) || len(subs) != len(tc.subs) {
				t.Fatalf("targets %v, %d subs; want %v, %d", subTargets, len(subs), tc.subTgts, len(tc.subs))
			}
			for i, s := range subs {
				var keys []string
				for _, k := range s.Keys {
					keys = append(keys, string(k))
				}
				if string(s.Wire) != tc.subs[i] || !slices.Equal(keys, tc.keys[i]) || s.Cmd != req.Cmd || s.Name != req.Name {
					t.Errorf("sub %d: %s", i, describeRequest(s, len(s.Wire), nil))
				}
				// A sub-request is a request the parser accepts as the same.
				again := mustParse(t, string(s.Wire))
				if again.Cmd != s.Cmd || again.Route != s.Route || len(again.Keys) != len(s.Keys) {
					t.Errorf("sub %d re-parses as %s", i, describeRequest(again, len(s.Wire), nil))
				}
			}
		})
	}
	for _, tc := range []struct {
		in      string
		targets []int
	}{
		{mb("GET", "a"), []int{0}},
		{mb("SINTER", "a", "b"), []int{0, 1}},
		{mb("MGET", "a", "b"), []int{0}},
		{mb("MGET", "a", "b"), nil},
	} {
		if subs, tgts, owners := dialect.Split(mustParse(t, tc.in), tc.targets, nil); subs != nil || tgts != nil || owners != nil {
			t.Errorf("Split(%q, %v) = %d subs", tc.in, tc.targets, len(subs))
		}
	}
}

func TestMerge(t *testing.T) {
	ok := func(raw string) codec.Reply {
		_, kind, err := dialect.ParseReply([]byte(raw), nil)
		if err != nil {
			t.Fatalf("reply %q: %v", raw, err)
		}
		return codec.Reply{Raw: []byte(raw), Kind: kind}
	}
	timeout := codec.Reply{Err: errors.New("backend failure: timeout")}
	tests := []struct {
		name    string
		in      string
		targets []int // nil: RouteAll, the request once per backend
		replies []codec.Reply
		want    string
	}{
		{"mget in key order", mb("MGET", "a", "b", "c", "a"), []int{0, 1, 0, 0},
			[]codec.Reply{ok("*3\r\n$1\r\nA\r\n$-1\r\n$1\r\nA\r\n"), ok("*1\r\n$1\r\nB\r\n")},
			"*4\r\n$1\r\nA\r\n$1\r\nB\r\n$-1\r\n$1\r\nA\r\n"},
		{"mget all missing", mb("MGET", "a", "b"), []int{0, 1},
			[]codec.Reply{ok("*1\r\n$-1\r\n"), ok("*1\r\n$-1\r\n")}, "*2\r\n$-1\r\n$-1\r\n"},
		{"mset", mb("MSET", "a", "1", "b", "2"), []int{0, 1},
			[]codec.Reply{ok("+OK\r\n"), ok("+OK\r\n")}, "+OK\r\n"},
		{"del sums", mb("DEL", "a", "b", "c"), []int{0, 1, 1},
			[]codec.Reply{ok(":1\r\n"), ok(":2\r\n")}, ":3\r\n"},
		{"exists counts duplicates", mb("EXISTS", "a", "b", "a"), []int{0, 1, 0},
			[]codec.Reply{ok(":2\r\n"), ok(":0\r\n")}, ":2\r\n"},
		{"a failed fragment fails all", mb("MGET", "a", "b"), []int{0, 1},
			[]codec.Reply{ok("*1\r\n$1\r\nA\r\n"), timeout}, "-ERR backend failure: timeout\r\n"},
		{"an error reply fails all", mb("DEL", "a", "b"), []int{0, 1},
			[]codec.Reply{ok(":1\r\n"), ok("-LOADING Redis is loading\r\n")}, "-LOADING Redis is loading\r\n"},
		{"mget wrong length", mb("MGET", "a", "b"), []int{0, 1},
			[]codec.Reply{ok("*2\r\n$1\r\nA\r\n$1\r\nA\r\n"), ok("*1\r\n$1\r\nB\r\n")},
			"-ERR unexpected replies from the backends to mget\r\n"},
		{"del not an integer", mb("DEL", "a", "b"), []int{0, 1},
			[]codec.Reply{ok(":1\r\n"), ok("+OK\r\n")}, "-ERR unexpected replies from the backends to del\r\n"},
		{"flushdb", mb("FLUSHDB"), nil, []codec.Reply{ok("+OK\r\n"), ok("+OK\r\n"), ok("+OK\r\n")}, "+OK\r\n"},
		{"script load", mb("SCRIPT", "LOAD", "return 1"), nil,
			[]codec.Reply{ok("$3\r\nabc\r\n"), ok("$3\r\nabc\r\n")}, "$3\r\nabc\r\n"},
		{"servers disagree", mb("SCRIPT", "LOAD", "return 1"), nil,
			[]codec.Reply{ok("$3\r\nabc\r\n"), ok("$3\r\nabd\r\n")}, "-ERR the servers' replies to SCRIPT LOAD disagree or are not what it answers\r\n"},
		{"script exists on every server", mb("SCRIPT", "EXISTS", "a", "b", "c"), nil,
			[]codec.Reply{ok("*3\r\n:1\r\n:0\r\n:1\r\n"), ok("*3\r\n:1\r\n:1\r\n:0\r\n")}, "*3\r\n:1\r\n:0\r\n:0\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := mustParse(t, tc.in)
			var subs []*codec.Request
			var owners []int
			if tc.targets == nil {
				for range tc.replies {
					subs = append(subs, req)
				}
			} else {
				subs, _, owners = dialect.Split(req, tc.targets, nil)
				if len(subs) != len(tc.replies) {
					t.Fatalf("%d subs for %d replies", len(subs), len(tc.replies))
				}
			}
			got := string(dialect.Merge([]byte("x"), req, subs, owners, tc.replies))
			if got != "x"+tc.want {
				t.Fatalf("got %q, want %q", got, "x"+tc.want)
			}
		})
	}
}

// TestMergeForeignOwners: owners that are not Split's fail an MGET's merge.
func TestMergeForeignOwners(t *testing.T) {
	req := mustParse(t, mb("MGET", "a", "b", "c"))
	subs, _, owners := dialect.Split(req, []int{0, 1, 0}, nil)
	replies := []codec.Reply{
		{Raw: []byte("*2\r\n$1\r\nA\r\n$1\r\nC\r\n"), Kind: codec.ReplyOK},
		{Raw: []byte("*1\r\n$1\r\nB\r\n"), Kind: codec.ReplyOK},
	}
	if got := string(dialect.Merge(nil, req, subs, owners, replies)); got != "*3\r\n$1\r\nA\r\n$1\r\nB\r\n$1\r\nC\r\n" {
		t.Fatalf("Merge with Split's owners = %q", got)
	}
	const fail = "-ERR unexpected replies from the backends to mget\r\n"
	// Too few, out of range, and one that takes more values from a reply
	// than it holds.
	for _, bad := range [][]int{nil, {0, 1}, {0, 2, 0}, {0, 1, 1}} {
		if got := string(dialect.Merge(nil, req, subs, bad, replies)); got != fail {
			t.Errorf("Merge with owners %v = %q, want %q", bad, got, fail)
		}
	}
}
