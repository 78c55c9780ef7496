package proxy_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestRedisLatency asks LATENCY through a pool of two servers: the
// per-command histogram counts every server's calls, an event one
// server saw (a slow script) is in LATEST and HISTORY, DOCTOR has each
// server's report, and RESET counts the events it reset (the servers',
// summed: with a threshold of 1 ms a server may see more than the
// script's).
func TestRedisLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "  timeout: 3000\n  redis_config: true\n")
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	for _, cmd := range [][]string{{"CONFIG", "SET", "latency-monitor-threshold", "1"}, {"CONFIG", "RESETSTAT"}} {
		if got := c.do(cmd...); got != "+OK\r\n" {
			t.Fatalf("%v: %q", cmd, got)
		}
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} { // on both servers
		c.do("SET", k, "v")
	}
	c.do("GET", "a")
	got := c.do("LATENCY", "HISTOGRAM", "set", "get", "nosuch")
	if !regexp.MustCompile(`^\*4\r\n\$3\r\nset\r\n\*4\r\n\$5\r\ncalls\r\n:6\r\n\$14\r\nhistogram_usec\r\n\*\d+\r\n(:\d+\r\n)*:6\r\n\$3\r\nget\r\n\*4\r\n\$5\r\ncalls\r\n:1\r\n`).MatchString(got) {
		t.Fatalf("LATENCY HISTOGRAM set get: %q, want 6 SET and 1 GET, the last bucket cumulating all", got)
	}
	if got := c.do("EVAL", "local i = 0 while i < 3000000 do i = i + 1 end return i", "0"); got != ":3000000\r\n" {
		t.Fatalf("EVAL: %q", got)
	}
	if got := c.do("LATENCY", "LATEST"); !strings.Contains(got, "*4\r\n$7\r\ncommand\r\n:") {
		t.Fatalf("LATENCY LATEST: %q, want the slow script's command event", got)
	}
	if got := c.do("LATENCY", "HISTORY", "command"); !strings.HasPrefix(got, "*") || strings.HasPrefix(got, "*0\r\n") {
		t.Fatalf("LATENCY HISTORY command: %q, want the script's sample", got)
	}
	if got := c.do("LATENCY", "DOCTOR"); strings.Count(got, "server 127.0.0.1:") != 2 {
		t.Fatalf("LATENCY DOCTOR: %q, want each server's report", got)
	}
	if got := c.do("LATENCY", "RESET"); !regexp.MustCompile(`^:[1-9]\d*\r\n$`).MatchString(got) {
		t.Fatalf("LATENCY RESET: %q, want the events reset counted", got)
	}
	if got := c.do("LATENCY", "LATEST"); got != "*0\r\n" {
		t.Fatalf("LATENCY LATEST after RESET: %q", got)
	}
}
