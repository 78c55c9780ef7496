package memcache

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

type reqWant struct {
	name  string
	route codec.Route
	mode  codec.Mode
	keys  []string
	wire  string // "" means the input itself
	n     int    // 0 means len(input)
	close bool
}

func TestParseRequest(t *testing.T) {
	long := strings.Repeat("k", 250)
	tests := []struct {
		name string
		in   string
		want reqWant
	}{
		{"get", "get foo\r\n", reqWant{name: "get", keys: []string{"foo"}}},
		{"get bare newline", "get foo\n", reqWant{name: "get", keys: []string{"foo"}}},
		{"get spaces", "  get   a   b  \r\n", reqWant{name: "get", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"get key of 250", "get " + long + "\r\n", reqWant{name: "get", keys: []string{long}}},
		{"get keeps order and duplicates", "get b a b\r\n", reqWant{name: "get", route: codec.RouteMulti, keys: []string{"b", "a", "b"}}},
		{"get only the first request", "get a\r\nget b\r\n", reqWant{name: "get", keys: []string{"a"}, wire: "get a\r\n", n: 7}},
		{"gets", "gets a b\r\n", reqWant{name: "gets", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"gat", "gat 10 a\r\n", reqWant{name: "gat", keys: []string{"a"}}},
		{"gats negative exptime", "gats -1 a b\r\n", reqWant{name: "gats", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"gat without keys", "gat 10\r\n", reqWant{name: "gat", route: codec.RouteLocal}},
		{"get noreply is a key", "get noreply\r\n", reqWant{name: "get", keys: []string{"noreply"}}},
		{"get stops at NUL", "get a\x00b\r\n", reqWant{name: "get", keys: []string{"a"}}},
		{"get keeps inner CR", "get a\rb\r\n", reqWant{name: "get", keys: []string{"a\rb"}}},
		{"get keeps second CR", "get a\r\r\n", reqWant{name: "get", keys: []string{"a\r"}}},
		{"set", "set k 1 2 3\r\nabc\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set bare newline", "set k 1 2 3\nabc\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set empty value", "set k 0 0 0\r\n\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set value holds CRLF", "set k 0 0 4\r\n\r\n\r\n\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set noreply", "set k 0 0 1 noreply\r\na\r\n", reqWant{name: "set", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "set k 0 0 1\r\na\r\n"}},
		{"set noreply extra spaces", "set k 0 0 1   noreply  \na\r\n", reqWant{name: "set", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "set k 0 0 1\r\na\r\n"}},
		{"set ignores a sixth token", "set k 0 0 1 foo\r\na\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set numbers as strtol reads them", "set k +1 -99999999999 \t1\r\na\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set flags wrap like memcached", "set k 4294967296 0 1\r\na\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"set number then whitespace junk", "set k 0 0 1\tjunk\r\na\r\n", reqWant{name: "set", keys: []string{"k"}}},
		{"add", "add k 0 0 1\r\na\r\n", reqWant{name: "add", keys: []string{"k"}}},
		{"replace", "replace k 0 0 1\r\na\r\n", reqWant{name: "replace", keys: []string{"k"}}},
		{"append", "append k 0 0 1\r\na\r\n", reqWant{name: "append", keys: []string{"k"}}},
		{"prepend", "prepend k 0 0 1\r\na\r\n", reqWant{name: "prepend", keys: []string{"k"}}},
		{"cas", "cas k 0 0 1 99\r\na\r\n", reqWant{name: "cas", keys: []string{"k"}}},
		{"cas noreply", "cas k 0 0 1 99 noreply\r\na\r\n", reqWant{name: "cas", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "cas k 0 0 1 99\r\na\r\n"}},
		{"incr", "incr k 5\r\n", reqWant{name: "incr", keys: []string{"k"}}},
		{"incr max delta", "incr k 18446744073709551615\r\n", reqWant{name: "incr", keys: []string{"k"}}},
		{"decr noreply", "decr k 5 noreply\r\n", reqWant{name: "decr", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "decr k 5\r\n"}},
		{"touch", "touch k 10\r\n", reqWant{name: "touch", keys: []string{"k"}}},
		{"touch noreply", "touch k 10 noreply\r\n", reqWant{name: "touch", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "touch k 10\r\n"}},
		{"touch ignores a fourth token", "touch k 10 foo\r\n", reqWant{name: "touch", keys: []string{"k"}}},
		{"delete", "delete k\r\n", reqWant{name: "delete", keys: []string{"k"}}},
		{"delete hold 0", "delete k 0\r\n", reqWant{name: "delete", keys: []string{"k"}}},
		{"delete noreply", "delete k noreply\r\n", reqWant{name: "delete", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "delete k\r\n"}},
		{"delete hold 0 noreply", "delete k 0 noreply\r\n", reqWant{name: "delete", mode: codec.ModeNoreply, keys: []string{"k"}, wire: "delete k 0\r\n"}},
		{"flush_all", "flush_all\r\n", reqWant{name: "flush_all", route: codec.RouteAll}},
		{"flush_all delay", "flush_all 10\r\n", reqWant{name: "flush_all", route: codec.RouteAll}},
		{"flush_all noreply", "flush_all noreply\r\n", reqWant{name: "flush_all", route: codec.RouteAll, mode: codec.ModeNoreply, wire: "flush_all\r\n"}},
		{"flush_all delay noreply", "flush_all 0 noreply\r\n", reqWant{name: "flush_all", route: codec.RouteAll, mode: codec.ModeNoreply, wire: "flush_all 0\r\n"}},
		{"flush_all ignores a third token", "flush_all 0 foo\r\n", reqWant{name: "flush_all", route: codec.RouteAll}},
		{"version", "version\r\n", reqWant{name: "version", route: codec.RouteLocal}},
		{"version ignores arguments", "version x y\r\n", reqWant{name: "version", route: codec.RouteLocal}},
		{"quit", "quit\r\n", reqWant{name: "quit", route: codec.RouteLocal, close: true}},
		{"verbosity", "verbosity 1\r\n", reqWant{name: "verbosity", route: codec.RouteLocal}},
		{"verbosity noreply", "verbosity 1 noreply\r\n", reqWant{name: "verbosity", route: codec.RouteLocal, mode: codec.ModeNoreply, wire: "verbosity 1\r\n"}},
		{"stats", "stats\r\n", reqWant{name: "stats", route: codec.RouteLocal}},
		{"stats with arguments", "stats slabs\r\n", reqWant{name: "stats", route: codec.RouteLocal}},
		{"mn", "mn\r\n", reqWant{name: "mn", route: codec.RouteLocal}},
		{"mg", "mg foo v t\r\n", reqWant{name: "mg", keys: []string{"foo"}}},
		{"mg no flags", "mg foo\r\n", reqWant{name: "mg", keys: []string{"foo"}}},
		{"mg quiet", "mg foo v q\r\n", reqWant{name: "mg", mode: codec.ModeQuiet, keys: []string{"foo"}, wire: "mg foo v q\r\nmn\r\n"}},
		{"mg base64", "mg Zm9v b v\r\n", reqWant{name: "mg", keys: []string{"foo"}}},
		{"mg base64 binary", "mg AAEC b\r\n", reqWant{name: "mg", keys: []string{"\x00\x01\x02"}}},
		{"mg base64 padded", "mg Zg== b k\r\n", reqWant{name: "mg", keys: []string{"f"}}},
		{"mg base64 skips junk like memcached", "mg Z!m9v b\r\n", reqWant{name: "mg", keys: []string{"foo"}}},
		{"mg base64 undecodable routes raw", "mg Zm9 b\r\n", reqWant{name: "mg", keys: []string{"Zm9"}}},
		{"mg flag is a token's first byte", "mg Zm9v bx qy\r\n", reqWant{name: "mg", mode: codec.ModeQuiet, keys: []string{"foo"}, wire: "mg Zm9v bx qy\r\nmn\r\n"}},
		{"mg unknown flags go to the backend", "mg k z z\r\n", reqWant{name: "mg", keys: []string{"k"}}},
		{"ms", "ms foo 2 T10 F5\r\nhi\r\n", reqWant{name: "ms", keys: []string{"foo"}}},
		{"ms quiet", "ms foo 2 q\r\nhi\r\n", reqWant{name: "ms", mode: codec.ModeQuiet, keys: []string{"foo"}, wire: "ms foo 2 q\r\nhi\r\nmn\r\n"}},
		{"ms base64 quiet", "ms Zm9v 2 b q\r\nhi\r\n", reqWant{name: "ms", mode: codec.ModeQuiet, keys: []string{"foo"}, wire: "ms Zm9v 2 b q\r\nhi\r\nmn\r\n"}},
		{"ms datalen is not a flag", "ms foo 0 q\r\n\r\n", reqWant{name: "ms", mode: codec.ModeQuiet, keys: []string{"foo"}, wire: "ms foo 0 q\r\n\r\nmn\r\n"}},
		{"md", "md foo q\r\n", reqWant{name: "md", mode: codec.ModeQuiet, keys: []string{"foo"}, wire: "md foo q\r\nmn\r\n"}},
		{"ma", "ma foo D5 MD\r\n", reqWant{name: "ma", keys: []string{"foo"}}},
		{"me", "me foo\r\n", reqWant{name: "me", keys: []string{"foo"}}},
		{"me base64", "me Zm9v b\r\n", reqWant{name: "me", keys: []string{"foo"}}},
		{"me b must be the whole token", "me Zm9v bx\r\n", reqWant{name: "me", keys: []string{"Zm9v"}}},
		{"long multi-get", "get " + strings.Repeat("k ", 2000) + "\r\n", reqWant{name: "get", route: codec.RouteMulti, keys: slices.Repeat([]string{"k"}, 2000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, n, err := parse(t, codec.Options{}, tt.in)
			if err != nil {
				t.Fatalf("ParseRequest(%q): %v", tt.in, err)
			}
			w := tt.want
			if w.n == 0 {
				w.n = len(tt.in)
			}
			if w.wire == "" {
				w.wire = tt.in[:w.n]
			}
			var keys []string
			for _, k := range req.Keys {
				keys = append(keys, string(k))
			}
			if req.Name != w.name || req.Route != w.route || req.Mode != w.mode || n != w.n ||
				string(req.Wire) != w.wire || req.Close != w.close || !slices.Equal(keys, w.keys) {
				t.Errorf("ParseRequest(%q)\n got: %s\nwant: %s route=%s mode=%s keys=%q n=%d wire=%q close=%v",
					tt.in, describeRequest(req, n, err), w.name, routeNames[w.route], modeNames[w.mode], w.keys, w.n, w.wire, w.close)
			}
			if req.Cmd == 0 || CommandName(req.Cmd) != req.Name {
				t.Errorf("Cmd %d does not name %q", req.Cmd, req.Name)
			}
			checkPrefixes(t, codec.Options{}, tt.in[:n])
		})
	}
}

// checkPrefixes checks that every strict prefix of a valid request is
// incomplete.
func checkPrefixes(t *testing.T, l codec.Options, in string) {
	t.Helper()
	p := dialect.NewRequestParser(l)
	var req codec.Request
	for i := range len(in) {
		req.Reset()
		if _, err := p.ParseRequest([]byte(in[:i]), &req); !errors.Is(err, codec.ErrIncomplete) {
			t.Fatalf("prefix %q of %q: err %v, want ErrIncomplete", in[:i], in, err)
		}
	}
}

type rejectWant struct {
	reply   string
	close   bool
	forward bool
	discard int64
	n       int // 0 means len(input)
}

func TestParseRequestRejects(t *testing.T) {
	key251 := strings.Repeat("k", 251)
	const (
		bad     = "CLIENT_ERROR bad command line format\r\n"
		errLine = "ERROR\r\n"
		exptime = "CLIENT_ERROR invalid exptime argument\r\n"
		delta   = "CLIENT_ERROR invalid numeric delta argument\r\n"
		chunk   = "CLIENT_ERROR bad data chunk\r\n"
		large   = "SERVER_ERROR object too large for cache\r\n"
		tooLong = "CLIENT_ERROR line too long\r\n"
		usage   = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
	)
	tests := []struct {
		name   string
		limits codec.Options
		in     string
		want   rejectWant
	}{
		{"empty line", codec.Options{}, "\r\n", rejectWant{reply: errLine}},
		{"bare newline", codec.Options{}, "\n", rejectWant{reply: errLine}},
		{"spaces only", codec.Options{}, "   \r\n", rejectWant{reply: errLine}},
		{"one-letter verb", codec.Options{}, "x\r\n", rejectWant{reply: errLine}},
		{"unknown verb", codec.Options{}, "foo bar\r\n", rejectWant{reply: errLine}},
		{"verbs are case sensitive", codec.Options{}, "GET a\r\n", rejectWant{reply: errLine}},
		{"unknown meta verb", codec.Options{}, "mz a\r\n", rejectWant{reply: errLine}},
		{"NUL cuts the verb", codec.Options{}, "g\x00et a\r\n", rejectWant{reply: errLine}},
		{"HTTP closes silently", codec.Options{}, "POST / HTTP/1.1\r\n", rejectWant{close: true}},
		{"HTTP after a g verb is just unknown", codec.Options{}, "go / HTTP/1.1\r\n", rejectWant{reply: errLine}},
		{"admin command", codec.Options{}, "shutdown\r\n", rejectWant{reply: "CLIENT_ERROR shutdown is not supported by this proxy\r\n"}},
		{"lru_crawler", codec.Options{}, "lru_crawler metadump all\r\n", rejectWant{reply: "CLIENT_ERROR lru_crawler is not supported by this proxy\r\n"}},
		{"get without key", codec.Options{}, "get\r\n", rejectWant{reply: errLine}},
		{"get key too long", codec.Options{}, "get a " + key251 + "\r\n", rejectWant{reply: bad}},
		{"get key over MaxKey", codec.Options{MaxKey: 3}, "get abcd\r\n", rejectWant{reply: bad}},
		{"gat without exptime", codec.Options{}, "gat\r\n", rejectWant{reply: errLine}},
		{"gat bad exptime", codec.Options{}, "gat x a\r\n", rejectWant{reply: exptime}},
		{"gat exptime overflows a long", codec.Options{}, "gat 9223372036854775808 a\r\n", rejectWant{reply: exptime}},
		{"set too few tokens", codec.Options{}, "set k 0 0\r\n", rejectWant{reply: errLine}},
		{"set too many tokens", codec.Options{}, "set k 0 0 1 noreply x\r\n", rejectWant{reply: errLine}},
		{"set key too long", codec.Options{}, "set " + key251 + " 0 0 1\r\na\r\n", rejectWant{reply: bad, discard: 3, n: 263}},
		{"set key too long noreply is hidden", codec.Options{}, "set " + key251 + " 0 0 1 noreply\r\na\r\n", rejectWant{discard: 3, n: 271}},
		{"set bad flags", codec.Options{}, "set k x 0 1\r\na\r\n", rejectWant{reply: bad, discard: 3, n: 13}},
		{"set negative flags", codec.Options{}, "set k -1 0 1\r\na\r\n", rejectWant{reply: bad, discard: 3, n: 14}},
		{"set bad exptime", codec.Options{}, "set k 0 1x 1\r\na\r\n", rejectWant{reply: bad, discard: 3, n: 14}},
		{"set negative length", codec.Options{}, "set k 0 0 -1\r\n", rejectWant{reply: bad}},
		{"set length 2^31", codec.Options{}, "set k 0 0 2147483648\r\n", rejectWant{reply: bad}},
		{"set length INT_MAX-1", codec.Options{}, "set k 0 0 2147483646\r\n", rejectWant{reply: bad}},
		{"set length that wraps in int32", codec.Options{}, "set k 0 0 4294967297\r\n", rejectWant{reply: bad}},
		{"set length not a number", codec.Options{}, "set k 0 0 x\r\nab\r\n", rejectWant{reply: bad, n: 13}},
		{"set bad length noreply is hidden", codec.Options{}, "set k 0 0 x noreply\r\n", rejectWant{}},
		{"set noreply as length is hidden", codec.Options{}, "set k 0 0 noreply\r\n", rejectWant{}},
		{"set too large", codec.Options{}, "set k 0 0 2000000\r\n", rejectWant{forward: true, discard: 2000002}},
		{"set too large noreply", codec.Options{}, "set k 0 0 2000000 noreply\r\n", rejectWant{forward: true, discard: 2000002}},
		{"add too large keeps the old value", codec.Options{}, "add k 0 0 2000000\r\n", rejectWant{reply: large, discard: 2000002}},
		{"add too large noreply is hidden", codec.Options{}, "add k 0 0 2000000 noreply\r\n", rejectWant{discard: 2000002}},
		{"cas too large keeps the old value", codec.Options{}, "cas k 0 0 2000000 1\r\n", rejectWant{reply: large, discard: 2000002}},
		{"set over MaxValue", codec.Options{MaxValue: 10}, "set k 0 0 11\r\n", rejectWant{forward: true, discard: 13}},
		{"set INT_MAX-2 is too large but sane", codec.Options{}, "set k 0 0 2147483645\r\n", rejectWant{forward: true, discard: 2147483647}},
		{"set bad data chunk", codec.Options{}, "set k 0 0 1\r\nab\r\n", rejectWant{reply: chunk, n: 16}},
		{"set bad data chunk noreply is hidden", codec.Options{}, "set k 0 0 1 noreply\r\nab\r\n", rejectWant{n: 24}},
		{"cas missing unique", codec.Options{}, "cas k 0 0 1\r\na\r\n", rejectWant{reply: errLine, n: 13}},
		{"cas bad unique", codec.Options{}, "cas k 0 0 1 -1\r\na\r\n", rejectWant{reply: bad, discard: 3, n: 16}},
		{"cas noreply as unique is hidden", codec.Options{}, "cas k 0 0 1 noreply\r\na\r\n", rejectWant{discard: 3, n: 21}},
		{"incr without delta", codec.Options{}, "incr k\r\n", rejectWant{reply: errLine}},
		{"incr bad delta", codec.Options{}, "incr k x\r\n", rejectWant{reply: delta}},
		{"incr negative delta", codec.Options{}, "incr k -1\r\n", rejectWant{reply: delta}},
		{"incr delta 2^64", codec.Options{}, "incr k 18446744073709551616\r\n", rejectWant{reply: delta}},
		{"incr noreply as delta is hidden", codec.Options{}, "incr k noreply\r\n", rejectWant{}},
		{"decr key too long", codec.Options{}, "decr " + key251 + " 1\r\n", rejectWant{reply: bad}},
		{"touch bad exptime", codec.Options{}, "touch k x\r\n", rejectWant{reply: exptime}},
		{"touch bad exptime noreply is hidden", codec.Options{}, "touch k x noreply\r\n", rejectWant{}},
		{"delete without key", codec.Options{}, "delete\r\n", rejectWant{reply: errLine}},
		{"delete hold time", codec.Options{}, "delete k 1\r\n", rejectWant{reply: usage}},
		{"delete hold time noreply is hidden", codec.Options{}, "delete k 1 noreply\r\n", rejectWant{}},
		{"delete 0 0", codec.Options{}, "delete k 0 0\r\n", rejectWant{reply: usage}},
		{"delete too many tokens", codec.Options{}, "delete k 0 noreply x\r\n", rejectWant{reply: errLine}},
		{"delete key too long", codec.Options{}, "delete " + key251 + "\r\n", rejectWant{reply: bad}},
		{"flush_all bad delay", codec.Options{}, "flush_all x\r\n", rejectWant{reply: exptime}},
		{"flush_all too many tokens", codec.Options{}, "flush_all 1 2 3\r\n", rejectWant{reply: errLine}},
		{"verbosity without level", codec.Options{}, "verbosity\r\n", rejectWant{reply: errLine}},
		{"verbosity bad level", codec.Options{}, "verbosity x\r\n", rejectWant{reply: bad}},
		{"verbosity noreply only is hidden", codec.Options{}, "verbosity noreply\r\n", rejectWant{}},
		{"mg without key", codec.Options{}, "mg\r\n", rejectWant{reply: errLine}},
		{"mg key too long", codec.Options{}, "mg " + key251 + " v\r\n", rejectWant{reply: bad}},
		{"md without key", codec.Options{}, "md\r\n", rejectWant{reply: errLine}},
		{"ma without key", codec.Options{}, "ma\r\n", rejectWant{reply: errLine}},
		{"me without key", codec.Options{}, "me\r\n", rejectWant{reply: bad}},
		{"ms without length", codec.Options{}, "ms k\r\n", rejectWant{reply: bad}},
		{"ms bad length", codec.Options{}, "ms k x\r\nhi\r\n", rejectWant{reply: bad, n: 8}},
		{"ms negative length", codec.Options{}, "ms k -1\r\n", rejectWant{reply: bad}},
		{"ms bad length and too many flags", codec.Options{}, "ms k x" + strings.Repeat(" T1", 17) + "\r\n", rejectWant{reply: "CLIENT_ERROR options flags too long\r\n"}},
		{"ms key too long", codec.Options{}, "ms " + key251 + " 2\r\nhi\r\n", rejectWant{reply: bad, discard: 4, n: 258}},
		{"ms too many flags", codec.Options{}, "ms k 2" + strings.Repeat(" T1", 17) + "\r\nhi\r\n", rejectWant{reply: "CLIENT_ERROR options flags too long\r\n", discard: 4, n: 59}},
		{"ms too large", codec.Options{}, "ms k 2000000 T0\r\n", rejectWant{forward: true, discard: 2000002}},
		{"ms bad data chunk, quiet or not", codec.Options{}, "ms k 2 q\r\nhix\r\n", rejectWant{reply: chunk, n: 14}},
		{"line too long", codec.Options{}, "set k 0 0 1" + strings.Repeat(" ", 2040) + "\r\n", rejectWant{reply: tooLong, close: true}},
		{"line too long without newline", codec.Options{}, strings.Repeat("x", 2049), rejectWant{reply: tooLong, close: true}},
		{"retrieval verb must start early", codec.Options{}, strings.Repeat(" ", 2048) + "get a" + strings.Repeat(" a", 100), rejectWant{reply: tooLong, close: true}},
		{"denied flush_all", codec.Options{Deny: []string{"flush_all"}}, "flush_all\r\n", rejectWant{reply: "CLIENT_ERROR flush_all is disabled for this pool\r\n"}},
		{"denied flush_all noreply is hidden", codec.Options{Deny: []string{"flush_all"}}, "flush_all noreply\r\n", rejectWant{}},
		{"denied get", codec.Options{Deny: []string{"get"}}, "get a\r\n", rejectWant{reply: "CLIENT_ERROR get is disabled for this pool\r\n"}},
		{"denied set swallows its value", codec.Options{Deny: []string{"set"}}, "set k 0 0 3\r\nabc\r\n", rejectWant{reply: "CLIENT_ERROR set is disabled for this pool\r\n", discard: 5, n: 13}},
		{"denied ms swallows its value", codec.Options{Deny: []string{"ms"}}, "ms k 3\r\nabc\r\n", rejectWant{reply: "CLIENT_ERROR ms is disabled for this pool\r\n", discard: 5, n: 8}},
		{"denied stats", codec.Options{Deny: []string{"stats"}}, "stats\r\n", rejectWant{reply: "CLIENT_ERROR stats is disabled for this pool\r\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, n, err := parse(t, tt.limits, tt.in)
			if err == nil {
				t.Fatalf("ParseRequest(%q) accepted it", tt.in)
			}
			pe := codectest.ProtocolError(t, err)
			w := tt.want
			if w.n == 0 {
				w.n = len(tt.in)
			}
			if n != 0 || pe.Reply != w.reply || pe.Close != w.close || pe.Forward != w.forward || pe.Discard != w.discard || pe.N != w.n {
				t.Errorf("ParseRequest(%q)\n got: n=%d %s forward=%v\nwant: reply=%q close=%v forward=%v discard=%d n=%d",
					tt.in, n, describeRequest(nil, n, err), pe.Forward, w.reply, w.close, w.forward, w.discard, w.n)
			}
		})
	}
}

func TestParseRequestIncomplete(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"nothing", ""},
		{"partial line", "get fo"},
		{"line and CR", "get foo\r"},
		{"value missing", "set k 0 0 5\r\n"},
		{"value partial", "set k 0 0 5\r\nab"},
		{"terminator missing", "set k 0 0 5\r\nabcde"},
		{"terminator partial", "set k 0 0 5\r\nabcde\r"},
		{"huge value announced", "set k 0 0 1000000\r\n"},
		{"long multi-get in progress", "get " + strings.Repeat("k ", 3000)},
		{"exactly MaxCommandLine", strings.Repeat("x", 2048)},
		{"MaxCommandLine and CR", strings.Repeat("x", 2048) + "\r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, n, err := parse(t, codec.Options{}, tt.in); !errors.Is(err, codec.ErrIncomplete) || n != 0 {
				t.Errorf("ParseRequest(%q) = %d, %v; want 0, ErrIncomplete", tt.in, n, err)
			}
		})
	}
}

func TestParseRequestReusesStorage(t *testing.T) {
	p := dialect.NewRequestParser(codec.Options{})
	var req codec.Request
	in := []byte("get a b c d e f\r\n")
	if _, err := p.ParseRequest(in, &req); err != nil {
		t.Fatal(err)
	}
	copy(in, "XXXXXXXXXXXXXXXXX") // the client buffer is reused
	if string(req.Wire) != "get a b c d e f\r\n" || string(req.Keys[2]) != "c" {
		t.Fatalf("request changed with its input: wire %q keys %q", req.Wire, req.Keys)
	}
	buf := &req.Buf[:1][0]
	req.Reset()
	if _, err := p.ParseRequest([]byte("mg Zm9v b\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	if &req.Buf[0] != buf {
		t.Errorf("req.Buf was reallocated although it was large enough")
	}
	if string(req.Keys[0]) != "foo" || string(req.Wire) != "mg Zm9v b\r\n" {
		t.Errorf("got keys %q wire %q", req.Keys, req.Wire)
	}
}

func TestParseRequestPipeline(t *testing.T) {
	in := "get a\r\nset k 0 0 1 noreply\r\nx\r\nmg k q v\r\nmn\r\ndelete k\r\n"
	want := []string{"get", "set", "mg", "mn", "delete"}
	p := dialect.NewRequestParser(codec.Options{})
	var got []string
	for buf := []byte(in); len(buf) > 0; {
		var req codec.Request
		n, err := p.ParseRequest(buf, &req)
		if err != nil {
			t.Fatalf("at %q: %v", buf, err)
		}
		got = append(got, req.Name)
		buf = buf[n:]
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
