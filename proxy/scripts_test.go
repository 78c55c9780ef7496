package proxy_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// TestScriptKill runs a script that never ends through a pool with
// redis_scripts: dedicated, over a redis-server whose busy-reply-threshold
// is 100 ms: another client's GET gets the server's -BUSY, SCRIPT KILL
// through the proxy ends the script (its client gets Redis's error), the
// GET is then answered, and the server was never marked failed. With the
// scripts on the shared connection, the GET and the SCRIPT KILL would wait
// behind the script on that connection.
func TestScriptKill(t *testing.T) {
	rd := testserver.StartRedis(t, "--busy-reply-threshold", "100")
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_scripts: dedicated\n  timeout: 3000\n"+
		"  auto_eject_hosts: true\n  server_failure_limit: 1\n  servers:\n    - %s:1\n", rd.Addr)
	srv, addr := startProxy(t, yaml, "rd")
	runner := respDial(t, addr)
	if got := runner.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	runner.send(multibulk("EVAL", "while true do end", "0"))
	time.Sleep(300 * time.Millisecond) // the script runs past the threshold

	other := respDial(t, addr)
	if got := other.do("PING"); !strings.HasPrefix(got, "-BUSY ") {
		t.Fatalf("PING while the script runs: %q, want -BUSY as from Redis", got)
	}
	if got := other.do("GET", "k"); !strings.HasPrefix(got, "-BUSY ") {
		t.Fatalf("GET while the script runs: %q, want -BUSY", got)
	}
	// A connection opened now (a blocking command's) is good: its
	// handshake's PING gets -BUSY from a server that is up.
	if got := respDial(t, addr).do("BLPOP", "q", "1"); !strings.HasPrefix(got, "-BUSY ") {
		t.Fatalf("BLPOP on a new connection while the script runs: %q, want -BUSY", got)
	}
	if got := respDial(t, addr).do("SCRIPT", "KILL"); got != "+OK\r\n" {
		t.Fatalf("SCRIPT KILL: %q", got)
	}
	if got := runner.reply(); !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "killed") {
		t.Fatalf("the script's reply: %q, want its kill", got)
	}
	if got := other.do("GET", "k"); got != "$1\r\nv\r\n" {
		t.Fatalf("GET after the kill: %q", got)
	}
	if got := runner.do("GET", "k"); got != "$1\r\nv\r\n" {
		t.Fatalf("GET on the script's connection after the kill: %q", got)
	}
	// With no script running the proxy answers PING itself: the server
	// saw only the PINGs during the script, which it rejected: the
	// client's and the new connection's handshake.
	pings := func() (calls, rejected string) {
		stats, err := testserver.RedisDo(rd.Addr, "INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`cmdstat_ping:calls=(\d+),.*rejected_calls=(\d+)`).FindStringSubmatch(stats)
		if m == nil {
			t.Fatalf("no PING in the server's stats: %q", stats)
		}
		return m[1], m[2]
	}
	calls, rejected := pings()
	if got := other.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after the kill: %q", got)
	}
	if calls2, rejected2 := pings(); rejected != "2" || calls2 != calls || rejected2 != rejected {
		t.Errorf("the server's PINGs: %s rejected, calls %s then %s; want 2 rejected and no call for the PING after the kill", rejected2, calls, calls2)
	}
	if got := other.do("SCRIPT", "KILL"); !strings.HasPrefix(got, "-NOTBUSY") {
		t.Errorf("SCRIPT KILL with no script: %q", got)
	}
	for _, p := range srv.Stats().Pools {
		for _, s := range p.Servers {
			if s.Failures != 0 || s.Ejects != 0 || s.ServerTimedout != 0 {
				t.Errorf("server %s: %d failures, %d ejections, %d timeouts; want none", s.Name, s.Failures, s.Ejects, s.ServerTimedout)
			}
		}
	}
}

// TestRedisOOM sends writes to a server at its maxmemory: each gets the
// server's -OOM, and the server, which still serves reads, is not marked
// bad for it (a script's -OOM on a dedicated connection neither).
func TestRedisOOM(t *testing.T) {
	rd := testserver.StartRedis(t)
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_scripts: dedicated\n"+
		"  auto_eject_hosts: false\n  server_failure_limit: 1\n  servers:\n    - %s:1\n", rd.Addr)
	srv, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	if got := c.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if _, err := testserver.RedisDo(rd.Addr, "CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := c.do("SET", "k2", "v"); !strings.HasPrefix(got, "-OOM ") {
			t.Fatalf("SET at maxmemory: %q, want -OOM", got)
		}
		if got := c.do("EVAL", "#!lua\nreturn 1", "0"); !strings.HasPrefix(got, "-OOM ") {
			t.Fatalf("a script at maxmemory: %q, want -OOM", got)
		}
		if got := c.do("GET", "k"); got != "$1\r\nv\r\n" {
			t.Fatalf("GET at maxmemory: %q", got)
		}
	}
	for _, p := range srv.Stats().Pools {
		for _, s := range p.Servers {
			if s.Failures != 0 || s.Ejects != 0 {
				t.Errorf("server %s: %d failures, %d ejections; want none", s.Name, s.Failures, s.Ejects)
			}
		}
	}
}

// TestFunctionStats runs a function that loops on one server of two:
// FUNCTION STATS names it while it runs (the busy server answers it),
// PING gets -BUSY, FUNCTION KILL ends it, and then FUNCTION STATS shows
// no script and the library every server has.
func TestFunctionStats(t *testing.T) {
	_, yaml := redisPool(t, 2, "  redis_scripts: dedicated\n  timeout: 3000\n", "--busy-reply-threshold", "100")
	_, addr := startProxy(t, yaml, "rd")
	c, runner := respDial(t, addr), respDial(t, addr)
	if got := c.do("FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('spin', function() local a = 1 while true do a = a + 1 end end)"); got != "$3\r\nlib\r\n" {
		t.Fatalf("FUNCTION LOAD: %q", got)
	}
	idle := "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"
	if got := c.do("FUNCTION", "STATS"); got != idle {
		t.Fatalf("FUNCTION STATS with no script: %q, want %q", got, idle)
	}
	runner.send(multibulk("FCALL", "spin", "0"))
	time.Sleep(300 * time.Millisecond) // past the threshold
	if got := c.do("FUNCTION", "STATS"); !strings.HasPrefix(got, "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n") {
		t.Fatalf("FUNCTION STATS while the function runs: %q", got)
	}
	if got := c.do("PING"); !strings.HasPrefix(got, "-BUSY ") {
		t.Fatalf("PING while the function runs: %q", got)
	}
	if got := c.do("FUNCTION", "KILL"); got != "+OK\r\n" {
		t.Fatalf("FUNCTION KILL: %q", got)
	}
	if got := runner.reply(); !strings.Contains(got, "killed") {
		t.Fatalf("the function's reply: %q", got)
	}
	if got := c.do("FUNCTION", "STATS"); got != idle {
		t.Fatalf("FUNCTION STATS after the kill: %q", got)
	}
}

// TestScriptsPipelined pipelines 200 scripts that each increment one
// key, under redis_scripts: dedicated with two dedicated connections per
// server: they run on one connection, in the client's order, as on
// Redis, where each on a connection of its own took one of the two and
// ran in any order.
func TestScriptsPipelined(t *testing.T) {
	_, yaml := redisPool(t, 1, "  redis_scripts: dedicated\n  blocking_connections: 2\n  timeout: 3000\n")
	srv, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	var b strings.Builder
	for i := 0; i < 200; i++ {
		b.WriteString(multibulk("EVAL", "return redis.call('incr', KEYS[1])", "1", "x"))
	}
	c.send(b.String())
	for i := 1; i <= 200; i++ {
		if got, want := c.reply(), fmt.Sprintf(":%d\r\n", i); got != want {
			t.Fatalf("script %d: %q, want %q", i, got, want)
		}
	}
	waitFor(t, 5*time.Second, "the script connection given back", func() bool {
		return routerStat(t, srv, "rd", "dedicated_connections") == 0 && routerStat(t, srv, "rd", "dedicated_idle") == 1
	})
}
