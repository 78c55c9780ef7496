package memcache

import (
	"fmt"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

func TestGoldenRequests(t *testing.T) {
	_, inputs := codectest.ReadCases(t, "requests.txt")
	var b strings.Builder
	fmt.Fprintf(&b, codectest.GoldenHeader, "requests.txt")
	for _, in := range inputs {
		req, n, err := parse(t, codec.Options{}, in)
		fmt.Fprintf(&b, "in:  %q\nout: %s\n\n", in, describeRequest(req, n, err))
	}
	codectest.CheckGolden(t, "requests.golden", b.String())
}

// replyCase turns a replies.txt prefix ("mg quiet") into a request.
func replyCase(t testing.TB, prefix string) *codec.Request {
	t.Helper()
	name, mode, _ := strings.Cut(prefix, " ")
	cmd := lookupCommand([]byte(name))
	if cmd == 0 {
		t.Fatalf("replies.txt: unknown command %q", name)
	}
	req := replyReq(cmd, codec.ModeNormal)
	if mode == "quiet" {
		req.Mode = codec.ModeQuiet
	}
	return req
}

func TestGoldenReplies(t *testing.T) {
	prefixes, inputs := codectest.ReadCases(t, "replies.txt")
	var b strings.Builder
	fmt.Fprintf(&b, codectest.GoldenHeader, "replies.txt")
	for i, in := range inputs {
		req := replyCase(t, prefixes[i])
		n, kind, err := dialect.ParseReply([]byte(in), req)
		var out string
		if err != nil {
			out = "error " + err.Error()
		} else {
			out = fmt.Sprintf("n=%d kind=%s shows=%q", n, kindNames[kind], dialect.AppendReply(nil, req, []byte(in[:n]), kind))
		}
		fmt.Fprintf(&b, "in:  %s %q\nout: %s\n\n", prefixes[i], in, out)
	}
	codectest.CheckGolden(t, "replies.golden", b.String())
}
