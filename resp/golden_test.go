package resp

import (
	"fmt"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

// sessionOptions are the parser options a case prefix names.
var sessionOptions = map[string]codec.Options{
	"":     {},
	"auth": {Password: "sekret", DB: 2},
}

func TestGoldenRequests(t *testing.T) {
	_, inputs := codectest.ReadCases(t, "requests.txt")
	var b strings.Builder
	fmt.Fprintf(&b, codectest.GoldenHeader, "requests.txt")
	for _, in := range inputs {
		req, n, err := parse(t, codec.Options{}, in)
		out := idPattern.ReplaceAllString(describeRequest(req, n, err), "${1}ID")
		fmt.Fprintf(&b, "in:  %q\nout: %s\n\n", in, out)
	}
	codectest.CheckGolden(t, "requests.golden", b.String())
}

// TestGoldenSessions: what a client sends over one connection, and what
// it gets back ("-> wire" for a request forwarded to a backend).
func TestGoldenSessions(t *testing.T) {
	prefixes, inputs := codectest.ReadCases(t, "sessions.txt")
	var b strings.Builder
	fmt.Fprintf(&b, codectest.GoldenHeader, "sessions.txt")
	for i, in := range inputs {
		o, ok := sessionOptions[prefixes[i]]
		if !ok {
			t.Fatalf("sessions.txt: unknown options %q", prefixes[i])
		}
		if prefixes[i] != "" {
			prefixes[i] += " "
		}
		fmt.Fprintf(&b, "in:  %s%q\n", prefixes[i], in)
		for _, out := range parseAll(t, o, in) {
			out = strings.ReplaceAll(out, "$2\r\nid\r\n:"+idOf(t, out), "$2\r\nid\r\n:ID")
			fmt.Fprintf(&b, "out: %q\n", out)
		}
		b.WriteString("\n")
	}
	codectest.CheckGolden(t, "sessions.golden", b.String())
}

// idOf returns the client id in a HELLO reply, which varies from run to run.
func idOf(t testing.TB, hello string) string {
	_, rest, ok := strings.Cut(hello, "$2\r\nid\r\n:")
	if !ok {
		return "\x00none"
	}
	id, _, _ := strings.Cut(rest, "\r\n")
	return id
}

func TestGoldenReplies(t *testing.T) {
	_, inputs := codectest.ReadCases(t, "replies.txt")
	var b strings.Builder
	fmt.Fprintf(&b, codectest.GoldenHeader, "replies.txt")
	for _, in := range inputs {
		n, kind, err := dialect.ParseReply([]byte(in), nil)
		out := fmt.Sprintf("n=%d kind=%s", n, kindNames[kind])
		if err != nil {
			out = "error " + err.Error()
		}
		fmt.Fprintf(&b, "in:  %q\nout: %s\n\n", in, out)
	}
	codectest.CheckGolden(t, "replies.golden", b.String())
}
