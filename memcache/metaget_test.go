package memcache

import (
	"errors"
	"testing"

	"shardproxy/codec"
)

func TestMetaGetRequest(t *testing.T) {
	tests := []struct{ in, wire, key string }{
		{"get foo\r\n", "mg foo k f v\r\n", "foo"},
		{"gets foo\r\n", "mg foo k f c v\r\n", "foo"},
		{"get  foo \r\n", "mg foo k f v\r\n", "foo"},
		{"get foo bar\r\n", "get foo bar\r\n", ""}, // split, sent as text
		{"gat 10 foo\r\n", "gat 10 foo\r\n", ""},
		{"mg foo v\r\n", "mg foo v\r\n", ""},
	}
	// The parser with MetaGets rewrites as it parses; MetaGet rewrites a
	// request parsed without it (as a Lua pool's is) to the same.
	later := codec.Options{ProxyErrors: true, ProxyWire: true}
	for _, tt := range append(tests, struct{ in, wire, key string }{"delete foo\r\n", "delete foo\r\n", ""}) {
		req, n, err := parse(t, codec.Options{MetaGets: true}, tt.in)
		if err != nil || n != len(tt.in) {
			t.Fatalf("%q: %d, %v", tt.in, n, err)
		}
		plain, _, err := parse(t, later, tt.in)
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if MetaGet(plain) != (tt.key != "") || string(plain.Wire) != string(req.Wire) || plain.Mode != req.Mode ||
			plain.Route != req.Route || plain.Name != req.Name || len(plain.Keys) != len(req.Keys) ||
			len(req.Keys) == 1 && string(plain.Keys[0]) != string(req.Keys[0]) {
			t.Errorf("%q: MetaGet made %q (%s, keys %q), the parser %q (%s, keys %q)", tt.in,
				plain.Wire, modeNames[plain.Mode], plain.Keys, req.Wire, modeNames[req.Mode], req.Keys)
		}
		if string(req.Wire) != tt.wire {
			t.Errorf("%q: wire %q, want %q", tt.in, req.Wire, tt.wire)
		}
		if rewritten := tt.key != ""; rewritten != (req.Mode == codec.ModeRewrite) {
			t.Errorf("%q: mode %s", tt.in, modeNames[req.Mode])
		} else if rewritten && (len(req.Keys) != 1 || string(req.Keys[0]) != tt.key || req.Route != codec.RouteKey) {
			t.Errorf("%q: keys %q, route %s", tt.in, req.Keys, routeNames[req.Route])
		}
	}
}

func TestMetaGetReply(t *testing.T) {
	tests := []struct {
		name string
		in   string
		gets bool
		kind codec.ReplyKind
		show string
		err  error
	}{
		{name: "hit", in: "VA 3 kfoo f5\r\nbar\r\n", kind: codec.ReplyOK, show: "VALUE foo 5 3\r\nbar\r\nEND\r\n"},
		{name: "hit, gets", in: "VA 3 kfoo f5 c77\r\nbar\r\n", gets: true, kind: codec.ReplyOK, show: "VALUE foo 5 3 77\r\nbar\r\nEND\r\n"},
		{name: "flags in another order", in: "VA 1 c7 f2 kfoo\r\nx\r\n", gets: true, kind: codec.ReplyOK, show: "VALUE foo 2 1 7\r\nx\r\nEND\r\n"},
		{name: "hit on an item stored under a base64 key", in: "VA 3 kZm9v b f0\r\nbar\r\n", kind: codec.ReplyOK, show: "VALUE foo 0 3\r\nbar\r\nEND\r\n"},
		{name: "base64 key of another item", in: "VA 3 kZm9x b f0\r\nbar\r\n", err: ErrUnexpectedReply},
		{name: "base64 key that does not decode", in: "VA 3 kZm9 b f0\r\nbar\r\n", err: ErrUnexpectedReply},
		{name: "miss", in: "EN kfoo\r\n", kind: codec.ReplyMiss, show: "END\r\n"},
		{name: "miss of memcached before 1.6.10", in: "EN\r\n", kind: codec.ReplyMiss, show: "END\r\n"},
		{name: "server error", in: "SERVER_ERROR out of memory\r\n", kind: codec.ReplyError, show: "SERVER_ERROR out of memory\r\n"},
		{name: "another key's hit", in: "VA 3 kbar f5\r\nbar\r\n", err: ErrUnexpectedReply},
		{name: "another key's miss", in: "EN kbar\r\n", err: ErrUnexpectedReply},
		{name: "hit without the key", in: "VA 3 f5\r\nbar\r\n", err: ErrBadValueLine},
		{name: "hit without flags", in: "VA 3 kfoo\r\nbar\r\n", err: ErrBadValueLine},
		{name: "gets hit without cas", in: "VA 3 kfoo f5\r\nbar\r\n", gets: true, err: ErrBadValueLine},
		{name: "text reply", in: "VALUE foo 5 3\r\nbar\r\nEND\r\n", err: ErrUnexpectedReply},
		{name: "a store's reply", in: "HD\r\n", err: ErrUnexpectedReply},
		{name: "bad length", in: "VA x kfoo f5\r\nbar\r\n", err: ErrBadValueLine},
		{name: "data without terminator", in: "VA 3 kfoo f5\r\nbarXY", err: ErrValueTerminator},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "get foo\r\n"
			if tt.gets {
				in = "gets foo\r\n"
			}
			req, _, _ := parse(t, codec.Options{MetaGets: true}, in)
			n, kind, err := dialect.ParseReply([]byte(tt.in), req)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseReply: %d, %v; want %v", n, err, tt.err)
				}
				return
			}
			if err != nil || n != len(tt.in) || kind != tt.kind {
				t.Fatalf("ParseReply: %d, %s, %v", n, kindNames[kind], err)
			}
			if show := dialect.AppendReply(nil, req, []byte(tt.in), kind); string(show) != tt.show {
				t.Errorf("shows %q, want %q", show, tt.show)
			}
			head, data, tail := dialect.AppendReplyHead(nil, req, []byte(tt.in), kind)
			if parts := string(head) + string(data) + tail; parts != tt.show {
				t.Errorf("shows in parts %q, want %q", parts, tt.show)
			}
		})
	}
}
