package resp

import (
	"strconv"
	"testing"

	"shardproxy/codec"
)

var keyspaceOpts = codec.Options{Keyspace: true}

// TestParseCursor: the cursors redis-server 7.0.15 takes and refuses, as
// observed with redis-cli (SCAN "-1" is SCAN 18446744073709551615; SCAN ""
// is SCAN 0; SCAN " 5" is "-ERR invalid cursor").
func TestParseCursor(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"", 0, true},
		{"007", 7, true},
		{"+5", 5, true},
		{"-0", 0, true},
		{"-1", 1<<64 - 1, true},
		{"-18446744073709551615", 1, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"00000000000000000000000000000001", 1, true},
		{"18446744073709551616", 0, false},
		{"-18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"1a", 0, false},
		{" 5", 0, false},
		{"5 ", 0, false},
		{"-", 0, false},
		{"+", 0, false},
		{"+-5", 0, false},
		{"0x10", 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseCursor([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseCursor(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestCursorLayout pins the documented layout: server cursor × 4096 +
// server number.
func TestCursorLayout(t *testing.T) {
	tests := []struct {
		server int
		sc     uint64
		want   uint64
	}{
		{0, 0, 0},
		{1, 0, 1},
		{2, 0, 2},
		{0, 1, 4096},
		{2, 5, 5*4096 + 2},
		{4095, 1<<52 - 1, 1<<64 - 1},
	}
	for _, tc := range tests {
		got, ok := JoinCursor(tc.server, tc.sc)
		if !ok || got != tc.want {
			t.Errorf("JoinCursor(%d, %d) = %d, %v; want %d", tc.server, tc.sc, got, ok, tc.want)
		}
		if s, sc := SplitCursor(got); s != tc.server || sc != tc.sc {
			t.Errorf("SplitCursor(%d) = %d, %d; want %d, %d", got, s, sc, tc.server, tc.sc)
		}
	}
	for _, bad := range []struct {
		server int
		sc     uint64
	}{{-1, 0}, {4096, 0}, {0, 1 << 52}, {0, 1<<64 - 1}} {
		if _, ok := JoinCursor(bad.server, bad.sc); ok {
			t.Errorf("JoinCursor(%d, %d) fits", bad.server, bad.sc)
		}
	}
}

// TestScanRequest: the parser sends a SCAN to the server its cursor names
// with that server's cursor in place of the proxy's, options unchanged;
// a cursor redis-server refuses is refused with its words; a pool that
// cannot reach every server refuses SCAN.
func TestScanRequest(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		target int
		wire   string
	}{
		{"start", mb("SCAN", "0"), 0, mb("SCAN", "0")},
		{"options pass", mb("scan", "8194", "MATCH", "k*", "COUNT", "10", "TYPE", "string"), 2,
			mb("scan", "2", "MATCH", "k*", "COUNT", "10", "TYPE", "string")},
		{"next server", mb("SCAN", "1"), 1, mb("SCAN", "0")},
		{"inline", "SCAN 4097 count 5\r\n", 1, mb("SCAN", "1", "count", "5")},
		{"biggest", mb("SCAN", "18446744073709551615"), 4095, mb("SCAN", "4503599627370495")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, keyspaceOpts, tc.in)
			if err != nil {
				t.Fatal(describeRequest(req, n, err))
			}
			if req.Route != codec.RouteServer || req.Mode != codec.ModeRewrite || req.Target != tc.target ||
				string(req.Wire) != tc.wire || len(req.Keys) != 0 || n != len(tc.in) {
				t.Fatalf("got route %d mode %d target %d wire %q keys %q n %d; want target %d wire %q",
					req.Route, req.Mode, req.Target, req.Wire, req.Keys, n, tc.target, tc.wire)
			}
		})
	}
	for _, in := range []string{mb("SCAN", "1a"), mb("SCAN", " 5"), mb("SCAN", "18446744073709551616")} {
		if req, n, err := parse(t, keyspaceOpts, in); describeRequest(req, n, err) !=
			`reject reply="-ERR invalid cursor\r\n" close=false n=`+strconv.Itoa(len(in)) {
			t.Errorf("%q: %s", in, describeRequest(req, n, err))
		}
	}
	req, n, err := parse(t, codec.Options{}, mb("SCAN", "0"))
	if got := describeRequest(req, n, err); got !=
		`reject reply="-ERR SCAN is not supported by shardproxy: it needs every server\r\n" close=false n=21` {
		t.Errorf("SCAN without Keyspace: %s", got)
	}
}

// TestScanReply: the server's cursor becomes the proxy's; a server's end
// leads to the next server, the last server's to 0; errors pass.
func TestScanReply(t *testing.T) {
	keys := "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
	tests := []struct {
		name            string
		target, servers int
		reply, want     string
	}{
		{"middle", 1, 3, "*2\r\n$2\r\n17\r\n" + keys, "*2\r\n$5\r\n69633\r\n" + keys},
		{"server done", 1, 3, "*2\r\n$1\r\n0\r\n" + keys, "*2\r\n$1\r\n2\r\n" + keys},
		{"last done", 2, 3, "*2\r\n$1\r\n0\r\n*0\r\n", "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"one server", 0, 1, "*2\r\n$1\r\n0\r\n" + keys, "*2\r\n$1\r\n0\r\n" + keys},
		{"error", 0, 3, "-ERR syntax error\r\n", "-ERR syntax error\r\n"},
		{"busy", 0, 3, "-BUSY Redis is busy\r\n", "-BUSY Redis is busy\r\n"},
		{"cursor too big", 0, 3, "*2\r\n$16\r\n4503599627370496\r\n*0\r\n",
			"-ERR server cursor 4503599627370496 does not fit shardproxy's SCAN cursor\r\n"},
		{"not a scan reply", 0, 3, "*1\r\n$1\r\n0\r\n", "-ERR unexpected reply from the server to SCAN\r\n"},
		{"cursor not a number", 0, 3, "*2\r\n$1\r\nx\r\n*0\r\n", "-ERR unexpected reply from the server to SCAN\r\n"},
		{"too many servers", 0, 4097, "*2\r\n$1\r\n0\r\n*0\r\n",
			"-ERR SCAN is not supported by shardproxy in a pool of more than 4096 servers\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &codec.Request{Name: "scan", Cmd: cmdSCAN, Route: codec.RouteServer, Mode: codec.ModeRewrite,
				Target: tc.target, Servers: tc.servers}
			kind := codec.ReplyOK
			if tc.reply[0] == '-' {
				kind = codec.ReplyError
			}
			if got := string(dialect.AppendReply([]byte("x"), req, []byte(tc.reply), kind)); got != "x"+tc.want {
				t.Fatalf("got %q, want %q", got, "x"+tc.want)
			}
		})
	}
}

// FuzzCursor: ParseCursor never panics, agrees with strconv on plain
// digits, and a proxy cursor survives split, join, print and parse.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"0", "", "-1", "+5", "007", "18446744073709551615", "18446744073709551616", " 5", "1a", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := ParseCursor([]byte(s))
		if u, err := strconv.ParseUint(s, 10, 64); err == nil && (!ok || u != c) {
			t.Fatalf("ParseCursor(%q) = %d, %v; strconv says %d", s, c, ok, u)
		}
		if !ok {
			return
		}
		server, sc := SplitCursor(c)
		back, fits := JoinCursor(server, sc)
		if !fits || back != c {
			t.Fatalf("%d split to %d, %d joins to %d, %v", c, server, sc, back, fits)
		}
		if again, ok := ParseCursor(strconv.AppendUint(nil, c, 10)); !ok || again != c {
			t.Fatalf("%d printed does not parse back: %d, %v", c, again, ok)
		}
	})
}

// FuzzScanReply: whatever a server sends, the client gets one whole reply:
// an error, or a cursor and the server's keys.
func FuzzScanReply(f *testing.F) {
	f.Add([]byte("*2\r\n$2\r\n17\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"), 1, 3)
	f.Add([]byte("*2\r\n$1\r\n0\r\n*0\r\n"), 2, 3)
	f.Add([]byte("-ERR syntax error\r\n"), 0, 1)
	f.Fuzz(func(t *testing.T, reply []byte, target, servers int) {
		m, kind, err := dialect.ParseReply(reply, nil)
		if err != nil || kind == codec.ReplyError || kind == codec.ReplyFailure {
			return // the backend reader frames replies first; errors pass as they are
		}
		reply = reply[:m]
		target &= MaxScanServers - 1
		req := &codec.Request{Name: "scan", Cmd: cmdSCAN, Route: codec.RouteServer, Mode: codec.ModeRewrite,
			Target: target, Servers: servers}
		out := dialect.AppendReply(nil, req, reply, codec.ReplyOK)
		n, _, err := dialect.ParseReply(out, nil)
		if err != nil || n != len(out) {
			t.Fatalf("%q gives %q: %d of %d bytes framed, %v", reply, out, n, len(out), err)
		}
	})
}
