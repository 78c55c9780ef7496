package resp

import (
	"testing"
	"time"

	"shardproxy/codec"
)

// TestPauseRoutes: CLIENT PAUSE and UNPAUSE go to every server under
// redis_config, marked with the pause's timeout when the servers will
// take its arguments.
func TestPauseRoutes(t *testing.T) {
	for _, tc := range []struct {
		in    []string
		pause codec.Pause
		block time.Duration
	}{
		{[]string{"CLIENT", "PAUSE", "100"}, codec.PauseOn, 100 * time.Millisecond},
		{[]string{"CLIENT", "PAUSE", "60000", "write"}, codec.PauseOn, time.Minute},
		{[]string{"CLIENT", "PAUSE", "5", "ALL"}, codec.PauseOn, 5 * time.Millisecond},
		{[]string{"CLIENT", "PAUSE", "x"}, codec.PauseNone, 0},
		{[]string{"CLIENT", "PAUSE", "-1"}, codec.PauseNone, 0},
		{[]string{"CLIENT", "PAUSE", "10", "READ"}, codec.PauseNone, 0},
		{[]string{"CLIENT", "UNPAUSE"}, codec.PauseOff, 0},
	} {
		req, n, err := parse(t, configOpts, mb(tc.in...))
		if err != nil || req.Route != codec.RouteAll || req.Pause != tc.pause || (tc.pause == codec.PauseOn && req.Block != tc.block) {
			t.Errorf("%q: %s pause=%d block=%v, want pause=%d block=%v", tc.in, describeRequest(req, n, err), req.Pause, req.Block, tc.pause, tc.block)
		}
	}
	req, _, _ := parse(t, configOpts, mb("GET", "k"))
	if req.Pause != codec.PauseNone {
		t.Errorf("GET marked pause %d", req.Pause)
	}
}
