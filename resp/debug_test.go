package resp

import (
	"errors"
	"strings"
	"testing"

	"shardproxy/codec"
)

func TestMergeDebug(t *testing.T) {
	ok := func(server, s string) codec.Reply {
		return codec.Reply{Raw: []byte(s), Kind: codec.ReplyOK, Server: server}
	}
	zeros := "+" + strings.Repeat("0", 40) + "\r\n"
	a := "+" + strings.Repeat("0f", 20) + "\r\n"
	b := "+" + strings.Repeat("f1", 20) + "\r\n"
	tests := []struct {
		name    string
		in      string
		replies []codec.Reply
		want    string
	}{
		{"digest of empty servers", mb("DEBUG", "DIGEST"), []codec.Reply{ok("s1", zeros), ok("s2", zeros)}, zeros},
		{"digest of one server with data", mb("DEBUG", "DIGEST"), []codec.Reply{ok("s1", zeros), ok("s2", a)}, a},
		{"digests XORed", mb("debug", "digest"), []codec.Reply{ok("s1", a), ok("s2", b)}, "+" + strings.Repeat("fe", 20) + "\r\n"},
		{"a digest that is none", mb("DEBUG", "DIGEST"), []codec.Reply{ok("s1", a), ok("s2", "+xyz\r\n")},
			"-ERR the servers' replies to DEBUG DIGEST disagree or are not what it answers: server s2 answered '+xyz', server s1 '" + strings.TrimSuffix(a, "\r\n") + "'\r\n"},
		{"lastsave the oldest", mb("LASTSAVE"), []codec.Reply{ok("s1", ":1700000100\r\n"), ok("s2", ":1700000000\r\n"), ok("s3", ":1700000200\r\n")}, ":1700000000\r\n"},
		{"sleep alike", mb("DEBUG", "SLEEP", "0"), []codec.Reply{ok("s1", "+OK\r\n"), ok("s2", "+OK\r\n")}, "+OK\r\n"},
		{"bgsave disagrees", mb("BGSAVE", "SCHEDULE"), []codec.Reply{ok("s1", "+Background saving started\r\n"), ok("s2", "+Background saving scheduled\r\n")},
			"-ERR the servers' replies to BGSAVE disagree or are not what it answers: server s2 answered '+Background saving scheduled', server s1 '+Background saving started'\r\n"},
		{"a server's error as it is", mb("BGREWRITEAOF"), []codec.Reply{ok("s1", "+Background append only file rewriting started\r\n"),
			{Raw: []byte("-ERR Background append only file rewriting already in progress\r\n"), Kind: codec.ReplyError, Server: "s2"}},
			"-ERR Background append only file rewriting already in progress\r\n"},
		{"a failure names its server", mb("SAVE"), []codec.Reply{ok("s1", "+OK\r\n"), {Err: errors.New("backend failure: timeout"), Server: "s2"}},
			"-ERR server s2: backend failure: timeout\r\n"},
		{"a DEBUG failure names its server", mb("DEBUG", "RELOAD"), []codec.Reply{{Err: errors.New("backend failure: disconnected"), Server: "s1"}, ok("s2", "+OK\r\n")},
			"-ERR server s1: backend failure: disconnected\r\n"},
		{"FLUSHDB's failure as before", mb("FLUSHDB"), []codec.Reply{{Err: errors.New("backend failure: timeout"), Server: "s2"}},
			"-ERR backend failure: timeout\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(dialect.Merge(nil, mustParse(t, tc.in), nil, nil, tc.replies)); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestDebugRoutes checks where DEBUG's subcommands and the persistence
// commands go, and that DEBUG PROTOCOL PUSH is refused to a RESP3 client.
func TestDebugRoutes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		route codec.Route
		keys  []string
		txOne bool
	}{
		{mb("DEBUG", "OBJECT", "k"), codec.RouteKey, []string{"k"}, false},
		{mb("debug", "digest-value", "a", "b"), codec.RouteSame, []string{"a", "b"}, false},
		{mb("DEBUG", "SLEEP", "0"), codec.RouteAll, nil, true},
		{mb("DEBUG", "RELOAD", "NOSAVE"), codec.RouteAll, nil, true},
		{mb("debug", "Set-Skip-Checksum-Validation", "1"), codec.RouteAll, nil, true}, // the longest name
		{mb("DEBUG", "PROTOCOL", "attrib"), codec.RouteAny, nil, false},
		{mb("DEBUG", "HELP"), codec.RouteAny, nil, false},
		{mb("SAVE"), codec.RouteAll, nil, false},
		{mb("LASTSAVE"), codec.RouteAll, nil, false},
		{mb("PFDEBUG", "GETREG", "h"), codec.RouteKey, []string{"h"}, false},
		{mb("PFSELFTEST"), codec.RouteAny, nil, false},
	} {
		req := mustParse(t, tc.in)
		var keys []string
		for _, k := range req.Keys {
			keys = append(keys, string(k))
		}
		if req.Route != tc.route || strings.Join(keys, " ") != strings.Join(tc.keys, " ") || req.TxOne != tc.txOne {
			t.Errorf("%q: route %v keys %q txOne %v, want %v %q %v", tc.in, req.Route, keys, req.TxOne, tc.route, tc.keys, tc.txOne)
		}
	}
	if req := mustParse(t, mb("GET", "k")); req.TxOne {
		t.Error("GET is TxOne")
	}
	p := newParser(codec.Options{})
	var req codec.Request
	for _, in := range []string{mb("HELLO", "3"), mb("DEBUG", "PROTOCOL", "push")} {
		if _, err := p.ParseRequest([]byte(in), &req); in != mb("HELLO", "3") {
			var pe *codec.ProtocolError
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reply, "-ERR DEBUG PROTOCOL PUSH is not supported") {
				t.Errorf("DEBUG PROTOCOL PUSH in RESP3: %v", err)
			}
		}
	}
}

// FuzzMergeDigest feeds DEBUG DIGEST's merge any two replies: no panic,
// and a merged digest is 40 hex digits that XOR back to the first.
func FuzzMergeDigest(f *testing.F) {
	f.Add("+"+strings.Repeat("0", 40)+"\r\n", "+"+strings.Repeat("ab", 20)+"\r\n")
	f.Add("+"+strings.Repeat("f", 40)+"\r\n", "-ERR no\r\n")
	f.Add("+abc\r\n", "+"+strings.Repeat("0", 39)+"\r\n")
	f.Add("+"+strings.Repeat("0", 40)+"\n", "$40\r\n"+strings.Repeat("0", 40)+"\r\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		replies := []codec.Reply{{Raw: []byte(a)}, {Raw: []byte(b)}}
		out, ok := mergeDigest(nil, replies)
		if !ok {
			if len(out) != 0 {
				t.Fatalf("a failed merge wrote %q", out)
			}
			return
		}
		line, isStatus := statusLine(out)
		if !isStatus || len(line) != digestLen {
			t.Fatalf("merged %q", out)
		}
		again, ok := mergeDigest(nil, []codec.Reply{{Raw: out}, {Raw: []byte(b)}})
		if la, _ := statusLine([]byte(a)); !ok || !strings.EqualFold(string(again[1:len(again)-2]), string(la)) {
			t.Fatalf("(%q ^ %q) ^ %q = %q", a, b, b, again)
		}
	})
}
