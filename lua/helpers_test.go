package lua_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/lua"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// completion collects what a router answers.
type completion chan string

func (c completion) Complete(out []byte) { c <- string(out) }

// parseRequest parses one memcache request.
func parseRequest(t testing.TB, d codec.Dialect, s string) *codec.Request {
	t.Helper()
	req := &codec.Request{}
	n, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(s), req)
	if err != nil || n != len(s) {
		t.Fatalf("parse %q: %d %v", s, n, err)
	}
	return req
}

// route sends s through r and returns the answer.
func route(t testing.TB, r *lua.Router, d codec.Dialect, s string) string {
	t.Helper()
	c := make(completion, 1)
	r.Route(parseRequest(t, d, s), 1, c)
	select {
	case out := <-c:
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("%q: no answer", s)
		return ""
	}
}
