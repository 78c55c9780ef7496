package resp

import (
	"testing"

	"shardproxy/codec"
)

// TestClientReply checks what the session reads of a CLIENT REPLY
// (ClientReply) and that OFF and SKIP answer nothing of their own.
func TestClientReply(t *testing.T) {
	tests := []struct {
		in    string
		mode  ReplyMode
		local string
	}{
		{mb("CLIENT", "REPLY", "ON"), ReplyOn, "+OK\r\n"},
		{mb("client", "reply", "Off"), ReplyOff, ""},
		{mb("CLIENT", "REPLY", "skip"), ReplySkip, ""},
		{mb("ECHO", "x"), 0, "$1\r\nx\r\n"},
		{mb("PING"), 0, "+PONG\r\n"},
	}
	for _, tc := range tests {
		req, _, err := parse(t, codec.Options{}, tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := ClientReply(req); got != tc.mode {
			t.Errorf("%q: ClientReply = %d, want %d", tc.in, got, tc.mode)
		}
		if got := string(dialect.AppendLocal(nil, req, testEnv{})); got != tc.local {
			t.Errorf("%q: local answer %q, want %q", tc.in, got, tc.local)
		}
	}
}
