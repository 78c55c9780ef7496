package memcache

import (
	"testing"

	"shardproxy/codec"
)

type env struct{}

func (env) Version() string { return "shardproxy 0.1" }
func (env) Stats() []codec.Stat {
	return []codec.Stat{{Name: "uptime", Value: "10"}, {Name: "bad name", Value: "a\r\nb"}}
}

func TestAppendLocal(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"version\r\n", "VERSION shardproxy 0.1\r\n"},
		{"verbosity 1\r\n", "OK\r\n"},
		{"verbosity 1 noreply\r\n", ""},
		{"stats\r\n", "STAT uptime 10\r\nSTAT bad_name a  b\r\nEND\r\n"},
		{"stats items\r\n", "STAT uptime 10\r\nSTAT bad_name a  b\r\nEND\r\n"},
		{"mn\r\n", "MN\r\n"},
		{"gat 10\r\n", "END\r\n"},
		{"quit\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			req := mustParse(t, tt.in)
			if req.Route != codec.RouteLocal {
				t.Fatalf("%q routes %s", tt.in, routeNames[req.Route])
			}
			if got := string(dialect.AppendLocal([]byte("x"), req, env{})); got != "x"+tt.want {
				t.Errorf("AppendLocal = %q, want %q", got, "x"+tt.want)
			}
		})
	}
}

func TestAppendError(t *testing.T) {
	tests := []struct {
		kind codec.ErrorKind
		msg  string
		want string
	}{
		{codec.ErrClient, "bad thing", "CLIENT_ERROR bad thing\r\n"},
		{codec.ErrServer, "backend timed out", "SERVER_ERROR backend timed out\r\n"},
		{codec.ErrServer, "two\r\nlines", "SERVER_ERROR two  lines\r\n"},
		{codec.ErrUnknownCommand, "ignored", "ERROR\r\n"},
	}
	for _, tt := range tests {
		if got := string(dialect.AppendError([]byte("x"), tt.kind, tt.msg)); got != "x"+tt.want {
			t.Errorf("AppendError(%d, %q) = %q, want %q", tt.kind, tt.msg, got, "x"+tt.want)
		}
	}
}
