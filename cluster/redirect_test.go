package cluster

import (
	"testing"

	"shardproxy/codec"
)

func TestParseRedirect(t *testing.T) {
	const from = "10.0.0.9:7000"
	tests := []struct {
		reply string
		want  *RedirectError
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", &RedirectError{Slot: 3999, Addr: "127.0.0.1:6381"}},
		{"-ASK 3999 127.0.0.1:6381\r\n", &RedirectError{Ask: true, Slot: 3999, Addr: "127.0.0.1:6381"}},
		{"-MOVED 0 redis-1.example:7000\r\n", &RedirectError{Addr: "redis-1.example:7000"}},
		{"-MOVED 16383 ::1:7000\r\n", &RedirectError{Slot: 16383, Addr: "[::1]:7000"}},
		{"-MOVED 12 :7001\r\n", &RedirectError{Slot: 12, Addr: "10.0.0.9:7001"}}, // unknown endpoint
		{"-ASK 00012 h:65535\r\n", &RedirectError{Ask: true, Slot: 12, Addr: "h:65535"}},

		// Malformed: never followed.
		{"-MOVED 16384 127.0.0.1:6381\r\n", nil},
		{"-MOVED -1 127.0.0.1:6381\r\n", nil},
		{"-MOVED +1 127.0.0.1:6381\r\n", nil},
		{"-MOVED 123456 127.0.0.1:6381\r\n", nil},
		{"-MOVED  127.0.0.1:6381\r\n", nil},
		{"-MOVED 1 127.0.0.1\r\n", nil},
		{"-MOVED 1 127.0.0.1:\r\n", nil},
		{"-MOVED 1 127.0.0.1:0\r\n", nil},
		{"-MOVED 1 127.0.0.1:65536\r\n", nil},
		{"-MOVED 1 127.0.0.1:12x\r\n", nil},
		{"-MOVED 1 127.0.0.1:6381 extra\r\n", nil},
		{"-MOVED 1 127.0.0.1:6381", nil},
		{"-MOVED 1 127.0.0.1:6381\n", nil},
		{"-MOVED 1 [::1]:6381\r\n", nil},
		{"-MOVED 1 a/b:6381\r\n", nil},
		{"-MOVED 1 a\x00b:6381\r\n", nil},
		{"-MOVED 1\r\n", nil},
		{"-MOVED\r\n", nil},
		{"-ASKING 1 h:1\r\n", nil},
		{"-moved 1 h:1\r\n", nil},
		{"-ERR 1 h:1\r\n", nil},
		{"+MOVED 1 h:1\r\n", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.reply, func(t *testing.T) {
			got, ok := ParseRedirect([]byte(tt.reply), from)
			if ok != (tt.want != nil) {
				t.Fatalf("ok = %v, redirect %+v", ok, got)
			}
			if ok && *got != *tt.want {
				t.Fatalf("got %+v, want %+v", *got, *tt.want)
			}
		})
	}
	// A host longer than a DNS name is refused.
	long := make([]byte, maxHost+1)
	for i := range long {
		long[i] = 'a'
	}
	if _, ok := ParseRedirect([]byte("-MOVED 1 "+string(long)+":1\r\n"), from); ok {
		t.Fatal("a 256-byte host was accepted")
	}
	e := &RedirectError{Ask: true, Slot: 7, Addr: "h:1"}
	if e.Error() != "cluster: ASK 7 h:1" {
		t.Fatalf("Error() = %q", e.Error())
	}
}

func TestAskingFraming(t *testing.T) {
	req := request(t, "GET", "k")
	var pair codec.Request
	setAsking(&pair, req)
	if want := "*1\r\n$6\r\nASKING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"; string(pair.Wire) != want {
		t.Fatalf("wire %q", pair.Wire)
	}
	for _, tt := range []struct {
		reply string
		kind  codec.ReplyKind
	}{
		{"+OK\r\n$1\r\nv\r\n", codec.ReplyOK},
		{"+OK\r\n$-1\r\n", codec.ReplyMiss},
		{"+OK\r\n-MOVED 1 h:1\r\n", codec.ReplyError},
		{"+OK\r\n*2\r\n$1\r\na\r\n:1\r\n", codec.ReplyOK},
	} {
		buf := []byte(tt.reply + "+PONG\r\n") // the next reply on the socket stays unread
		n, kind, err := masterDialect.ParseReply(buf, &pair)
		if err != nil || n != len(tt.reply) || kind != tt.kind {
			t.Errorf("%q: n %d kind %d err %v", tt.reply, n, kind, err)
		}
		for i := range len(tt.reply) {
			if _, _, err := masterDialect.ParseReply([]byte(tt.reply[:i]), &pair); err != codec.ErrIncomplete {
				t.Errorf("%q: prefix of %d bytes: %v", tt.reply, i, err)
			}
		}
		rest, err := splitAsking([]byte(tt.reply))
		if err != nil || string(rest) != tt.reply[5:] {
			t.Errorf("splitAsking(%q) = %q, %v", tt.reply, rest, err)
		}
	}
	if _, err := splitAsking([]byte("-ERR no\r\n$1\r\nv\r\n")); err == nil {
		t.Error("splitAsking accepted a refused ASKING")
	}
	// A plain request is framed as resp frames it.
	if n, _, err := masterDialect.ParseReply([]byte("+OK\r\n$1\r\nv\r\n"), req); n != 5 || err != nil {
		t.Errorf("plain request: n %d err %v", n, err)
	}
	reqs := replicaDialect.Handshake(codec.HandshakeOptions{Password: "pw"})
	if len(reqs) != 3 || string(reqs[2].Wire) != "*1\r\n$8\r\nREADONLY\r\n" || reqs[0].Name != "auth" {
		t.Fatalf("replica handshake %v", reqs)
	}
	if reqs := masterDialect.Handshake(codec.HandshakeOptions{}); len(reqs) != 1 || reqs[0].Name != "ping" {
		t.Fatalf("master handshake %v", reqs)
	}
}
