package resp

import (
	"testing"
	"time"

	"shardproxy/codec"
)

// TestParseBlocking checks the route, keys and timeout of the commands
// that may block or pin a server connection.
func TestParseBlocking(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		route codec.Route
		keys  int
		block time.Duration
		pin   codec.Pin
	}{
		{"blpop forever", mb("BLPOP", "a", "b", "0"), codec.RouteBlock, 2, 0, 0},
		{"blpop seconds", mb("BLPOP", "a", "2"), codec.RouteBlock, 1, 2 * time.Second, 0},
		{"blpop decimal", mb("BLPOP", "a", "0.25"), codec.RouteBlock, 1, 250 * time.Millisecond, 0},
		{"blpop tiny", mb("BLPOP", "a", "0.0000001"), codec.RouteBlock, 1, time.Millisecond, 0},
		{"blpop huge", mb("BLPOP", "a", "1e300"), codec.RouteBlock, 1, 0, 0},
		{"blpop negative", mb("BLPOP", "a", "-1"), codec.RouteBlock, 1, -1, 0},
		{"blpop not a number", mb("BLPOP", "a", "x"), codec.RouteBlock, 1, -1, 0},
		{"brpoplpush", mb("BRPOPLPUSH", "a", "b", "3"), codec.RouteBlock, 2, 3 * time.Second, 0},
		{"blmove", mb("BLMOVE", "a", "b", "LEFT", "RIGHT", "1.5"), codec.RouteBlock, 2, 1500 * time.Millisecond, 0},
		{"bzpopmin", mb("BZPOPMIN", "z", "1"), codec.RouteBlock, 1, time.Second, 0},
		{"blmpop", mb("BLMPOP", "4", "2", "a", "b", "LEFT"), codec.RouteBlock, 2, 4 * time.Second, 0},
		{"bzmpop bad numkeys", mb("BZMPOP", "1", "9", "a", "MIN"), codec.RouteBlock, 0, time.Second, 0},
		{"xread block", mb("XREAD", "COUNT", "2", "BLOCK", "1500", "STREAMS", "s", "t", "0", "0"), codec.RouteBlock, 2, 1500 * time.Millisecond, 0},
		{"xread block 0", mb("XREAD", "BLOCK", "0", "STREAMS", "s", "$"), codec.RouteBlock, 1, 0, 0},
		{"xreadgroup block", mb("XREADGROUP", "GROUP", "g", "c", "BLOCK", "10", "STREAMS", "s", ">"), codec.RouteBlock, 1, 10 * time.Millisecond, 0},
		{"xread without block", mb("XREAD", "STREAMS", "s", "0"), codec.RouteSame, 1, 0, 0},
		{"multi", mb("MULTI"), codec.RoutePin, 0, 0, codec.PinMulti},
		{"exec", mb("exec"), codec.RoutePin, 0, 0, codec.PinExec},
		{"discard", mb("DISCARD"), codec.RoutePin, 0, 0, codec.PinDiscard},
		{"watch", mb("WATCH", "a", "b"), codec.RoutePin, 2, 0, codec.PinWatch},
		{"unwatch", mb("UNWATCH"), codec.RoutePin, 0, 0, codec.PinUnwatch},
		{"wait", mb("WAIT", "1", "250"), codec.RoutePin, 0, 250 * time.Millisecond, codec.PinWait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, codec.Options{}, tc.in)
			if err != nil {
				t.Fatalf("refused: %s", describeRequest(req, n, err))
			}
			if req.Route != tc.route || len(req.Keys) != tc.keys || req.Block != tc.block || req.Pin != tc.pin {
				t.Fatalf("got %s", describeRequest(req, n, nil))
			}
		})
	}
}
