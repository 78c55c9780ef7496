package proxy_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// TestSlowlogRedis: one of a Redis pool's two servers answers 1% of its
// requests 50 ms late. The pool's slowlog keeps those requests, names
// that server and the time spent at it, and go-redis reads them with
// SLOWLOG GET in Redis's format; SLOWLOG LEN and RESET work on it.
func TestSlowlogRedis(t *testing.T) {
	slow, fast := testserver.StartRedis(t), testserver.StartRedis(t)
	fp := faultproxy.New(t, slow.Addr)
	fp.Set(faultproxy.Downstream, faultproxy.Toxic{Spike: 0.01, SpikeBy: 50 * time.Millisecond})
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n  slowlog_threshold: 25\n  slowlog_max_len: 16\n"+
		"  servers:\n    - %s:1 slow\n    - %s:1 fast\n", fp.Addr(), fast.Addr)
	srv, addr := startProxy(t, yaml, "rd")
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { rdb.Close() })

	// The spikes: entries of the slowed server with 50ms at it. A busy
	// machine (-race) may make other requests slow too; those the proxy
	// took the time of (not at a server) are told apart by their phases.
	spikes := func() (n int) {
		for _, e := range srv.Slowlogs(-1)[0].Entries {
			if _, _, server, _ := e.Phases(); server >= 45*time.Millisecond {
				if e.Backend != "slow" {
					t.Errorf("entry %d: %v at server %q, which no fault slows", e.ID, server, e.Backend)
				}
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	n := 0
	for ; time.Now().Before(deadline); n++ {
		if err := rdb.Get(ctx, fmt.Sprintf("key:%d", n)).Err(); err != redis.Nil {
			t.Fatalf("get: %v", err)
		}
		if n%100 == 99 && spikes() >= 3 {
			break
		}
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatalf("SLOWLOG GET: %v", err)
	}
	t.Logf("%d requests, %d slow, %d slowed by the server", n, len(logs), spikes())
	if spikes() < 3 {
		t.Fatalf("after %d requests the slowlog holds %d entries of the slowed server, want 3", n, spikes())
	}
	for i, e := range logs {
		if e.Duration < 25*time.Millisecond || e.Duration > 5*time.Second {
			t.Errorf("entry %d: duration %v", i, e.Duration)
		}
		if len(e.Args) != 2 || e.Args[0] != "get" || !strings.HasPrefix(e.Args[1], "key:") {
			t.Errorf("entry %d: args %q", i, e.Args)
		}
		if !strings.HasPrefix(e.ClientAddr, "127.0.0.1:") {
			t.Errorf("entry %d: client %q", i, e.ClientAddr)
		}
		if since := time.Since(e.Time); since < 0 || since > time.Minute {
			t.Errorf("entry %d: time %v", i, e.Time)
		}
		if i > 0 && e.ID >= logs[i-1].ID {
			t.Errorf("entry %d: id %d after %d: not newest first", i, e.ID, logs[i-1].ID)
		}
	}
	if got, _ := rdb.SlowLogGet(ctx, 1).Result(); len(got) != 1 || got[0].ID != logs[0].ID {
		t.Errorf("SLOWLOG GET 1: %v", got)
	}
	if err := rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		t.Fatalf("SLOWLOG RESET: %v", err)
	}
	if n := slowlogLen(t, rdb); n != 0 {
		t.Errorf("SLOWLOG LEN after RESET: %d", n)
	}
	if err := rdb.Do(ctx, "SLOWLOG", "GET", "x").Err(); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("SLOWLOG GET x: %v", err)
	}
}

// TestSlowlogMemcache: "stats slowlog" lists a memcache pool's slow
// requests with the server that took the time.
func TestSlowlogMemcache(t *testing.T) {
	mc := testserver.StartMemcached(t)
	fp := faultproxy.New(t, mc.Addr)
	yaml := fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  slowlog_threshold: 20\n  servers:\n    - %s:1 late\n", fp.Addr())
	srv, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	c.do("get warm\r\n") // the socket is up before the toxic
	srv.ResetSlowlog("") // its dial may have been slow
	fp.Latency(faultproxy.Downstream, 40*time.Millisecond, 0)
	if got := c.do("get user:1\r\n"); got != "END\r\n" {
		t.Fatalf("get: %q", got)
	}
	fp.Clear()
	c.send("stats slowlog\r\n")
	var lines []string
	for {
		l := c.line()
		if l == "END" || l == "ERROR" {
			break
		}
		lines = append(lines, l)
	}
	if len(lines) != 3 || lines[0] != "STAT slowlog_len 1" || lines[1] != "STAT slowlog_threshold_us 20000" {
		t.Fatalf("stats slowlog:\n%s", strings.Join(lines, "\n"))
	}
	e := lines[2]
	if !regexp.MustCompile(`^STAT [0-9]+ time=[0-9]+\.[0-9]{6} us=`).MatchString(e) {
		t.Errorf("entry %q", e)
	}
	for _, want := range []string{" time=", " cmd=get key=user:1 backend=late client=127.0.0.1:", " server_us="} {
		if !strings.Contains(e, want) {
			t.Errorf("entry %q lacks %q", e, want)
		}
	}
	var us, server int64
	fmt.Sscanf(e[strings.Index(e, " us=")+1:], "us=%d", &us)
	fmt.Sscanf(e[strings.Index(e, " server_us=")+1:], "server_us=%d", &server)
	if us < 40000 || server < 39000 || server > us {
		t.Errorf("entry %q: %dus in all, %dus at the server", e, us, server)
	}
}

// slowlogLen asks SLOWLOG LEN (go-redis has no method for it).
func slowlogLen(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	n, err := rdb.Do(context.Background(), "SLOWLOG", "LEN").Int64()
	if err != nil {
		t.Fatalf("SLOWLOG LEN: %v", err)
	}
	return n
}

// TestSlowlogReload: a reload keeps the pool's slowlog, a new
// slowlog_max_len keeps its newest entries, and slowlog_max_len: 0 turns
// it off.
func TestSlowlogReload(t *testing.T) {
	mc := testserver.StartMemcached(t)
	fp := faultproxy.New(t, mc.Addr)
	port := testserver.FreePort(t)
	yaml := func(extra string) string {
		return fmt.Sprintf("mc:\n  listen: 127.0.0.1:%d\n  slowlog_threshold: 20\n%s  servers:\n    - %s:1\n", port, extra, fp.Addr())
	}
	srv, reload := reloadable(t, yaml(""))
	c := dial(t, fmt.Sprintf("127.0.0.1:%d", port))
	c.do("get warm\r\n")
	srv.ResetSlowlog("")
	fp.Latency(faultproxy.Downstream, 30*time.Millisecond, 0)
	for _, k := range []string{"a", "b", "c"} {
		c.do("get " + k + "\r\n")
	}
	keys := func() (s string) {
		for _, e := range srv.Slowlogs(-1)[0].Entries {
			s += string(e.Key)
		}
		return s
	}
	if got := keys(); got != "cba" {
		t.Fatalf("slowlog before the reload: %q", got)
	}
	if err := reload(yaml("  slowlog_max_len: 2\n")); err != nil {
		t.Fatal(err)
	}
	if got := keys(); got != "cb" {
		t.Errorf("after a reload to 2 entries: %q", got)
	}
	if err := reload(yaml("  slowlog_max_len: 0\n")); err != nil {
		t.Fatal(err)
	}
	c = dial(t, fmt.Sprintf("127.0.0.1:%d", port)) // on the new pool
	c.do("get d\r\n")
	if got := keys(); got != "" || srv.Slowlogs(-1)[0].MaxLen != 0 {
		t.Errorf("slowlog_max_len: 0 keeps %q", got)
	}
}

// busyScript keeps its server busy for at least 150 ms by the server's
// own clock, however fast the machine.
const busyScript = `local t0 = redis.call('TIME')
repeat local t = redis.call('TIME') until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= 150000
return 1`

// TestSlowlogConfigSet: CONFIG SET slowlog-log-slower-than and
// slowlog-max-len through a Redis pool set the pool's slowlog as well as
// the servers' (and CONFIG GET answers the pool's), with Redis's
// meanings: a threshold above a request's time leaves it out, 0 keeps
// every request, -1 none, a shorter length drops the oldest at once. An
// entry names the client as CLIENT SETNAME named it and shows AUTH's and
// HELLO's password redacted. A reload that leaves the pool's slowlog keys
// as they were keeps what CONFIG SET set.
func TestSlowlogConfigSet(t *testing.T) {
	const pw = "s3cret"
	servers := []*testserver.Server{testserver.StartRedis(t, "--requirepass", pw), testserver.StartRedis(t, "--requirepass", pw)}
	direct := func(s *testserver.Server) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, Password: pw})
		t.Cleanup(func() { c.Close() })
		return c
	}
	port := testserver.FreePort(t)
	yaml := func(extra string) string {
		return fmt.Sprintf("rd:\n  listen: 127.0.0.1:%d\n  redis: true\n  redis_auth: %s\n  redis_config: true\n  slowlog_threshold: 1000\n%s"+
			"  servers:\n    - %s:1 a\n    - %s:1 b\n", port, pw, extra, servers[0].Addr, servers[1].Addr)
	}
	srv, reload := reloadable(t, yaml(""))
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Protocol: 2, Password: pw, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { rdb.Close() })
	do := func(args ...any) *redis.Cmd {
		t.Helper()
		cmd := rdb.Do(ctx, args...)
		if err := cmd.Err(); err != nil && err != redis.Nil {
			t.Fatalf("%v: %v", args, err)
		}
		return cmd
	}
	configGet := func() map[string]string {
		t.Helper()
		m, err := rdb.ConfigGet(ctx, "slowlog-*").Result()
		if err != nil {
			t.Fatalf("CONFIG GET: %v", err)
		}
		return m
	}
	do("CLIENT", "SETNAME", "app")

	// A threshold of 50 ms: PING is left out, the busy script kept.
	do("CONFIG", "SET", "slowlog-log-slower-than", "50000")
	if got := configGet(); got["slowlog-log-slower-than"] != "50000" || got["slowlog-max-len"] != "128" {
		t.Errorf("CONFIG GET after a threshold of 50000: %v", got)
	}
	for _, s := range servers { // the servers have it too
		if got := direct(s).ConfigGet(ctx, "slowlog-log-slower-than").Val()["slowlog-log-slower-than"]; got != "50000" {
			t.Errorf("server %s: slowlog-log-slower-than %q", s.Addr, got)
		}
	}
	do("SLOWLOG", "RESET")
	do("PING")
	do("EVAL", busyScript, 0)
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 || logs[0].Args[0] != "EVAL" || logs[0].Duration < 150*time.Millisecond || logs[0].ClientName != "app" {
		t.Fatalf("threshold 50 ms, after PING and a 150 ms script: %+v", logs)
	}

	// -1: none, not even the script.
	do("CONFIG", "SET", "slowlog-log-slower-than", "-1")
	do("SLOWLOG", "RESET")
	do("EVAL", busyScript, 0)
	if n := slowlogLen(t, rdb); n != 0 {
		t.Errorf("threshold -1: SLOWLOG LEN %d", n)
	}
	if got := configGet()["slowlog-log-slower-than"]; got != "-1" {
		t.Errorf("CONFIG GET after -1: %q", got)
	}

	// 0 and a length of 10, in one CONFIG SET: every request, 10 kept;
	// a length of 3 drops the oldest at once.
	do("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "10")
	for range 20 {
		do("PING")
	}
	if n := slowlogLen(t, rdb); n != 10 {
		t.Errorf("threshold 0, length 10, after 20 PINGs: SLOWLOG LEN %d", n)
	}
	do("CONFIG", "SET", "slowlog-max-len", "3")
	if n := slowlogLen(t, rdb); n != 3 {
		t.Errorf("after a length of 3: SLOWLOG LEN %d", n)
	}
	// A server changed directly does not change what the pool answers.
	direct(servers[0]).ConfigSet(ctx, "slowlog-max-len", "99")
	if got := configGet(); got["slowlog-max-len"] != "3" || got["slowlog-log-slower-than"] != "0" {
		t.Errorf("CONFIG GET with a server changed directly: %v", got)
	}
	// A bad value is refused as Redis refuses it, and changes nothing.
	err = rdb.ConfigSet(ctx, "slowlog-max-len", "-5").Err()
	if err == nil || !strings.Contains(err.Error(), "argument must be between 0 and") {
		t.Errorf("CONFIG SET slowlog-max-len -5: %v", err)
	}
	if got := configGet()["slowlog-max-len"]; got != "3" {
		t.Errorf("after a refused length: %q", got)
	}

	// Secrets redacted, the rest as sent, the client's name in each.
	do("CONFIG", "SET", "slowlog-max-len", "10")
	do("SLOWLOG", "RESET")
	do("AUTH", pw)
	do("HELLO", "2", "AUTH", "default", pw)
	do("SET", "k", "v")
	logs, err = rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, e := range logs {
		shown = append(shown, strings.Join(e.Args, " "))
		if e.ClientName != "app" {
			t.Errorf("entry %q: client name %q", e.Args, e.ClientName)
		}
	}
	want := []string{"SET k v", "HELLO 2 AUTH (redacted) (redacted)", "AUTH (redacted)", "SLOWLOG RESET"}
	if strings.Join(shown, "|") != strings.Join(want, "|") {
		t.Errorf("entries:\n got %q\nwant %q", shown, want)
	}
	// SLOWLOG RESET inside a transaction is queued: the pool's slowlog is
	// reset, and EXEC's reply holds the server's OK.
	pipe := rdb.TxPipeline()
	pipe.Set(ctx, "k", "w", 0)
	reset := pipe.Do(ctx, "SLOWLOG", "RESET")
	if _, err := pipe.Exec(ctx); err != nil || reset.Val() != "OK" {
		t.Fatalf("MULTI, SET, SLOWLOG RESET, EXEC: %v, SLOWLOG RESET's reply %v", err, reset.Val())
	}
	logs, err = rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The transaction's own requests may be kept (each is logged as its
	// reply comes, and the reset is done as it is queued); none of before.
	inTx := map[string]bool{"multi": true, "set k w": true, "slowlog reset": true, "exec": true}
	for _, e := range logs {
		if a := strings.ToLower(strings.Join(e.Args, " ")); !inTx[a] {
			t.Errorf("after SLOWLOG RESET in a transaction: an entry of before it, %q", a)
		}
	}
	if len(logs) == 0 {
		t.Errorf("after a transaction with a threshold of 0: no entry")
	}
	for _, pl := range srv.Slowlogs(-1) { // the admin's view keeps no secret either
		for _, e := range pl.Entries {
			if strings.Contains(string(e.Args), pw) || e.Name != "app" {
				t.Errorf("entry %d keeps the password, or lacks the name: %q %q", e.ID, e.Args, e.Name)
			}
		}
	}

	// A reload that leaves slowlog_threshold and slowlog_max_len as they
	// were keeps what CONFIG SET set; one that changes them sets the
	// file's.
	if err := reload(yaml("  hash: fnv1a_64\n")); err != nil {
		t.Fatal(err)
	}
	if pl := srv.Slowlogs(0)[0]; pl.Threshold != 0 || pl.MaxLen != 10 {
		t.Errorf("after a reload of another key: threshold %v, length %d", pl.Threshold, pl.MaxLen)
	}
	if err := reload(yaml("  hash: fnv1a_64\n  slowlog_max_len: 64\n")); err != nil {
		t.Fatal(err)
	}
	if pl := srv.Slowlogs(0)[0]; pl.Threshold != time.Second || pl.MaxLen != 64 {
		t.Errorf("after a reload of slowlog_max_len: threshold %v, length %d", pl.Threshold, pl.MaxLen)
	}
}
