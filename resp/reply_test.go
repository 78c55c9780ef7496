package resp

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
	{"busy is no failure", "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n", codec.ReplyError},
	{"oom", "-OOM command not allowed when used memory > 'maxmemory'.\r\n", codec.ReplyError},
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

	// RESP3, as redis-server 7.0.15 sends each type to a client after
	// HELLO 3 (HGETALL, SMEMBERS, ZSCORE, GET of no key, INFO, EVAL with
	// redis.setresp(3), DEBUG PROTOCOL attrib|push|bignum|verbatim).
	{"map", "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n", codec.ReplyOK},
	{"empty map", "%0\r\n", codec.ReplyOK},
	{"set", "~2\r\n$1\r\nx\r\n$1\r\ny\r\n", codec.ReplyOK},
	{"double", ",1.5\r\n", codec.ReplyOK},
	{"double exponent", ",1.2e+30\r\n", codec.ReplyOK},
	{"double inf", ",-inf\r\n", codec.ReplyOK},
	{"double nan", ",nan\r\n", codec.ReplyOK},
	{"true", "#t\r\n", codec.ReplyOK},
	{"false", "#f\r\n", codec.ReplyOK},
	{"null", "_\r\n", codec.ReplyMiss},
	{"big number", "(1234567999999999999999999999999999999\r\n", codec.ReplyOK},
	{"negative big number", "(-12345678901234567890\r\n", codec.ReplyOK},
	{"verbatim", "=29\r\ntxt:This is a verbatim\nstring\r\n", codec.ReplyOK},
	{"verbatim empty text", "=4\r\ntxt:\r\n", codec.ReplyOK},
	{"blob error", "!21\r\nSYNTAX invalid syntax\r\n", codec.ReplyError},
	{"blob error loading", "!7\r\nLOADING\r\n", codec.ReplyFailure},
	{"attribute then reply", "|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n" +
		"$39\r\nSome real reply following the attribute\r\n", codec.ReplyOK},
	{"push", ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", codec.ReplyOK},
	{"map of sets and booleans", "%2\r\n:0\r\n~1\r\n#t\r\n_\r\n%1\r\n,3.141\r\n#f\r\n", codec.ReplyOK},
	{"array with RESP3 null", "*2\r\n$1\r\nv\r\n_\r\n", codec.ReplyOK},
	{"deep maps", strings.Repeat("%1\r\n+k\r\n", 5000) + "_\r\n", codec.ReplyOK},
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

// invalidReplies are malformed replies and the errors they get.
var invalidReplies = []struct {
	name string
	in   string
	err  error
}{
	{"unknown type", "?x\r\n", ErrReplyType},
	{"nested unknown type", "*1\r\n?x\r\n", ErrReplyType},
	{"streamed string", "$?\r\n;4\r\nHell\r\n;0\r\n", ErrReplyLength},
	{"streamed array", "*?\r\n:1\r\n.\r\n", ErrReplyLength},
	{"streamed chunk", ";4\r\nHell\r\n", ErrReplyType},
	{"null with data", "_x\r\n", ErrReplyScalar},
	{"boolean other", "#x\r\n", ErrReplyScalar},
	{"boolean empty", "#\r\n", ErrReplyScalar},
	{"double empty", ",\r\n", ErrReplyScalar},
	{"double word", ",one\r\n", ErrReplyScalar},
	{"big number empty", "(\r\n", ErrReplyScalar},
	{"big number minus only", "(-\r\n", ErrReplyScalar},
	{"big number letters", "(12a\r\n", ErrReplyScalar},
	{"verbatim without format", "=2\r\nhi\r\n", ErrReplyVerbatim},
	{"verbatim without colon", "=5\r\ntxt-x\r\n", ErrReplyVerbatim},
	{"verbatim null", "=-1\r\n", ErrReplyLength},
	{"blob error null", "!-1\r\n", ErrReplyLength},
	{"map null", "%-1\r\n", ErrReplyLength},
	{"set count -2", "~-2\r\n", ErrReplyLength},
	{"map in map bad", "%1\r\n+k\r\n#y\r\n", ErrReplyScalar},
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

func TestParseReplyErrors(t *testing.T) {
	for _, tc := range invalidReplies {
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

// longReplies are replies that arrive in many reads: framing them again
// from their first byte at each read is quadratic.
var longReplies = []struct {
	name string
	in   string
}{
	{"long array", "*2000\r\n" + strings.Repeat("$3\r\nabc\r\n", 2000)},
	{"long nested arrays", "*3\r\n*500\r\n" + strings.Repeat(":1\r\n", 500) + "*0\r\n*2\r\n*300\r\n" + strings.Repeat("$-1\r\n", 300) + "+OK\r\n"},
	{"big bulks", "*3\r\n$40000\r\n" + strings.Repeat("b", 40000) + "\r\n:1\r\n$20000\r\n" + strings.Repeat("c", 20000) + "\r\n"},
	{"long error", "-ERR " + strings.Repeat("x", 100<<10) + "\r\n"},
	{"long simple string in an array", "*2\r\n+" + strings.Repeat("s", 50<<10) + "\r\n:1\r\n"},
}

// TestResumeReply feeds every reply of this file and of replies.txt to
// ResumeReply in pieces, a byte at a time and in random sizes, followed
// by nothing or by the next reply: every answer is ParseReply's.
func TestResumeReply(t *testing.T) {
	type replyCase struct{ name, in string }
	var cases []replyCase
	for _, r := range validReplies {
		cases = append(cases, replyCase{r.name, r.in}, replyCase{r.name + " then more", r.in + "+NEXT\r\n"})
	}
	for _, r := range invalidReplies {
		cases = append(cases, replyCase{r.name, r.in})
	}
	_, inputs := codectest.ReadCases(t, "replies.txt")
	for i, in := range inputs {
		cases = append(cases, replyCase{fmt.Sprintf("replies.txt %d", i+1), in})
	}
	for _, r := range longReplies {
		cases = append(cases, replyCase{r.name, r.in}, replyCase{r.name + " then more", r.in + "*1\r\n:2\r\n"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			if len(data) <= 64<<10 {
				codectest.CheckResume(t, dialect, nil, data, codectest.ByteCuts(len(data)))
			}
			rng := rand.New(rand.NewPCG(uint64(len(data)), 1))
			for _, most := range []int{2, 16, 1024, 16 << 10} {
				codectest.CheckResume(t, dialect, nil, data, codectest.RandomCuts(len(data), most, rng))
			}
		})
	}
}

// TestResumeReplyState checks where ResumeReply stops: at the element cut
// short, with the elements left and the top level's kind, and within a
// long line past the bytes it has looked at.
func TestResumeReplyState(t *testing.T) {
	array := "*2\r\n$3\r\nabc\r\n*2\r\n:1\r\n$5\r\nhello\r\n"
	line := "*2\r\n+" + strings.Repeat("s", 1000)
	tests := []struct {
		name string
		in   string
		want codec.ReplyState
	}{
		{"nothing", "", codec.ReplyState{Off: 0, Left: 1}},
		{"header cut", "*3\r", codec.ReplyState{Off: 0, Left: 1, Index: 3}},
		{"first element cut", array[:9], codec.ReplyState{Off: 4, Left: 2}},
		{"nested header whole", array[:17], codec.ReplyState{Off: 17, Left: 2}},
		{"bulk header cut", array[:24], codec.ReplyState{Off: 21, Left: 1, Index: 3}},
		{"last byte missing", array[:len(array)-1], codec.ReplyState{Off: 21, Left: 1}},
		{"null array then cut", "*-1", codec.ReplyState{Off: 0, Left: 1, Index: 3}},
		{"long line", line, codec.ReplyState{Off: 4, Left: 2, Index: len(line) - 4}},
		{"top-level error line", "-ERR x", codec.ReplyState{Off: 0, Left: 1, Index: 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st codec.ReplyState
			n, _, err := dialect.ResumeReply([]byte(tc.in), nil, &st)
			if !errors.Is(err, codec.ErrIncomplete) || n != 0 || st != tc.want {
				t.Fatalf("%q: %d, %v, state %+v; want incomplete, state %+v", tc.in, n, err, st, tc.want)
			}
		})
	}
	// A state that does not belong to buf (longer than it) is not trusted.
	for _, st := range []codec.ReplyState{{Off: 100, Left: 5}, {Off: -1, Left: 1}, {Left: 1, Index: -1}} {
		if n, kind, err := dialect.ResumeReply([]byte("$-1\r\n"), nil, &st); n != 5 || kind != codec.ReplyMiss || err != nil || st != (codec.ReplyState{}) {
			t.Fatalf("with a foreign state: %d, %s, %v, state %+v", n, kindNames[kind], err, st)
		}
	}
}

// TestReplyNeeded checks the length an unfinished reply announces: that
// of a bulk string longer than codec.HintAbove by itself, nothing for a
// short one however far into a long array it is.
func TestReplyNeeded(t *testing.T) {
	big := "$40000\r\n" + strings.Repeat("b", 40000) + "\r\n"
	small := strings.Repeat("$8\r\nvalue123\r\n", 2000)
	tests := []struct {
		name string
		in   string
		cut  int
		want int
	}{
		{"big bulk", big, 100, len(big)},
		{"bulk of HintAbove bytes in all", "$16374\r\n" + strings.Repeat("b", 16374) + "\r\n", 100, 0},
		{"short bulk far into an array", "*2000\r\n" + small, 20000, 0},
		{"big bulk far into an array", "*21\r\n" + small[:20*14] + big, 5 + 20*14 + 100, 5 + 20*14 + len(big)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, resume := range []bool{false, true} {
				var st codec.ReplyState
				if resume { // framed up to where the first call stopped
					dialect.ResumeReply([]byte(tc.in[:tc.cut/2]), nil, &st)
				}
				_, _, err := dialect.ResumeReply([]byte(tc.in[:tc.cut]), nil, &st)
				if !errors.Is(err, codec.ErrIncomplete) || codec.Needed(err) != tc.want {
					t.Fatalf("resumed %v: %v, needs %d; want %d", resume, err, codec.Needed(err), tc.want)
				}
			}
		})
	}
}
