package memcache

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"shardproxy/codec"
)

// mustParse parses one whole request or fails.
func mustParse(t *testing.T, in string) *codec.Request {
	t.Helper()
	req, n, err := parse(t, codec.Options{}, in)
	if err != nil || n != len(in) {
		t.Fatalf("ParseRequest(%q) = %d, %v", in, n, err)
	}
	return req
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		targets    []int
		wantWires  []string
		wantKeys   [][]string
		wantTarget []int
	}{
		{"two backends", "get a b c d\r\n", []int{1, 0, 1, 2},
			[]string{"get a c\r\n", "get b\r\n", "get d\r\n"},
			[][]string{{"a", "c"}, {"b"}, {"d"}}, []int{1, 0, 2}},
		{"duplicates kept", "gets a b a a\r\n", []int{0, 1, 0, 0},
			[]string{"gets a a a\r\n", "gets b\r\n"},
			[][]string{{"a", "a", "a"}, {"b"}}, []int{0, 1}},
		{"gat keeps exptime", "gat   -5  a b\r\n", []int{3, 4},
			[]string{"gat -5 a\r\n", "gat -5 b\r\n"},
			[][]string{{"a"}, {"b"}}, []int{3, 4}},
		{"gats one backend", "gats 9 x y\r\n", []int{7, 7},
			[]string{"gats 9 x y\r\n"},
			[][]string{{"x", "y"}}, []int{7}},
	}
	// Every case in fresh storage, then every case in one scratch that
	// the cases before it used: their bytes, keys and targets must not
	// show through.
	var shared codec.SplitScratch
	for pass, tt := range append(tests, tests...) {
		var scratch *codec.SplitScratch
		if pass >= len(tests) {
			scratch = &shared
		}
		t.Run(tt.name, func(t *testing.T) {
			req := mustParse(t, tt.in)
			subs, targets, _ := dialect.Split(req, tt.targets, scratch)
			if scratch != nil { // every field as in fresh storage
				fresh, _, _ := dialect.Split(mustParse(t, tt.in), tt.targets, nil)
				for i := range min(len(fresh), len(subs)) {
					if !reflect.DeepEqual(*subs[i], *fresh[i]) {
						t.Errorf("sub %d from a used scratch: %+v, fresh: %+v", i, *subs[i], *fresh[i])
					}
				}
			}
			if !slices.Equal(targets, tt.wantTarget) || len(subs) != len(tt.wantWires) {
				t.Fatalf("Split targets %v (%d subs), want %v", targets, len(subs), tt.wantTarget)
			}
			for i, s := range subs {
				var keys []string
				for _, k := range s.Keys {
					keys = append(keys, string(k))
				}
				wantRoute := codec.RouteKey
				if len(keys) > 1 {
					wantRoute = codec.RouteMulti
				}
				if string(s.Wire) != tt.wantWires[i] || !slices.Equal(keys, tt.wantKeys[i]) ||
					s.Cmd != req.Cmd || s.Name != req.Name || s.Route != wantRoute {
					t.Errorf("sub %d: %s, want wire %q keys %q", i, describeRequest(s, len(s.Wire), nil), tt.wantWires[i], tt.wantKeys[i])
				}
				// A sub-request is a request the parser accepts as is.
				again := mustParse(t, string(s.Wire))
				if !slices.EqualFunc(again.Keys, s.Keys, func(a, b []byte) bool { return string(a) == string(b) }) {
					t.Errorf("sub %d parses to keys %q", i, again.Keys)
				}
			}
		})
	}
}

func TestSplitRefuses(t *testing.T) {
	if subs, _, _ := dialect.Split(mustParse(t, "set k 0 0 1\r\na\r\n"), []int{0}, nil); subs != nil {
		t.Errorf("split a set")
	}
	if subs, _, _ := dialect.Split(mustParse(t, "get a b\r\n"), []int{0}, nil); subs != nil {
		t.Errorf("split with a short targets slice")
	}
}

func TestMerge(t *testing.T) {
	ok := func(raw string) codec.Reply {
		kind := codec.ReplyOK
		if raw == "END\r\n" {
			kind = codec.ReplyMiss
		}
		return codec.Reply{Raw: []byte(raw), Kind: kind}
	}
	tests := []struct {
		name    string
		in      string
		targets []int
		replies []codec.Reply
		want    string
	}{
		{"client order", "get a b c d\r\n", []int{1, 0, 1, 2},
			[]codec.Reply{
				ok("VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\nEND\r\n"),
				ok("VALUE b 0 1\r\n2\r\nEND\r\n"),
				ok("VALUE d 0 1\r\n4\r\nEND\r\n"),
			},
			"VALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n2\r\nVALUE c 0 1\r\n3\r\nVALUE d 0 1\r\n4\r\nEND\r\n"},
		{"misses absent", "get a b c d\r\n", []int{0, 1, 0, 1},
			[]codec.Reply{
				ok("VALUE c 0 1\r\n3\r\nEND\r\n"),
				ok("END\r\n"),
			},
			"VALUE c 0 1\r\n3\r\nEND\r\n"},
		{"all miss", "gets a b\r\n", []int{0, 1},
			[]codec.Reply{ok("END\r\n"), ok("END\r\n")},
			"END\r\n"},
		{"duplicate keys", "get a b a\r\n", []int{0, 1, 0},
			[]codec.Reply{
				ok("VALUE a 0 2 7\r\nAA\r\nVALUE a 0 2 7\r\nAA\r\nEND\r\n"),
				ok("VALUE b 5 1 8\r\nB\r\nEND\r\n"),
			},
			"VALUE a 0 2 7\r\nAA\r\nVALUE b 5 1 8\r\nB\r\nVALUE a 0 2 7\r\nAA\r\nEND\r\n"},
		{"value data that looks like a block", "get a b\r\n", []int{0, 1},
			[]codec.Reply{
				ok("VALUE a 0 16\r\nVALUE b 0 1\r\nx\r\n\r\nEND\r\n"),
				ok("END\r\n"),
			},
			"VALUE a 0 16\r\nVALUE b 0 1\r\nx\r\n\r\nEND\r\n"},
		{"failed fragment", "get a b\r\n", []int{0, 1},
			[]codec.Reply{ok("VALUE a 0 1\r\n1\r\nEND\r\n"), {Err: errors.New("backend 10.0.0.2:11211 timed out")}},
			"SERVER_ERROR backend 10.0.0.2:11211 timed out\r\n"},
		{"errored fragment", "get a b\r\n", []int{0, 1},
			[]codec.Reply{
				ok("VALUE a 0 1\r\n1\r\nEND\r\n"),
				{Raw: []byte("VALUE b 0 1\r\n2\r\nSERVER_ERROR out of memory writing get response\r\n"), Kind: codec.ReplyError},
			},
			"SERVER_ERROR out of memory writing get response\r\n"},
		{"error beats failure order", "get a b\r\n", []int{0, 1},
			[]codec.Reply{{Raw: []byte("CLIENT_ERROR bad command line format\r\n"), Kind: codec.ReplyError}, {Err: errors.New("down")}},
			"SERVER_ERROR down\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := mustParse(t, tt.in)
			subs, _, owners := dialect.Split(req, tt.targets, nil)
			if len(subs) != len(tt.replies) {
				t.Fatalf("%d subs for %d replies", len(subs), len(tt.replies))
			}
			for i, r := range tt.replies { // the replies must be what ParseReply frames
				if r.Err == nil {
					if n, _, err := dialect.ParseReply(r.Raw, subs[i]); err != nil || n != len(r.Raw) {
						t.Fatalf("reply %d %q does not frame: %d, %v", i, r.Raw, n, err)
					}
				}
			}
			got := string(dialect.Merge([]byte("prior|"), req, subs, owners, tt.replies))
			if got != "prior|"+tt.want {
				t.Errorf("Merge =\n%q\nwant\n%q", got, "prior|"+tt.want)
			}
		})
	}
}

func TestMergeManySubs(t *testing.T) {
	const n = 40 // more than the cursors kept on the stack
	in := "get"
	var targets []int
	var replies []codec.Reply
	want := ""
	for i := range n {
		k := string(rune('A' + i))
		in += " " + k
		targets = append(targets, i)
		block := "VALUE " + k + " 0 1\r\nx\r\n"
		replies = append(replies, codec.Reply{Raw: []byte(block + "END\r\n")})
		want += block
	}
	req := mustParse(t, in+"\r\n")
	subs, _, owners := dialect.Split(req, targets, nil)
	if got := string(dialect.Merge(nil, req, subs, owners, replies)); got != want+"END\r\n" {
		t.Errorf("Merge = %q", got)
	}
}

func TestMergeRouteAll(t *testing.T) {
	req := mustParse(t, "flush_all\r\n")
	okReply := codec.Reply{Raw: []byte("OK\r\n")}
	subs := []*codec.Request{req, req, req}
	tests := []struct {
		name    string
		replies []codec.Reply
		want    string
	}{
		{"all ok", []codec.Reply{okReply, okReply, okReply}, "OK\r\n"},
		{"one failed", []codec.Reply{okReply, {Err: errors.New("connection refused")}, okReply}, "SERVER_ERROR connection refused\r\n"},
		{"one errored", []codec.Reply{okReply, okReply, {Raw: []byte("CLIENT_ERROR flush_all not allowed\r\n"), Kind: codec.ReplyError}}, "CLIENT_ERROR flush_all not allowed\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(dialect.Merge(nil, req, subs, nil, tt.replies)); got != tt.want {
				t.Errorf("Merge = %q, want %q", got, tt.want)
			}
		})
	}
	quietReq := mustParse(t, "flush_all noreply\r\n")
	if got := dialect.Merge(nil, quietReq, subs, nil, []codec.Reply{okReply, okReply, okReply}); len(got) != 0 {
		t.Errorf("noreply flush_all shows %q", got)
	}
}

func TestSplitBuiltRequest(t *testing.T) {
	// A request built by hand (as a script router might) splits too.
	req := &codec.Request{Name: "gat", Cmd: CmdGat, Route: codec.RouteMulti,
		Keys: [][]byte{[]byte("a"), []byte("b")}, Wire: []byte("gat 42 a b\r\n")}
	subs, _, _ := dialect.Split(req, []int{0, 1}, nil)
	if len(subs) != 2 || string(subs[0].Wire) != "gat 42 a\r\n" || string(subs[1].Wire) != "gat 42 b\r\n" {
		t.Errorf("Split = %q, %q", subs[0].Wire, subs[1].Wire)
	}
}

// TestMergeFatalFragment: a fragment the server answered with a bare ERROR
// (codec.ReplyFatal) fails the whole multi-get with that line.
func TestMergeFatalFragment(t *testing.T) {
	req := &codec.Request{Name: "get", Cmd: CmdGet, Route: codec.RouteMulti, Keys: [][]byte{[]byte("a"), []byte("b")}}
	subs := []*codec.Request{
		{Name: "get", Cmd: CmdGet, Keys: [][]byte{[]byte("a")}},
		{Name: "get", Cmd: CmdGet, Keys: [][]byte{[]byte("b")}},
	}
	replies := []codec.Reply{
		{Raw: []byte("VALUE a 0 1\r\nx\r\nEND\r\n"), Kind: codec.ReplyOK},
		{Raw: []byte("ERROR\r\n"), Kind: codec.ReplyFatal},
	}
	if got := string(dialect.Merge(nil, req, subs, []int{0, 1}, replies)); got != "ERROR\r\n" {
		t.Fatalf("Merge = %q, want the fragment's ERROR", got)
	}
}

// TestMergeForeignOwners: owners that are not Split's (too few, or naming
// a sub-request that does not exist) fail the multi-get loudly instead of
// dropping or misplacing values.
func TestMergeForeignOwners(t *testing.T) {
	req := mustParse(t, "get a b\r\n")
	subs, _, owners := dialect.Split(req, []int{0, 1}, nil)
	replies := []codec.Reply{
		{Raw: []byte("VALUE a 0 1\r\nx\r\nEND\r\n"), Kind: codec.ReplyOK},
		{Raw: []byte("VALUE b 0 1\r\ny\r\nEND\r\n"), Kind: codec.ReplyOK},
	}
	if got := string(dialect.Merge(nil, req, subs, owners, replies)); got != "VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nEND\r\n" {
		t.Fatalf("Merge with Split's owners = %q", got)
	}
	const fail = "SERVER_ERROR proxy: multi-get replies do not match its keys\r\n"
	for _, bad := range [][]int{nil, {0}, {0, 2}, {-1, 1}} {
		if got := string(dialect.Merge([]byte("p|"), req, subs, bad, replies)); got != "p|"+fail {
			t.Errorf("Merge with owners %v = %q, want %q", bad, got, "p|"+fail)
		}
	}
}
