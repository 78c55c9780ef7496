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

// fullEnv also knows its servers' version, resets and has sections.
type fullEnv struct {
	env
	resets *int
}

func (fullEnv) ServerVersion() string { return "1.6.18" }
func (e fullEnv) ResetStats()         { *e.resets++ }
func (fullEnv) Section(name string) ([]codec.Stat, bool) {
	if name != "settings" {
		return nil, false
	}
	return []codec.Stat{{Name: "item_size_max", Value: "1024"}}, true
}

func TestAppendLocal(t *testing.T) {
	resets := 0
	full := fullEnv{resets: &resets}
	tests := []struct {
		in     string
		env    codec.Env
		want   string
		resets int
	}{
		{"version\r\n", env{}, "VERSION shardproxy 0.1\r\n", 0},
		{"version\r\n", full, "VERSION 1.6.18\r\n", 0},
		{"version\r\n", nil, "VERSION unknown\r\n", 0},
		{"verbosity 1\r\n", env{}, "OK\r\n", 0},
		{"verbosity 1 noreply\r\n", env{}, "", 0},
		{"stats\r\n", env{}, "STAT uptime 10\r\nSTAT bad_name a  b\r\nEND\r\n", 0},
		{"stats   \r\n", full, "STAT uptime 10\r\nSTAT bad_name a  b\r\nEND\r\n", 0},
		{"stats\r\n", nil, "END\r\n", 0},
		{"stats items\r\n", env{}, "ERROR\r\n", 0},
		{"stats items\r\n", full, "ERROR\r\n", 0},
		{"stats noreply\r\n", full, "ERROR\r\n", 0},
		{"stats settings\r\n", full, "STAT item_size_max 1024\r\nEND\r\n", 0},
		{"stats  settings foo\r\n", full, "STAT item_size_max 1024\r\nEND\r\n", 0},
		{"stats reset\r\n", full, "RESET\r\n", 1},
		{"stats reset noreply\r\n", full, "RESET\r\n", 2},
		{"stats reset\r\n", env{}, "ERROR\r\n", 2},
		{"mn\r\n", env{}, "MN\r\n", 2},
		{"gat 10\r\n", env{}, "END\r\n", 2},
		{"quit\r\n", env{}, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			req := mustParse(t, tt.in)
			if req.Route != codec.RouteLocal {
				t.Fatalf("%q routes %s", tt.in, routeNames[req.Route])
			}
			if got := string(dialect.AppendLocal([]byte("x"), req, tt.env)); got != "x"+tt.want {
				t.Errorf("AppendLocal = %q, want %q", got, "x"+tt.want)
			}
			if resets != tt.resets {
				t.Errorf("%d resets, want %d", resets, tt.resets)
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
