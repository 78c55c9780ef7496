package proxy_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisClientList lists, describes and kills the proxy's own Redis
// clients: CLIENT LIST shows each with its id, address, name, flags and
// protocol as redis-server words them (go-redis parses CLIENT INFO), its
// filters pick them, and CLIENT KILL ends one once its replies are sent.
func TestRedisClientList(t *testing.T) {
	_, yaml := redisPool(t, 2, "")
	_, addr := startProxy(t, yaml, "rd")

	named := respDial(t, addr)
	if got := named.do("CLIENT", "SETNAME", "app"); got != "+OK\r\n" {
		t.Fatalf("SETNAME: %q", got)
	}
	namedID := clientID(t, named)
	tx := respDial(t, addr)
	txID := clientID(t, tx)
	if got := tx.do("MULTI"); got != "+OK\r\n" {
		t.Fatalf("MULTI: %q", got)
	}
	sub := respDial(t, addr)
	subID := clientID(t, sub)
	sub.do("SUBSCRIBE", "ch")

	list := bulkText(t, named.do("CLIENT", "LIST"))
	lines := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("CLIENT LIST has %d lines, want 3:\n%s", len(lines), list)
	}
	fields := map[int64]map[string]string{}
	for _, l := range lines {
		f := lineFields(l)
		id, _ := strconv.ParseInt(f["id"], 10, 64)
		fields[id] = f
	}
	for id, want := range map[int64]map[string]string{
		namedID: {"name": "app", "flags": "N", "cmd": "client|list", "multi": "-1", "resp": "2", "user": "default", "db": "0"},
		txID:    {"name": "", "flags": "x", "cmd": "multi", "multi": "0"},
		subID:   {"flags": "P", "cmd": "subscribe"},
	} {
		for k, v := range want {
			if got := fields[id][k]; got != v {
				t.Errorf("client %d: %s=%q, want %q (line %v)", id, k, got, v, fields[id])
			}
		}
	}
	if a := fields[namedID]["addr"]; a != named.nc.LocalAddr().String() || fields[namedID]["laddr"] != addr {
		t.Errorf("addr=%s laddr=%s, want %s and %s", a, fields[namedID]["laddr"], named.nc.LocalAddr(), addr)
	}

	byID := bulkText(t, named.do("CLIENT", "LIST", "ID", strconv.FormatInt(txID, 10), "999999"))
	if strings.Count(byID, "\n") != 1 || lineFields(strings.TrimSpace(byID))["id"] != strconv.FormatInt(txID, 10) {
		t.Errorf("CLIENT LIST ID %d: %q", txID, byID)
	}
	pubsub := bulkText(t, named.do("CLIENT", "LIST", "TYPE", "pubsub"))
	if strings.Count(pubsub, "\n") != 1 || lineFields(strings.TrimSpace(pubsub))["id"] != strconv.FormatInt(subID, 10) {
		t.Errorf("CLIENT LIST TYPE pubsub: %q", pubsub)
	}

	// go-redis reads CLIENT INFO into its struct.
	rdb := newGoRedis(t, &redis.Options{Addr: addr, Protocol: 3, ClientName: "lib"})
	info, err := rdb.ClientInfo(context.Background()).Result()
	if err != nil {
		t.Fatalf("go-redis ClientInfo: %v", err)
	}
	if info.Name != "lib" || info.Resp != 3 || info.ID <= 0 || info.LastCmd != "client|info" {
		t.Errorf("go-redis ClientInfo: %+v", info)
	}

	if got := named.do("CLIENT", "KILL", "ID", strconv.FormatInt(txID, 10)); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL ID: %q", got)
	}
	tx.expectClosed()
	if got := named.do("CLIENT", "KILL", sub.nc.LocalAddr().String()); got != "+OK\r\n" {
		t.Fatalf("CLIENT KILL addr: %q", got)
	}
	sub.expectClosed()
	// SKIPME yes by default: the asking client stays.
	if got := named.do("CLIENT", "KILL", "ID", strconv.FormatInt(namedID, 10)); got != ":0\r\n" {
		t.Fatalf("CLIENT KILL of itself: %q", got)
	}
	if got := named.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after CLIENT KILL SKIPME yes: %q", got)
	}
	if got := named.do("CLIENT", "KILL", "ID", strconv.FormatInt(namedID, 10), "SKIPME", "no"); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL of itself, SKIPME no: %q", got)
	}
	named.expectClosed()
}

// TestRedisClientErrors sends CLIENT commands the proxy answers itself,
// malformed or not, to the proxy and to a redis-server: the replies are
// the same.
func TestRedisClientErrors(t *testing.T) {
	servers, yaml := redisPool(t, 1, "")
	_, addr := startProxy(t, yaml, "rd")
	proxied := respDial(t, addr)
	direct := respDial(t, servers[0].Addr)
	for _, cmd := range [][]string{
		{"CLIENT", "LIST", "TYPE", "bogus"}, {"CLIENT", "LIST", "ID", "3", "x"}, {"CLIENT", "LIST", "ID"},
		{"CLIENT", "LIST", "foo"}, {"CLIENT", "INFO", "x"}, {"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ID", "999"}, {"CLIENT", "KILL", "ID", "x"}, {"CLIENT", "KILL", "ID", "0"},
		{"CLIENT", "KILL", "TYPE", "bogus"}, {"CLIENT", "KILL", "SKIPME", "maybe"}, {"CLIENT", "KILL", "foo", "bar"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "no"}, {"CLIENT", "KILL", "USER", "nobody"},
		{"CLIENT", "KILL", "LADDR", "1.2.3.4:5"}, {"CLIENT", "KILL", "ADDR"}, {"CLIENT", "KILL", "TYPE", "master"},
		{"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "NO-EVICT", "OFF"}, {"CLIENT", "NO-EVICT", "maybe"}, {"CLIENT", "KILL"},
	} {
		if got, want := proxied.do(cmd...), direct.do(cmd...); got != want {
			t.Errorf("%q: proxy %q, redis-server %q", cmd, got, want)
		}
	}
}

// clientID returns c's CLIENT ID.
func clientID(t *testing.T, c *respClient) int64 {
	t.Helper()
	r := c.do("CLIENT", "ID")
	id, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(r, ":")), 10, 64)
	if err != nil {
		t.Fatalf("CLIENT ID: %q", r)
	}
	return id
}

var bulkHead = regexp.MustCompile(`^\$(\d+)\r\n`)

// bulkText returns a bulk string reply's text.
func bulkText(t *testing.T, r string) string {
	t.Helper()
	m := bulkHead.FindStringSubmatch(r)
	if m == nil {
		t.Fatalf("not a bulk string: %q", r)
	}
	n, _ := strconv.Atoi(m[1])
	return r[len(m[0]) : len(m[0])+n]
}

// lineFields splits a CLIENT LIST line into its fields.
func lineFields(l string) map[string]string {
	f := map[string]string{}
	for _, kv := range strings.Fields(l) {
		k, v, _ := strings.Cut(kv, "=")
		f[k] = v
	}
	return f
}

// TestRedisClientFields puts a client of the proxy and a client of a
// redis-server in the same state and compares the fields of their CLIENT
// LIST lines that the proxy knows of its clients: flags, subscriptions,
// the commands queued in MULTI, tracking's redirection, the query buffer
// and argv-mem of the asking client.
func TestRedisClientFields(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 1, "")
	_, addr := startProxy(t, yaml, "rd")
	compared := []string{"flags", "db", "sub", "psub", "ssub", "multi", "qbuf", "argv-mem", "cmd", "redir", "resp"}

	// line returns c's line as observer sees it.
	line := func(observer, c *respClient) map[string]string {
		t.Helper()
		return lineFields(strings.TrimSpace(bulkText(t, observer.do("CLIENT", "LIST", "ID", strconv.FormatInt(clientID(t, c), 10)))))
	}
	cases := []struct {
		name  string
		setup [][]string // sent and answered
		send  []string   // sent, not answered (a blocking command)
		want  string     // what the flags are on both
	}{
		{"subscribed", [][]string{{"SUBSCRIBE", "a", "b"}, {"PSUBSCRIBE", "p*"}}, nil, "P"},
		{"multi", [][]string{{"MULTI"}, {"SET", "k", "1"}, {"INCR", "k"}}, nil, "x"},
		{"watch", [][]string{{"WATCH", "k"}}, nil, "N"},
		{"tracking", [][]string{{"HELLO", "3"}, {"CLIENT", "TRACKING", "on"}}, nil, "t"},
		{"tracking bcast", [][]string{{"HELLO", "3"}, {"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"}}, nil, "tB"},
		{"blocked", nil, []string{"BLPOP", "nothing", "0"}, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]map[string]string{}
			for _, target := range []string{addr, servers[0].Addr} {
				c, observer := respDial(t, target), respDial(t, target)
				id := clientID(t, c)
				for _, args := range tc.setup {
					c.send(multibulk(args...))
					if strings.EqualFold(args[0], "subscribe") {
						c.readN(len(args) - 1)
					} else {
						c.reply()
					}
				}
				if tc.send != nil {
					c.send(multibulk(tc.send...))
					waitFor(t, 2*time.Second, "the client blocked", func() bool {
						l := bulkText(t, observer.do("CLIENT", "LIST", "ID", strconv.FormatInt(id, 10)))
						return strings.Contains(l, "flags="+tc.want+" ")
					})
				}
				l := lineFields(strings.TrimSpace(bulkText(t, observer.do("CLIENT", "LIST", "ID", strconv.FormatInt(id, 10)))))
				if l["flags"] != tc.want {
					t.Errorf("%s: flags=%s, want %s (%v)", target, l["flags"], tc.want, l)
				}
				got[target] = l
			}
			for _, k := range compared {
				if k == "argv-mem" && tc.send != nil {
					continue // a server holds a blocked command's arguments; the proxy counts the asking client's only
				}
				if p, d := got[addr][k], got[servers[0].Addr][k]; p != d {
					t.Errorf("%s=%s through the proxy, %s on redis-server", k, p, d)
				}
			}
		})
	}

	t.Run("redirect", func(t *testing.T) {
		for _, target := range []string{addr, servers[0].Addr} {
			c, to := respDial(t, target), respDial(t, target)
			toID := clientID(t, to)
			if got := c.do("CLIENT", "TRACKING", "on", "REDIRECT", strconv.FormatInt(toID, 10)); got != "+OK\r\n" {
				t.Fatalf("%s: CLIENT TRACKING on REDIRECT: %q", target, got)
			}
			if l := line(to, c); l["flags"] != "t" || l["redir"] != strconv.FormatInt(toID, 10) {
				t.Errorf("%s: flags=%s redir=%s, want t and %d", target, l["flags"], l["redir"], toID)
			}
		}
	})

	t.Run("asking client", func(t *testing.T) {
		got := map[string]map[string]string{}
		for _, target := range []string{addr, servers[0].Addr} {
			c := respDial(t, target)
			c.send(multibulk("PING") + multibulk("CLIENT", "INFO")) // one read: qbuf holds both
			c.reply()
			got[target] = lineFields(strings.TrimSpace(bulkText(t, c.reply())))
		}
		for _, k := range compared {
			if p, d := got[addr][k], got[servers[0].Addr][k]; p != d {
				t.Errorf("%s=%s through the proxy, %s on redis-server", k, p, d)
			}
		}
		if got[addr]["qbuf"] != "40" || got[addr]["argv-mem"] != "10" {
			t.Errorf("qbuf=%s argv-mem=%s, want 40 and 10", got[addr]["qbuf"], got[addr]["argv-mem"])
		}
	})

	t.Run("partial request", func(t *testing.T) {
		c, observer := respDial(t, addr), respDial(t, addr)
		id := clientID(t, c)
		c.send("*1\r\n$4\r\nPI")
		waitFor(t, 2*time.Second, "qbuf=10", func() bool {
			return lineFields(strings.TrimSpace(bulkText(t, observer.do("CLIENT", "LIST", "ID", strconv.FormatInt(id, 10)))))["qbuf"] == "10"
		})
		if got := c.raw("NG\r\n"); got != "+PONG\r\n" {
			t.Fatalf("the rest of the request: %q", got)
		}
	})
}
