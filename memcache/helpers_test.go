package memcache

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

// parse runs a fresh parser with limits l over in.
func parse(t testing.TB, l codec.Options, in string) (*codec.Request, int, error) {
	t.Helper()
	return codectest.Parse(t, dialect, l, in)
}

var routeNames = map[codec.Route]string{
	codec.RouteKey: "key", codec.RouteMulti: "multi", codec.RouteAll: "all", codec.RouteLocal: "local",
}

var modeNames = map[codec.Mode]string{
	codec.ModeNormal: "normal", codec.ModeNoreply: "noreply", codec.ModeQuiet: "quiet", codec.ModeRewrite: "rewrite",
}

var kindNames = map[codec.ReplyKind]string{
	codec.ReplyOK: "ok", codec.ReplyMiss: "miss", codec.ReplyError: "error", codec.ReplyFailure: "failure", codec.ReplyFatal: "fatal",
}

// describeRequest renders a parse result on one line, for tables and golden
// files.
func describeRequest(req *codec.Request, n int, err error) string {
	if errors.Is(err, codec.ErrIncomplete) {
		return "incomplete"
	}
	var pe *codec.ProtocolError
	if errors.As(err, &pe) && pe.Forward {
		return fmt.Sprintf("reject discard=%d n=%d, forward %s", pe.Discard, pe.N, describeRequest(req, 0, nil))
	}
	if errors.As(err, &pe) {
		return fmt.Sprintf("reject reply=%q close=%v discard=%d n=%d", pe.Reply, pe.Close, pe.Discard, pe.N)
	}
	if err != nil {
		return "error " + err.Error()
	}
	keys := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = strconv.Quote(string(k))
	}
	s := fmt.Sprintf("%s route=%s mode=%s keys=[%s] n=%d wire=%q", req.Name, routeNames[req.Route],
		modeNames[req.Mode], strings.Join(keys, " "), n, req.Wire)
	if req.Close {
		s += " close"
	}
	return s
}
