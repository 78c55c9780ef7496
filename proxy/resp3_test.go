package proxy_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/cluster"
	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// The RESP3 tests: clients that send HELLO 3 to a real 3-server pool
// (here) and a real Redis Cluster (TestClusterRESP3) get every reply in
// RESP3, byte for byte what a redis-server answers a RESP3 client
// directly, while RESP2 clients of the same pool get RESP2.

// hello3 switches c to RESP3 and checks the proxy's HELLO map.
func hello3(t testing.TB, c *respClient) {
	t.Helper()
	got := c.do("HELLO", "3")
	if !strings.HasPrefix(got, "%7\r\n$6\r\nserver\r\n$10\r\nshardproxy\r\n") || !strings.Contains(got, "$5\r\nproto\r\n:3\r\n") {
		t.Fatalf("HELLO 3: %q", got)
	}
}

// resp3Commands are commands whose RESP3 replies have the RESP3 types:
// map, set, double, null, boolean, big number, verbatim string; each
// names key k (hash-tagged to one place where a command has two).
func resp3Commands(k string) [][]string {
	return [][]string{
		{"HGETALL", k + ":h"},
		{"SMEMBERS", k + ":s"},
		{"ZSCORE", k + ":z", "m"},
		{"ZINCRBY", k + ":z", "0.25", "m"},
		{"ZRANGE", k + ":z", "0", "-1", "WITHSCORES"},
		{"GET", k + ":missing"},
		{"INCRBYFLOAT", k + ":f", "1.5"},
		{"HRANDFIELD", k + ":h", "-2", "WITHVALUES"},
		{"EVAL", "redis.setresp(3); return true", "1", k + ":h"},
		{"EVAL", "redis.setresp(3); return false", "1", k + ":h"},
		{"EVAL", "return {big_number='123456789012345678901234567890'}", "1", k + ":h"},
		{"EVAL", "return {verbatim_string={format='txt', string='hi'}}", "1", k + ":h"},
		{"EVAL", "return {double=3.5}", "1", k + ":h"},
		{"EVAL", "redis.setresp(3); return redis.call('hgetall', KEYS[1])", "1", k + ":h"},
		{"LPOP", k + ":nolist"},
		{"BLPOP", k + ":nolist", "0.01"},
	}
}

// fillResp3 writes the keys resp3Commands read, through c.
func fillResp3(t testing.TB, c *respClient, k string) {
	t.Helper()
	for _, cmd := range [][]string{
		{"DEL", k + ":h", k + ":s", k + ":z", k + ":f"},
		{"HSET", k + ":h", "a", "1", "b", "2"},
		{"SADD", k + ":s", "x", "y", "z"},
		{"ZADD", k + ":z", "1.5", "m"},
	} {
		if got := c.do(cmd...); strings.HasPrefix(got, "-") {
			t.Fatalf("%q: %q", cmd, got)
		}
	}
}

func TestRedisRESP3(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")

	// Keys on every server, two each.
	var keys []string
	per := map[string]int{}
	for i := 0; len(keys) < 2*len(servers); i++ {
		k := fmt.Sprintf("r3key%d", i)
		if per[where(k)] < 2 {
			per[where(k)]++
			keys = append(keys, k)
		}
	}
	c3 := respDial(t, addr)
	hello3(t, c3)
	c2 := respDial(t, addr)

	t.Run("types as redis-server sends them", func(t *testing.T) {
		for _, k := range keys[:3] {
			fillResp3(t, c3, k)
			for _, proto := range []string{"3", "2"} {
				c := c3
				if proto == "2" {
					c = c2
				}
				direct := directRedis(t, where(k+":h"), "", 0)
				if got := direct.do("HELLO", proto); !strings.Contains(got, "proto") {
					t.Fatalf("HELLO %s direct: %q", proto, got)
				}
				for _, cmd := range resp3Commands(k) {
					if cmd[0] == "ZINCRBY" || cmd[0] == "INCRBYFLOAT" {
						// Writes: the proxy's reply must be the next one the server would give.
						got := c.do(cmd...)
						want := direct.do("ZSCORE", k+":z", "m")
						if cmd[0] == "INCRBYFLOAT" {
							want = direct.do("GET", k+":f")
						}
						if got != want {
							t.Errorf("RESP%s %q: proxy %q, server after it %q", proto, cmd, got, want)
						}
						continue
					}
					if cmd[0] == "HRANDFIELD" { // random: only its shape
						got := c.do(cmd...)
						if want := map[string]string{"3": "*2\r\n*2\r\n", "2": "*4\r\n"}[proto]; !strings.HasPrefix(got, want) {
							t.Errorf("RESP%s %q: %q, want it to start %q", proto, cmd, got, want)
						}
						continue
					}
					got, want := c.do(cmd...), direct.do(cmd...)
					if got != want {
						t.Errorf("RESP%s %q: proxy %q, server %q", proto, cmd, got, want)
					}
				}
			}
		}
		// The RESP3 types are there, not RESP2 look-alikes.
		for cmd, want := range map[string]string{
			"HGETALL":  "%2\r\n",
			"SMEMBERS": "~3\r\n",
			"ZSCORE":   ",",
			"GET":      "_\r\n",
		} {
			args := map[string][]string{"HGETALL": {keys[0] + ":h"}, "SMEMBERS": {keys[0] + ":s"},
				"ZSCORE": {keys[0] + ":z", "m"}, "GET": {keys[0] + ":missing"}}[cmd]
			if got := c3.do(append([]string{cmd}, args...)...); !strings.HasPrefix(got, want) {
				t.Errorf("RESP3 %s: %q, want it to start %q", cmd, got, want)
			}
		}
		if got := c3.do("EVAL", "redis.setresp(3); return true", "1", "k"); got != "#t\r\n" {
			t.Errorf("RESP3 boolean: %q", got)
		}
		if got := c3.do("EVAL", "return {big_number='123456789012345678901234567890'}", "1", "k"); got != "(123456789012345678901234567890\r\n" {
			t.Errorf("RESP3 big number: %q", got)
		}
	})

	t.Run("fan-out merges", func(t *testing.T) {
		for _, k := range keys {
			c3.do("SET", k, "v"+k)
		}
		servers := map[string]bool{}
		args := []string{"MGET"}
		want := fmt.Sprintf("*%d\r\n", 2*len(keys))
		for _, k := range keys {
			servers[where(k)] = true
			args = append(args, k, k+":none")
			want += bulk("v"+k) + "_\r\n"
		}
		if len(servers) < 2 {
			t.Fatalf("keys on %d servers, want several", len(servers))
		}
		if got := c3.do(args...); got != want {
			t.Errorf("RESP3 MGET across servers: %q, want %q", got, want)
		}
		if got, want2 := c2.do(args...), strings.ReplaceAll(want, "_\r\n", "$-1\r\n"); got != want2 {
			t.Errorf("RESP2 MGET across servers: %q, want %q", got, want2)
		}
		if got := c3.do("EXISTS", keys[0], keys[1], keys[2], "none"); got != ":3\r\n" {
			t.Errorf("RESP3 EXISTS: %q", got)
		}
		if got := c3.do("INFO", "keyspace"); !strings.HasPrefix(got, "=") || !strings.Contains(got, "txt:# Keyspace\r\n") {
			t.Errorf("RESP3 INFO keyspace: %q, want a verbatim string", got)
		}
		if got := c2.do("INFO", "keyspace"); !strings.HasPrefix(got, "$") || !strings.Contains(got, "# Keyspace\r\n") {
			t.Errorf("RESP2 INFO keyspace: %q, want a bulk string", got)
		}
		if got := c3.do("INFO", "proxy"); !strings.HasPrefix(got, "=") || !strings.Contains(got, "txt:# Proxy\r\n") {
			t.Errorf("RESP3 INFO proxy: %q, want a verbatim string", got)
		}
		if got := c3.do("CLIENT", "GETNAME"); got != "_\r\n" {
			t.Errorf("RESP3 CLIENT GETNAME: %q", got)
		}
		if got := c3.do("KEYS", "r3key*"); !strings.HasPrefix(got, "*") {
			t.Errorf("RESP3 KEYS: %q", got)
		}
		if got := c3.do("DBSIZE"); !strings.HasPrefix(got, ":") {
			t.Errorf("RESP3 DBSIZE: %q", got)
		}
		if got := c3.do("SCAN", "0", "COUNT", "1000"); !strings.HasPrefix(got, "*2\r\n$") {
			t.Errorf("RESP3 SCAN: %q", got)
		}
		if got := c3.do("FUNCTION", "LIST"); got != "*0\r\n" {
			t.Errorf("RESP3 FUNCTION LIST: %q", got)
		}
	})

	t.Run("pipelined mix with a RESP2 client at once", func(t *testing.T) {
		const rounds = 200
		var wg sync.WaitGroup
		for _, proto := range []string{"3", "2"} {
			c := respDial(t, addr)
			if proto == "3" {
				hello3(t, c)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var in strings.Builder
				var want []string
				for i := range rounds {
					k := keys[i%len(keys)]
					in.WriteString(multibulk("HGETALL", keys[0]+":h"))
					in.WriteString(multibulk("MGET", k, "none"))
					in.WriteString(multibulk("GET", "none"))
					in.WriteString(multibulk("PING"))
					if proto == "3" {
						want = append(want, "%2\r\n"+bulk("a")+bulk("1")+bulk("b")+bulk("2"),
							"*2\r\n"+bulk("v"+k)+"_\r\n", "_\r\n", "+PONG\r\n")
					} else {
						want = append(want, "*4\r\n"+bulk("a")+bulk("1")+bulk("b")+bulk("2"),
							"*2\r\n"+bulk("v"+k)+"$-1\r\n", "$-1\r\n", "+PONG\r\n")
					}
				}
				go c.send(in.String())
				for i, w := range want {
					got, err := c.tryReply()
					if err != nil || got != w {
						t.Errorf("RESP%s reply %d: %q (%v), want %q", proto, i, got, err, w)
						return
					}
				}
			}()
		}
		wg.Wait()
	})

	t.Run("blocking and transactions", func(t *testing.T) {
		k := keys[0]
		if got := c3.do("BLPOP", k+":q", "0.05"); got != "_\r\n" {
			t.Errorf("RESP3 BLPOP timed out: %q", got)
		}
		done := make(chan string, 1)
		go func() {
			c := respDial(t, addr)
			hello3(t, c)
			done <- c.do("BLPOP", k+":q", "5")
		}()
		time.Sleep(100 * time.Millisecond)
		c2.do("RPUSH", k+":q", "job")
		if got := <-done; got != "*2\r\n"+bulk(k+":q")+bulk("job") {
			t.Errorf("RESP3 BLPOP woken: %q", got)
		}
		for _, cmd := range [][]string{{"WATCH", k + ":h"}, {"MULTI"}, {"HGETALL", k + ":h"}, {"ZSCORE", k + ":z", "m"}} {
			c3.do(cmd...)
		}
		if got := c3.do("EXEC"); !strings.HasPrefix(got, "*2\r\n%2\r\n") || !strings.Contains(got, "\r\n,") {
			t.Errorf("RESP3 EXEC: %q, want a map and a double", got)
		}
		// WATCH, then HELLO 2: the pinned connection switches with the client.
		c3.do("WATCH", k+":h")
		if got := c3.do("HELLO", "2"); !strings.HasPrefix(got, "*14\r\n") {
			t.Fatalf("HELLO 2: %q", got)
		}
		c3.do("MULTI")
		c3.do("HGETALL", k+":h")
		if got := c3.do("EXEC"); !strings.HasPrefix(got, "*1\r\n*4\r\n") {
			t.Errorf("RESP2 EXEC after HELLO 2 while pinned: %q", got)
		}
		if got := c3.do("HGETALL", k+":h"); !strings.HasPrefix(got, "*4\r\n") {
			t.Errorf("HGETALL after HELLO 2: %q", got)
		}
		hello3(t, c3)
		if got := c3.do("HGETALL", k+":h"); !strings.HasPrefix(got, "%2\r\n") {
			t.Errorf("HGETALL after HELLO 3 again: %q", got)
		}
	})

	t.Run("backend sockets per protocol", func(t *testing.T) {
		// Every server has RESP3 sockets now, and RESP2 ones.
		for _, s := range servers {
			info := directRedis(t, s.Addr, "", 0).do("CLIENT", "LIST")
			// (the connection asking is one RESP2 socket; the proxy's are the others)
			if !strings.Contains(info, "resp=3") || strings.Count(info, "resp=2") < 2 {
				t.Errorf("server %s: CLIENT LIST shows no socket of each protocol:\n%s", s.Addr, info)
			}
		}
	})
}

func TestClusterRESP3(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	rc := testserver.StartRedisCluster(t, 3, 1)
	cfg, err := config.Parse([]byte(clusterYAML("rc", rc.Addrs()[:1], "  timeout: 2000\n")), "cluster.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	addr := srv.Addr("rc").String()
	owner := func(key string) string {
		m := clusterShards(t, rc.Addrs()[0])
		return m.Shards[m.Owner(cluster.Slot([]byte(key)))].Master.Addr
	}
	c3, c2 := respDial(t, addr), respDial(t, addr)
	hello3(t, c3)

	keys := keysAcrossSlots(6, "r3")
	masters := map[string]bool{}
	for _, k := range keys {
		masters[owner(k)] = true
		// Hash-tag the key's companions to its slot.
		tagged := "{" + k + "}"
		fillResp3(t, c3, tagged)
		for _, proto := range []string{"3", "2"} {
			c := c3
			if proto == "2" {
				c = c2
			}
			direct := directRedis(t, owner(k), "", 0)
			direct.do("HELLO", proto)
			for _, cmd := range resp3Commands(tagged) {
				switch cmd[0] {
				case "ZINCRBY", "INCRBYFLOAT", "HRANDFIELD": // writes and random picks: the sharded test compares them
					continue
				}
				if got, want := c.do(cmd...), direct.do(cmd...); got != want {
					t.Errorf("cluster RESP%s %q: proxy %q, node %q", proto, cmd, got, want)
				}
			}
		}
	}
	if len(masters) < 2 {
		t.Fatalf("keys on %d masters, want several", len(masters))
	}

	args := []string{"MGET"}
	want := fmt.Sprintf("*%d\r\n", 2*len(keys))
	for _, k := range keys {
		c2.do("SET", k, "v"+k)
		args = append(args, k, k+"none")
		want += bulk("v"+k) + "_\r\n"
	}
	if got := c3.do(args...); got != want {
		t.Errorf("cluster RESP3 MGET across slots: %q, want %q", got, want)
	}
	if got, want2 := c2.do(args...), strings.ReplaceAll(want, "_\r\n", "$-1\r\n"); got != want2 {
		t.Errorf("cluster RESP2 MGET across slots: %q, want %q", got, want2)
	}
	if got := c3.do("INFO", "keyspace"); !strings.HasPrefix(got, "=") {
		t.Errorf("cluster RESP3 INFO: %q, want a verbatim string", got)
	}

	// Blocking commands and transactions on the nodes' dedicated connections.
	tagged := "{" + keys[0] + "}"
	if got := c3.do("BLPOP", tagged+":q", "0.05"); got != "_\r\n" {
		t.Errorf("cluster RESP3 BLPOP timed out: %q", got)
	}
	c3.do("WATCH", tagged+":h")
	c3.do("MULTI")
	c3.do("HGETALL", tagged+":h")
	c3.do("SMEMBERS", tagged+":s")
	if got := c3.do("EXEC"); !strings.HasPrefix(got, "*2\r\n%2\r\n") || !strings.Contains(got, "~3\r\n") {
		t.Errorf("cluster RESP3 EXEC: %q, want a map and a set", got)
	}
	if got := c2.do("HGETALL", tagged+":h"); !strings.HasPrefix(got, "*4\r\n") {
		t.Errorf("cluster RESP2 HGETALL beside a RESP3 client: %q", got)
	}
}
