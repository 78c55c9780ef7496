package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// CLIENT REPLY through a sharded pool of real redis-servers: OFF mutes
// every later reply (a server's, an error, the proxy's own) until ON,
// SKIP the next one, as redis-server 7.0 does; the muted commands still
// run on the servers; and what Redis still sends a muted client reaches
// it: subscribe confirmations and messages (RESP2 and RESP3) and
// invalidations.
func TestRedisClientReply(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "")
	_, addr := startProxy(t, yaml, "rd")
	big := strings.Repeat("v", 64<<10) // past the writer's uncopied size

	// Each case sends its commands pipelined in one write and reads the
	// replies it expects; the first one read must be the first one not
	// muted, so a muted reply that leaks fails the case.
	cases := []struct {
		name string
		send [][]string
		want []string
	}{
		{"off then on", [][]string{
			{"CLIENT", "REPLY", "OFF"},
			{"SET", "r1", "a"}, {"SET", "r2", big}, {"GET", "r2"}, {"INCR", "r1"}, {"GET"}, {"PING", "p"},
			{"CLIENT", "REPLY", "ON"}, {"GET", "r1"},
		}, []string{"+OK\r\n", bulk("a")}},
		{"skip", [][]string{
			{"CLIENT", "REPLY", "SKIP"}, {"SET", "r3", "b"}, {"GET", "r3"},
		}, []string{bulk("b")}},
		{"skip skips an error", [][]string{
			{"CLIENT", "REPLY", "SKIP"}, {"GET"}, {"PING"},
		}, []string{"+PONG\r\n"}},
		{"skip twice", [][]string{
			{"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "SKIP"}, {"PING", "a"}, {"PING", "b"},
		}, []string{bulk("b")}},
		{"on unsets skip", [][]string{
			{"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "ON"}, {"PING"},
		}, []string{"+OK\r\n", "+PONG\r\n"}},
		{"skip under off", [][]string{
			{"CLIENT", "REPLY", "OFF"}, {"CLIENT", "REPLY", "SKIP"}, {"PING", "a"}, {"PING", "b"},
			{"CLIENT", "REPLY", "ON"}, {"PING", "c"},
		}, []string{"+OK\r\n", bulk("c")}},
		{"big value muted then shown", [][]string{
			{"CLIENT", "REPLY", "SKIP"}, {"GET", "r2"}, {"GET", "r2"},
		}, []string{bulk(big)}},
		{"bad mode", [][]string{
			{"CLIENT", "REPLY", "MAYBE"},
		}, []string{"-ERR syntax error\r\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := respDial(t, addr)
			var b strings.Builder
			for _, args := range tc.send {
				b.WriteString(multibulk(args...))
			}
			c.send(b.String())
			for i, want := range tc.want {
				if got := c.reply(); got != want {
					t.Fatalf("reply %d: %.80q, want %.80q", i, got, want)
				}
			}
			// Nothing else came: the next command's reply is next.
			if got := c.do("ECHO", "end"); got != bulk("end") {
				t.Fatalf("after the case: %.80q", got)
			}
		})
	}

	t.Run("muted quit closes", func(t *testing.T) {
		c := respDial(t, addr)
		c.send(multibulk("CLIENT", "REPLY", "OFF") + multibulk("QUIT"))
		c.expectClosed()
	})

	t.Run("pub/sub reaches a muted client", func(t *testing.T) {
		for _, proto := range []string{"2", "3"} {
			c, pub := respDial(t, addr), respDial(t, addr)
			if proto == "3" {
				hello3(t, c)
			}
			kind := "*3\r\n"
			if proto == "3" {
				kind = ">3\r\n"
			}
			c.send(multibulk("CLIENT", "REPLY", "OFF") + multibulk("SUBSCRIBE", "ch"))
			if got := c.reply(); got != kind+bulk("subscribe")+bulk("ch")+":1\r\n" {
				t.Fatalf("RESP%s subscribe: %q", proto, got)
			}
			c.send(multibulk("PING")) // muted in either mode
			if got := pub.do("PUBLISH", "ch", "hi"); got != ":1\r\n" {
				t.Fatalf("PUBLISH: %q", got)
			}
			if got := c.reply(); got != kind+bulk("message")+bulk("ch")+bulk("hi") {
				t.Fatalf("RESP%s message: %q", proto, got)
			}
			c.send(multibulk("UNSUBSCRIBE", "ch") + multibulk("CLIENT", "REPLY", "ON"))
			if got := c.reply(); got != kind+bulk("unsubscribe")+bulk("ch")+":0\r\n" {
				t.Fatalf("RESP%s unsubscribe: %q", proto, got)
			}
			if got := c.reply(); got != "+OK\r\n" {
				t.Fatalf("RESP%s CLIENT REPLY ON: %q", proto, got)
			}
		}
	})

	t.Run("invalidations reach a muted client", func(t *testing.T) {
		c, w := trackingClient(t, addr), respDial(t, addr)
		if got := w.do("SET", "tk", "1"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		if got := c.do("GET", "tk"); got != bulk("1") {
			t.Fatalf("GET: %q", got)
		}
		c.send(multibulk("CLIENT", "REPLY", "OFF") + multibulk("PING"))
		start := time.Now()
		w.do("SET", "tk", "2")
		took := expectPush(t, c, invalidate3("tk"), start)
		t.Logf("invalidation of a muted client after %v", took)
		replyOn(t, c)
	})

	t.Run("redirected invalidations reach a muted client", func(t *testing.T) {
		to, c, w := respDial(t, addr), respDial(t, addr), respDial(t, addr)
		hello3(t, to) // RESP3, with no tracking of its own
		id := clientID(t, to)
		if got := c.do("CLIENT", "TRACKING", "on", "REDIRECT", strconv.FormatInt(id, 10)); got != "+OK\r\n" {
			t.Fatalf("CLIENT TRACKING on REDIRECT: %q", got)
		}
		c.do("GET", "rk")
		to.send(multibulk("CLIENT", "REPLY", "OFF"))
		start := time.Now()
		w.do("SET", "rk", "1")
		took := expectPush(t, to, invalidate3("rk"), start)
		t.Logf("redirected invalidation of a muted client after %v", took)
		replyOn(t, to)
	})
}

// replyOn turns c's replies back on and checks that they come again.
func replyOn(t *testing.T, c *respClient) {
	t.Helper()
	c.send(multibulk("CLIENT", "REPLY", "ON") + multibulk("PING"))
	if got := c.readN(2); got != "+OK\r\n+PONG\r\n" {
		t.Fatalf("after ON: %q", got)
	}
}
