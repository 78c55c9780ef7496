package resp

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// slowEnv is a testEnv with a slowlog.
type slowEnv struct {
	testEnv
	entries []codec.SlowEntry
	reset   bool
}

func (e *slowEnv) Slowlog(n int) []codec.SlowEntry {
	if n < 0 || n > len(e.entries) {
		n = len(e.entries)
	}
	return e.entries[:n]
}
func (e *slowEnv) SlowlogLen() int { return len(e.entries) }
func (e *slowEnv) SlowlogReset()   { e.reset = true }

// readArgs reads appendSlowArgs' array back.
func readArgs(t *testing.T, b []byte) []string {
	t.Helper()
	cmd, err := redcon.Parse(b)
	if err != nil {
		t.Fatalf("not an array of bulk strings: %q: %v", b, err)
	}
	var out []string
	for _, a := range cmd.Args {
		out = append(out, string(a))
	}
	return out
}

// TestSlowArgs: arguments as Redis's slowlog shows them, from whole and
// cut wires.
func TestSlowArgs(t *testing.T) {
	long := strings.Repeat("v", 200)
	many := []string{"mget"}
	for i := range 40 {
		many = append(many, fmt.Sprintf("k%d", i))
	}
	for _, tc := range []struct {
		name string
		wire string
		want []string
	}{
		{"whole", mb("get", "user:1"), []string{"get", "user:1"}},
		{"long argument", mb("set", "k", long), []string{"set", "k", long[:128] + "... (72 more bytes)"}},
		{"many arguments", mb(many...), append(append([]string{}, many[:31]...), "... (10 more arguments)")},
		{"cut in an argument", mb("set", "k", long)[:30], []string{"set", "k", "vvvv... (196 more bytes)"}},
		{"cut before an argument", mb("set", "key", "v")[:22], []string{"set", "key", "... (1 more arguments)"}},
		{"inline", "GET k\r\n", []string{"get"}},
		{"garbage", "*x\r\n", []string{"get"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readArgs(t, appendSlowArgs(nil, []byte(tc.wire), "get"))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%q:\ngot  %q\nwant %q", tc.wire, got, tc.want)
			}
		})
	}
}

// TestSlowlogLocal: SLOWLOG GET, LEN and RESET are answered from the
// pool's slowlog; a bad count is refused as Redis refuses it.
func TestSlowlogLocal(t *testing.T) {
	env := &slowEnv{entries: []codec.SlowEntry{
		{ID: 2, Time: time.Unix(1700000000, 0), Took: 52 * time.Millisecond, Command: "get", Wire: []byte(mb("get", "b")), Client: "127.0.0.1:1"},
		{ID: 1, Time: time.Unix(1699999999, 0), Took: 30 * time.Millisecond, Command: "get", Wire: []byte(mb("get", "a")), Client: "127.0.0.1:2"},
	}}
	ask := func(args ...string) string {
		t.Helper()
		req, _, err := parse(t, codec.Options{}, mb(args...))
		if err != nil {
			var pe *codec.ProtocolError
			if errors.As(err, &pe) {
				return pe.Reply
			}
			t.Fatalf("%q: %v", args, err)
		}
		if req.Route != codec.RouteLocal {
			t.Fatalf("%q: route %v", args, req.Route)
		}
		return string(dialect.AppendLocal(nil, req, env))
	}
	want := "*2\r\n" +
		"*6\r\n:2\r\n:1700000000\r\n:52000\r\n*2\r\n$3\r\nget\r\n$1\r\nb\r\n$11\r\n127.0.0.1:1\r\n$0\r\n\r\n" +
		"*6\r\n:1\r\n:1699999999\r\n:30000\r\n*2\r\n$3\r\nget\r\n$1\r\na\r\n$11\r\n127.0.0.1:2\r\n$0\r\n\r\n"
	if got := ask("SLOWLOG", "GET"); got != want {
		t.Errorf("SLOWLOG GET:\n%q\nwant\n%q", got, want)
	}
	if got := ask("slowlog", "get", "1"); !strings.HasPrefix(got, "*1\r\n*6\r\n:2\r\n") {
		t.Errorf("SLOWLOG GET 1: %q", got)
	}
	if got := ask("slowlog", "get", "-1"); !strings.HasPrefix(got, "*2\r\n") {
		t.Errorf("SLOWLOG GET -1: %q", got)
	}
	if got := ask("SLOWLOG", "LEN"); got != ":2\r\n" {
		t.Errorf("SLOWLOG LEN: %q", got)
	}
	if got := ask("SLOWLOG", "RESET"); got != "+OK\r\n" || !env.reset {
		t.Errorf("SLOWLOG RESET: %q, reset %v", got, env.reset)
	}
	if got := ask("SLOWLOG", "GET", "x"); got != replyNotInteger {
		t.Errorf("SLOWLOG GET x: %q", got)
	}
	if got := ask("SLOWLOG", "GET", "-2"); !strings.Contains(got, "greater than or equal to -1") {
		t.Errorf("SLOWLOG GET -2: %q", got)
	}
	if got := string(dialect.AppendLocal(nil, mustLocal(t, "SLOWLOG", "LEN"), testEnv{})); !strings.HasPrefix(got, "-ERR") {
		t.Errorf("SLOWLOG LEN without a slowlog: %q", got)
	}
}

func mustLocal(t *testing.T, args ...string) *codec.Request {
	t.Helper()
	req, _, err := parse(t, codec.Options{}, mb(args...))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// FuzzSlowArgs: any wire, and every prefix of it, gives at most
// slowMaxArgs arguments, none longer than the wire, without a panic;
// appendSlowArgs' array reads back.
func FuzzSlowArgs(f *testing.F) {
	for _, s := range []string{mb("get", "k"), mb("set", "k", strings.Repeat("v", 300)), "*99999999999\r\n$3\r\nget\r\n",
		"*2\r\n$99999999\r\nab", "*1\r\n$-1\r\n", "GET k\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		for i := range len(wire) + 1 {
			args, _ := slowArgs(wire[:i])
			if len(args) > slowMaxArgs {
				t.Fatalf("%q: %d args", wire[:i], len(args))
			}
			for _, a := range args {
				if len(a.have) > i || len(a.have) > a.size {
					t.Fatalf("%q: an argument of %d bytes, size %d", wire[:i], len(a.have), a.size)
				}
			}
		}
		out := appendSlowArgs(nil, wire, "x")
		if cmd, err := redcon.Parse(out); err != nil || len(cmd.Args) == 0 || len(cmd.Args) > slowMaxArgs {
			t.Fatalf("%q: reply %q", wire, out)
		}
	})
}
