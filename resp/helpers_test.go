package resp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

var dialect = &Dialect{}

// mb encodes args as a multibulk request.
func mb(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// parse runs a fresh parser with options o over in.
func parse(t testing.TB, o codec.Options, in string) (*codec.Request, int, error) {
	t.Helper()
	return codectest.Parse(t, dialect, o, in)
}

var routeNames = map[codec.Route]string{
	codec.RouteKey: "key", codec.RouteMulti: "multi", codec.RouteAll: "all", codec.RouteLocal: "local",
	codec.RouteSame: "same", codec.RouteAny: "any", codec.RouteBlock: "block", codec.RoutePin: "pin", codec.RouteServer: "server",
}

var kindNames = map[codec.ReplyKind]string{
	codec.ReplyOK: "ok", codec.ReplyMiss: "miss", codec.ReplyError: "error", codec.ReplyFailure: "failure",
}

// describeRequest renders a parse result on one line, for tables and golden
// files.
func describeRequest(req *codec.Request, n int, err error) string {
	if errors.Is(err, codec.ErrIncomplete) {
		return "incomplete"
	}
	var pe *codec.ProtocolError
	if errors.As(err, &pe) {
		return fmt.Sprintf("reject reply=%q close=%v n=%d", pe.Reply, pe.Close, pe.N)
	}
	if err != nil {
		return "error " + err.Error()
	}
	keys := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = strconv.Quote(string(k))
	}
	s := fmt.Sprintf("%s route=%s keys=[%s] n=%d wire=%q", req.Name, routeNames[req.Route],
		strings.Join(keys, " "), n, req.Wire)
	if req.Route == codec.RouteBlock || req.Pin == codec.PinWait {
		s += fmt.Sprintf(" block=%v", req.Block)
	}
	if req.Pin != codec.PinNone {
		s += fmt.Sprintf(" pin=%d", req.Pin)
	}
	if req.Route == codec.RouteLocal {
		s += fmt.Sprintf(" local=%q", dialect.AppendLocal(nil, req, testEnv{}))
	}
	if req.Close {
		s += " close"
	}
	return s
}

// testEnv is a codec.Env with fixed answers.
type testEnv struct{}

func (testEnv) Version() string { return "0.0.0-test" }

func (testEnv) Stats() []codec.Stat {
	return []codec.Stat{{Name: "uptime", Value: "7"}, {Name: "requests", Value: "42"}}
}

// parseAll parses every request in in with one parser (one session) and
// returns what the client would see for each: the local reply, the error
// reply, or "-> wire" for a forwarded request.
func parseAll(t testing.TB, o codec.Options, in string) []string {
	t.Helper()
	p := dialect.NewRequestParser(o)
	var out []string
	buf := []byte(in)
	for len(buf) > 0 {
		var req codec.Request
		n, err := p.ParseRequest(buf, &req)
		if errors.Is(err, codec.ErrIncomplete) {
			out = append(out, "incomplete")
			break
		}
		var pe *codec.ProtocolError
		if errors.As(err, &pe) {
			out = append(out, pe.Reply)
			if pe.Close {
				out = append(out, "closed")
				break
			}
			buf = buf[pe.N:]
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if req.Route == codec.RouteLocal {
			out = append(out, string(dialect.AppendLocal(nil, &req, testEnv{})))
		} else {
			out = append(out, "-> "+string(req.Wire))
		}
		if req.Close {
			out = append(out, "closed")
			break
		}
		buf = buf[n:]
	}
	return out
}
