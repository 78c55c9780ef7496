package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// slowEnv is a testEnv with a slowlog.
type slowEnv struct {
	testEnv
	entries   []codec.SlowEntry
	reset     bool
	threshold time.Duration
	maxLen    int
}

func (e *slowEnv) Slowlog(n int) []codec.SlowEntry {
	if n < 0 || n > len(e.entries) {
		n = len(e.entries)
	}
	return e.entries[:n]
}
func (e *slowEnv) SlowlogLen() int { return len(e.entries) }
func (e *slowEnv) SlowlogReset()   { e.reset = true }
func (e *slowEnv) SlowlogSettings() (time.Duration, int) {
	return e.threshold, e.maxLen
}
func (e *slowEnv) SetSlowlogThreshold(d time.Duration) { e.threshold = d }
func (e *slowEnv) SetSlowlogMaxLen(n int)              { e.maxLen = n }

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
		{ID: 2, Time: time.Unix(1700000000, 0), Took: 52 * time.Millisecond, Command: "get", Wire: []byte(mb("get", "b")), Client: "127.0.0.1:1", Name: "app"},
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
		"*6\r\n:2\r\n:1700000000\r\n:52000\r\n*2\r\n$3\r\nget\r\n$1\r\nb\r\n$11\r\n127.0.0.1:1\r\n$3\r\napp\r\n" +
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

// TestRedact: the arguments redis-server redacts from its slowlog are
// shown as "(redacted)", from whole and cut wires; the others are kept
// as they are, the same bytes.
func TestRedact(t *testing.T) {
	many := []string{"acl", "setuser", "u"}
	for range 40 {
		many = append(many, "+get")
	}
	for _, tc := range []struct {
		name string
		wire string
		want []string
	}{
		{"auth", mb("AUTH", "pw"), []string{"AUTH", redacted}},
		{"auth with a user", mb("auth", "u", "pw"), []string{"auth", redacted, redacted}},
		{"hello", mb("HELLO", "3", "SETNAME", "auth", "AUTH", "u", "pw"), []string{"HELLO", "3", "SETNAME", "auth", "AUTH", redacted, redacted}},
		{"acl setuser", mb("acl", "setuser", "u", "on", ">pw"), []string{"acl", "setuser", redacted, redacted, redacted}},
		{"acl setuser, many", mb(many...), append([]string{"acl", "setuser"}, append(slices.Repeat([]string{redacted}, 29), "... (12 more arguments)")...)},
		{"config set", mb("config", "set", "hz", "10", "MASTERAUTH", "pw", "masteruser", "u"), []string{"config", "set", "hz", "10", "MASTERAUTH", redacted, "masteruser", redacted}},
		{"migrate auth", mb("migrate", "h", "1", "k", "0", "5000", "COPY", "AUTH", "pw"), []string{"migrate", "h", "1", "k", "0", "5000", "COPY", "AUTH", redacted}},
		{"migrate auth2", mb("migrate", "h", "1", "", "0", "5000", "AUTH2", "u", "pw", "KEYS", "auth", "x"), []string{"migrate", "h", "1", "", "0", "5000", "AUTH2", redacted, redacted, "KEYS", "auth", "x"}},
		{"cut in the secret", mb("auth", "u", strings.Repeat("p", 40))[:30], []string{"auth", redacted, redacted}},
		{"cut before the secret", mb("auth", "u", "pw")[:20], []string{"auth", redacted, "... (1 more arguments)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readArgs(t, appendSlowArgs(nil, dialect.Redact(nil, []byte(tc.wire)), "x"))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%q:\ngot  %q\nwant %q", tc.wire, got, tc.want)
			}
		})
	}
	for _, wire := range []string{mb("get", "k"), mb("config", "set", "hz", "10"), mb("acl", "list"), mb("migrate", "h", "1", "auth", "0", "5000")} {
		if got := dialect.Redact(nil, []byte(wire)); string(got) != wire {
			t.Errorf("%q redacted: %q", wire, got)
		}
	}
	if got := string(dialect.Redact(nil, []byte("AUTH secret\r\n"))); got != "AUTH" {
		t.Errorf("an inline AUTH kept as %q", got)
	}
}

// FuzzRedact: any wire, and every prefix of it, redacts without a panic
// into a wire whose arguments and count SLOWLOG GET shows as it shows
// the original's, but for secrets; redacting again changes nothing.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{mb("auth", "u", "pw"), mb("HELLO", "3", "AUTH", "u", "pw"), mb("acl", "setuser", "u", "on"),
		mb("config", "set", "requirepass", "x"), mb("migrate", "h", "1", "k", "0", "5000", "AUTH2", "u", "p"), "AUTH pw\r\n", "*3\r\n$4\r\nauth\r\n$9999\r\nab"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		for i := range len(wire) + 1 {
			w := wire[:i]
			out := dialect.Redact(nil, w)
			args, total := slowArgs(w)
			rargs, rtotal := slowArgs(out)
			if len(args) > 0 && (rtotal != total || len(rargs) != len(args)) {
				t.Fatalf("%q: %d of %d arguments, redacted %q: %d of %d", w, len(args), total, out, len(rargs), rtotal)
			}
			if again := dialect.Redact(nil, out); !bytes.Equal(again, out) {
				t.Fatalf("%q: redacted %q, again %q", w, out, again)
			}
		}
	})
}

// TestSlowlogConfig: CONFIG SET of the slowlog's parameters is checked
// as redis-server checks it and sets the pool's slowlog (AddLocal);
// CONFIG GET answers the pool's values in place of the servers'.
func TestSlowlogConfig(t *testing.T) {
	for in, want := range map[string]string{
		mb("CONFIG", "SET", "slowlog-log-slower-than", "x"):      "-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument couldn't be parsed into an integer\r\n",
		mb("CONFIG", "SET", "hz", "10", "SLOWLOG-MAX-LEN", "-1"): "-ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and 9223372036854775807 inclusive\r\n",
		mb("config", "set", "slowlog-log-slower-than", "-2"):     "-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument must be between -1 and 9223372036854775807 inclusive\r\n",
	} {
		req, n, err := parse(t, configOpts, in)
		if got := describeRequest(req, n, err); !strings.Contains(got, strconv.Quote(want)[1:len(strconv.Quote(want))-1]) {
			t.Errorf("%q: %s\nwant %q", in, got, want)
		}
	}
	env := &slowEnv{threshold: 10 * time.Millisecond, maxLen: 128}
	set := func(args ...string) {
		t.Helper()
		req, n, err := parse(t, configOpts, mb(append([]string{"CONFIG", "SET"}, args...)...))
		if err != nil || req.Route != codec.RouteAll || !req.WithLocal {
			t.Fatalf("%q: %s", args, describeRequest(req, n, err))
		}
		dialect.AddLocal(req, env)
	}
	set("slowlog-log-slower-than", "0", "slowlog-max-len", "10")
	if env.threshold != 0 || env.maxLen != 10 {
		t.Errorf("after 0 and 10: %v %d", env.threshold, env.maxLen)
	}
	set("hz", "10", "Slowlog-Log-Slower-Than", "-1")
	if env.threshold >= 0 || env.maxLen != 10 {
		t.Errorf("after -1: %v %d", env.threshold, env.maxLen)
	}
	set("slowlog-log-slower-than", "9223372036854775807")
	if env.threshold != math.MaxInt64 {
		t.Errorf("after the largest: %v", env.threshold)
	}
	set("slowlog-log-slower-than", "1500")
	if req, _, _ := parse(t, configOpts, mb("CONFIG", "SET", "hz", "10")); req.WithLocal {
		t.Error("CONFIG SET hz is WithLocal")
	}

	servers := []codec.Reply{
		{Raw: []byte(mb("slowlog-max-len", "128", "hz", "10", "slowlog-log-slower-than", "10000"))},
		{Raw: []byte(mb("hz", "10", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128"))},
	}
	for _, tc := range []struct {
		patterns []string
		want     string
	}{
		{[]string{"*"}, mb("slowlog-max-len", "10", "hz", "10", "slowlog-log-slower-than", "1500")},
		{[]string{"SLOWLOG-[l]*"}, mb("slowlog-max-len", "128", "hz", "10", "slowlog-log-slower-than", "1500")},
	} {
		req, n, err := parse(t, configOpts, mb(append([]string{"CONFIG", "GET"}, tc.patterns...)...))
		if err != nil || !req.WithLocal {
			t.Fatalf("%q: %s", tc.patterns, describeRequest(req, n, err))
		}
		dialect.AddLocal(req, env)
		if got := string(dialect.Merge(nil, req, nil, nil, servers)); got != tc.want {
			t.Errorf("CONFIG GET %q:\ngot  %q\nwant %q", tc.patterns, got, tc.want)
		}
	}
	if req, _, _ := parse(t, configOpts, mb("CONFIG", "GET", "hz", "maxmemory*")); req.WithLocal {
		t.Error("CONFIG GET hz is WithLocal")
	}
	// A server that does not list them (not a redis-server) gets the
	// proxy's appended.
	req, _, _ := parse(t, configOpts, mb("CONFIG", "GET", "slowlog-max-len"))
	dialect.AddLocal(req, env)
	if got := string(dialect.Merge(nil, req, nil, nil, []codec.Reply{{Raw: []byte("*0\r\n")}})); got != mb("slowlog-max-len", "10") {
		t.Errorf("CONFIG GET from servers without it: %q", got)
	}
}

// FuzzSlowlogConfig: any CONFIG SET or GET arguments parse, set the
// pool's slowlog within Redis's bounds (AddLocal) and, for GET, merge with
// a server's reply into one whole reply, without a panic.
func FuzzSlowlogConfig(f *testing.F) {
	f.Add(true, "slowlog-log-slower-than", "0", "slowlog-max-len", "10", []byte("+OK\r\n"))
	f.Add(true, "SLOWLOG-MAX-LEN", "-1", "hz", "10", []byte("+OK\r\n"))
	f.Add(false, "slowlog-*", "[", "*max-len", "x", []byte(mb("slowlog-max-len", "128")))
	f.Add(false, "*", "\\", "s?owlog*", "", []byte("%1\r\n$2\r\nhz\r\n$2\r\n10\r\n"))
	f.Fuzz(func(t *testing.T, set bool, a, b, c, d string, server []byte) {
		sub := "GET"
		if set {
			sub = "SET"
		}
		req, _, err := parse(t, configOpts, mb("CONFIG", sub, a, b, c, d))
		if err != nil || !req.WithLocal {
			return
		}
		env := &slowEnv{threshold: -1, maxLen: 7}
		dialect.AddLocal(req, env)
		if env.threshold < -1 || env.maxLen < 0 {
			t.Fatalf("CONFIG %s %q %q %q %q: threshold %v, length %d", sub, a, b, c, d, env.threshold, env.maxLen)
		}
		if set || nextValue(server) != len(server) {
			return
		}
		out := dialect.Merge(nil, req, nil, nil, []codec.Reply{{Raw: server}})
		if n := nextValue(out); n == 0 || n != len(out) {
			t.Fatalf("CONFIG GET %q %q %q %q merged with %q into %q, not one whole reply", a, b, c, d, server, out)
		}
	})
}
