package resp

import (
	"testing"

	"shardproxy/codec"
)

// Replies of redis-server 7.0.15 to LATENCY, as RESP2 and RESP3 clients
// get them.
var (
	histogram2 = "*4\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:3\r\n$14\r\nhistogram_usec\r\n*4\r\n:2\r\n:1\r\n:8\r\n:3\r\n" +
		"$3\r\nget\r\n*4\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n*2\r\n:4\r\n:1\r\n"
	histogram3 = "%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:2\r\n$14\r\nhistogram_usec\r\n%2\r\n:4\r\n:1\r\n:8\r\n:2\r\n"
	latest     = "*1\r\n*4\r\n$7\r\ncommand\r\n:1700000000\r\n:250\r\n:300\r\n"
	history    = "*2\r\n*2\r\n:1700000000\r\n:250\r\n*2\r\n:1700000005\r\n:120\r\n"
	doctor     = "$12\r\nDave: fine.\n\r\n"
)

// TestMergeLatency merges two servers' LATENCY replies.
func TestMergeLatency(t *testing.T) {
	for _, tc := range []struct {
		req  []string
		a, b string
		want string
	}{
		{[]string{"LATENCY", "HISTOGRAM"}, histogram2, "*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:2\r\n$14\r\nhistogram_usec\r\n*4\r\n:4\r\n:1\r\n:8\r\n:2\r\n",
			// set: 1 at 2 µs, 2 at 8 µs on a; 1 at 4 µs, 1 at 8 µs on b
			"*4\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:5\r\n$14\r\nhistogram_usec\r\n*6\r\n:2\r\n:1\r\n:4\r\n:2\r\n:8\r\n:5\r\n" +
				"$3\r\nget\r\n*4\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n*2\r\n:4\r\n:1\r\n"},
		{[]string{"LATENCY", "LATEST"}, latest, "*1\r\n*4\r\n$7\r\ncommand\r\n:1700000009\r\n:120\r\n:280\r\n",
			"*1\r\n*4\r\n$7\r\ncommand\r\n:1700000009\r\n:120\r\n:300\r\n"},
		{[]string{"LATENCY", "HISTORY", "command"}, history, "*1\r\n*2\r\n:1700000003\r\n:9\r\n",
			"*3\r\n*2\r\n:1700000000\r\n:250\r\n*2\r\n:1700000003\r\n:9\r\n*2\r\n:1700000005\r\n:120\r\n"},
		// One second's samples on two servers are one, the longest.
		{[]string{"LATENCY", "HISTORY", "command"}, history, "*2\r\n*2\r\n:1700000000\r\n:300\r\n*2\r\n:1700000005\r\n:100\r\n",
			"*2\r\n*2\r\n:1700000000\r\n:300\r\n*2\r\n:1700000005\r\n:120\r\n"},
		{[]string{"LATENCY", "RESET"}, ":1\r\n", ":2\r\n", ":3\r\n"},
		{[]string{"LATENCY", "DOCTOR"}, doctor, doctor, "$47\r\nserver s1:\nDave: fine.\n\nserver s2:\nDave: fine.\n\r\n"},
	} {
		req, _, err := parse(t, configOpts, mb(tc.req...))
		if err != nil {
			t.Fatal(err)
		}
		got := string(dialect.Merge(nil, req, nil, nil, []codec.Reply{{Raw: []byte(tc.a), Server: "s1"}, {Raw: []byte(tc.b), Server: "s2"}}))
		if got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// FuzzMergeLatency: any two server replies to each LATENCY subcommand
// (and to FUNCTION STATS, merged alike) merged by the proxy make one
// whole reply, and one server's histogram
// merged alone is itself.
func FuzzMergeLatency(f *testing.F) {
	f.Add([]byte(histogram2), []byte(histogram2), uint8(0))
	f.Add([]byte(histogram3), []byte(histogram3), uint8(0))
	f.Add([]byte(latest), []byte(latest), uint8(1))
	f.Add([]byte(history), []byte("*0\r\n"), uint8(2))
	f.Add([]byte(doctor), []byte("=15\r\ntxt:Dave: fine.\r\n"), uint8(3))
	f.Add([]byte("*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"),
		[]byte("%2\r\n$14\r\nrunning_script\r\n%1\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\nengines\r\n%0\r\n"), uint8(4))
	var reqs []*codec.Request
	for _, args := range [][]string{{"LATENCY", "HISTOGRAM"}, {"LATENCY", "LATEST"}, {"LATENCY", "HISTORY", "x"}, {"LATENCY", "DOCTOR"}, {"FUNCTION", "STATS"}} {
		req, _, err := parse(f, configOpts, mb(args...))
		if err != nil {
			f.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, which uint8) {
		if nextValue(a) != len(a) || nextValue(b) != len(b) {
			return // a backend hands Merge whole replies only
		}
		req := reqs[int(which)%len(reqs)]
		out := dialect.Merge(nil, req, nil, nil, []codec.Reply{{Raw: a}, {Raw: b}})
		if n := nextValue(out); n == 0 || n != len(out) {
			t.Fatalf("merged %q and %q into %q, not one whole reply", a, b, out)
		}
		if req.Cmd == cmdLatencyHistogram && string(a) == histogram2 {
			if got := string(dialect.Merge(nil, req, nil, nil, []codec.Reply{{Raw: a}})); got != histogram2 {
				t.Fatalf("one histogram merged alone: %q", got)
			}
		}
	})
}
