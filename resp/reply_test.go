package resp

import (
	"errors"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

// validReplies are well-formed replies and their kinds.
var validReplies = []struct {
	name string
	in   string
	kind codec.ReplyKind
}{
	{"simple string", "+OK\r\n", codec.ReplyOK},
	{"empty simple string", "+\r\n", codec.ReplyOK},
	{"simple string with CR inside", "+a\rb\r\n", codec.ReplyOK},
	{"error", "-ERR wrong type\r\n", codec.ReplyError},
	{"error code only", "-WRONGTYPE\r\n", codec.ReplyError},
	{"busykey is no failure", "-BUSYKEY Target key name already exists.\r\n", codec.ReplyError},
	{"busygroup is no failure", "-BUSYGROUP Consumer Group name already exists\r\n", codec.ReplyError},
	{"loading", "-LOADING Redis is loading the dataset in memory\r\n", codec.ReplyFailure},
	{"busy", "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n", codec.ReplyFailure},
	{"oom", "-OOM command not allowed when used memory > 'maxmemory'.\r\n", codec.ReplyFailure},
	{"integer", ":42\r\n", codec.ReplyOK},
	{"negative integer", ":-9223372036854775808\r\n", codec.ReplyOK},
	{"zero", ":0\r\n", codec.ReplyOK},
	{"bulk", "$3\r\nfoo\r\n", codec.ReplyOK},
	{"empty bulk", "$0\r\n\r\n", codec.ReplyOK},
	{"binary bulk", "$4\r\n\r\n\x00\n\r\n", codec.ReplyOK},
	{"null bulk", "$-1\r\n", codec.ReplyMiss},
	{"array", "*2\r\n$1\r\na\r\n:1\r\n", codec.ReplyOK},
	{"empty array", "*0\r\n", codec.ReplyOK},
	{"null array", "*-1\r\n", codec.ReplyMiss},
	{"array of nulls", "*2\r\n$-1\r\n*-1\r\n", codec.ReplyOK},
	{"array with an error", "*2\r\n+OK\r\n-ERR x\r\n", codec.ReplyOK},
	{"nested arrays", "*2\r\n*2\r\n:1\r\n*1\r\n$1\r\nx\r\n*0\r\n", codec.ReplyOK},
	{"deep nesting", strings.Repeat("*1\r\n", 10000) + ":1\r\n", codec.ReplyOK},
}

func TestParseReply(t *testing.T) {
	for _, tc := range validReplies {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in + "+NEXT\r\n" // what follows is not part of the reply
			n, kind, err := dialect.ParseReply([]byte(in), nil)
			if err != nil || n != len(tc.in) || kind != tc.kind {
				t.Fatalf("got n=%d kind=%s err=%v, want n=%d kind=%s", n, kindNames[kind], err, len(tc.in), kindNames[tc.kind])
			}
			for _, i := range codectest.PrefixLengths(len(tc.in), 256) {
				if m, _, err := dialect.ParseReply([]byte(tc.in[:i]), nil); !errors.Is(err, codec.ErrIncomplete) || m != 0 {
					t.Fatalf("prefix %q: n=%d err=%v, want incomplete", tc.in[:i], m, err)
				}
			}
		})
	}
}

func TestParseReplyErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  error
	}{
		{"unknown type", "?x\r\n", ErrReplyType},
		{"RESP3 map", "%1\r\n+a\r\n+b\r\n", ErrReplyType},
		{"nested unknown type", "*1\r\n!x\r\n", ErrReplyType},
		{"bare LF", "+OK\n", ErrReplyLineEnding},
		{"type then LF", "+\n", ErrReplyLineEnding},
		{"integer not a number", ":x\r\n", ErrReplyInteger},
		{"integer empty", ":\r\n", ErrReplyInteger},
		{"integer leading zero", ":01\r\n", ErrReplyInteger},
		{"bulk length not a number", "$x\r\n", ErrReplyLength},
		{"bulk length -2", "$-2\r\n", ErrReplyLength},
		{"bulk length over the limit", "$1073741825\r\n", ErrReplyLength},
		{"bulk without CRLF", "$3\r\nfooXY", ErrReplyBulkEnding},
		{"array count not a number", "*x\r\n", ErrReplyLength},
		{"array count -2", "*-2\r\n", ErrReplyLength},
		{"line too long", "+" + strings.Repeat("x", MaxReplyLine+2), ErrReplyLineTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, _, err := dialect.ParseReply([]byte(tc.in), nil)
			if !errors.Is(err, tc.err) || n != 0 {
				t.Fatalf("got n=%d err=%v, want %v", n, err, tc.err)
			}
			if !strings.HasPrefix(err.Error(), "resp: ") {
				t.Fatalf("error %q has no package prefix", err)
			}
		})
	}
}

func TestAppendReplyAndError(t *testing.T) {
	if got := string(dialect.AppendReply([]byte("x"), nil, []byte("$1\r\na\r\n"), codec.ReplyOK)); got != "x$1\r\na\r\n" {
		t.Errorf("AppendReply: %q", got)
	}
	tests := []struct {
		kind codec.ErrorKind
		msg  string
		want string
	}{
		{codec.ErrClient, "bad", "-ERR bad\r\n"},
		{codec.ErrServer, "backend failure: timeout", "-ERR backend failure: timeout\r\n"},
		{codec.ErrUnknownCommand, "unknown command", "-ERR unknown command\r\n"},
		{codec.ErrCrossServer, "keys in request don't hash to the same server", "-CROSSSLOT keys in request don't hash to the same server\r\n"},
		{codec.ErrServer, "two\r\nlines", "-ERR two  lines\r\n"},
	}
	for _, tc := range tests {
		if got := string(dialect.AppendError(nil, tc.kind, tc.msg)); got != tc.want {
			t.Errorf("AppendError(%d, %q) = %q, want %q", tc.kind, tc.msg, got, tc.want)
		}
	}
}

func TestHandshake(t *testing.T) {
	tests := []struct {
		o    codec.HandshakeOptions
		want []string
	}{
		{codec.HandshakeOptions{}, []string{mb("ping")}},
		{codec.HandshakeOptions{Password: "pw"}, []string{mb("auth", "pw"), mb("ping")}},
		{codec.HandshakeOptions{Password: "pw", Username: "app", DB: 3}, []string{mb("auth", "app", "pw"), mb("select", "3"), mb("ping")}},
		{codec.HandshakeOptions{DB: 2}, []string{mb("select", "2"), mb("ping")}},
	}
	for _, tc := range tests {
		reqs := dialect.Handshake(tc.o)
		if len(reqs) != len(tc.want) {
			t.Fatalf("%+v: %d requests, want %d", tc.o, len(reqs), len(tc.want))
		}
		for i, r := range reqs {
			if string(r.Wire) != tc.want[i] || r.Cmd == 0 || CommandName(r.Cmd) != r.Name {
				t.Errorf("%+v: request %d is %s %q, want %q", tc.o, i, r.Name, r.Wire, tc.want[i])
			}
		}
	}
	for _, ok := range []string{"+OK\r\n", "+PONG\r\n"} {
		if _, kind, err := dialect.ParseReply([]byte(ok), nil); err != nil || kind != codec.ReplyOK {
			t.Errorf("handshake reply %q: %s %v", ok, kindNames[kind], err)
		}
	}
}
