package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// Pub/sub for RESP3 clients through a sharded pool of three real
// redis-servers: confirmations and messages as push frames ('>'), the
// byte-for-byte frames a direct RESP3 client of the server gets, normal
// commands answered while subscribed, and HELLO 2/3 while subscribed as
// redis-server 7.0.15 answers it.

// push3 is a RESP3 client's form of a pub/sub frame: '>' for the
// array's '*'.
func push3(resp2 string) string { return ">" + resp2[1:] }

// subReply3 is a confirmation as redis-server sends a RESP3 client.
func subReply3(kind, name string, count int) string {
	n := "_\r\n"
	if name != "\x00" {
		n = bulk(name)
	}
	return ">3\r\n" + bulk(kind) + n + ":" + strconv.Itoa(count) + "\r\n"
}

// serverHello3 switches c, a client of a redis-server, to RESP3.
func serverHello3(t testing.TB, c *respClient) {
	t.Helper()
	if got := c.do("HELLO", "3"); !strings.HasPrefix(got, "%7\r\n"+bulk("server")+bulk("redis")) {
		t.Fatalf("HELLO 3: %q", got)
	}
}

func TestRedisPubSubRESP3(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  blocking_connections: 8\n")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }
	chans := keyEach(where, servers, "ch")
	idle := func(t *testing.T) {
		t.Helper()
		waitFor(t, 5*time.Second, "subscribers gone", func() bool { return subsGone(stat) })
	}

	t.Run("push frames from every server", func(t *testing.T) {
		sub, pub := respDial(t, addr), respDial(t, addr)
		hello3(t, sub)
		sub.send(multibulk(append([]string{"SUBSCRIBE"}, chans...)...))
		want := subReply3("subscribe", chans[0], 1) + subReply3("subscribe", chans[1], 2) + subReply3("subscribe", chans[2], 3)
		if got := sub.readN(3); got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("PSUBSCRIBE", "ch*"), subReply3("psubscribe", "ch*", 4); got != want {
			t.Fatalf("PSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("SSUBSCRIBE", "sh1"), subReply3("ssubscribe", "sh1", 1); got != want {
			t.Fatalf("SSUBSCRIBE: %q, want %q", got, want)
		}
		for i, ch := range chans {
			// A direct RESP3 subscriber of the server: the proxy's
			// client must get the very bytes it gets.
			direct := directRedis(t, servers[i].Addr, "", 0)
			serverHello3(t, direct)
			direct.send(multibulk("SUBSCRIBE", ch))
			direct.reply()
			if got := pub.do("PUBLISH", ch, "m "+ch); got != ":3\r\n" {
				t.Fatalf("PUBLISH %s: %q, want :3 (the proxy's connection, for the channel and the pattern, and the direct client)", ch, got)
			}
			own := direct.reply()
			if own != push3(message(ch, "m "+ch)) {
				t.Fatalf("direct RESP3 subscriber: %q", own)
			}
			// The proxy's client: the message, then the pmessage
			// (the server sends them in that order on its one
			// connection to the proxy).
			if got := sub.reply(); got != own {
				t.Fatalf("message: %q, want the server's own %q", got, own)
			}
			if got, want := sub.reply(), push3(pmessage("ch*", ch, "m "+ch)); got != want {
				t.Fatalf("pmessage: %q, want %q", got, want)
			}
			direct.nc.Close()
		}
		if got := pub.do("SPUBLISH", "sh1", "s"); got != ":1\r\n" {
			t.Fatalf("SPUBLISH: %q", got)
		}
		if got, want := sub.reply(), ">3\r\n"+bulk("smessage")+bulk("sh1")+bulk("s"); got != want {
			t.Fatalf("smessage: %q, want %q", got, want)
		}
		// Normal commands while subscribed, with RESP3 replies.
		pub.do("HSET", "h3", "f", "1")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"PING"}, "+PONG\r\n"},
			{[]string{"PING", "hi"}, bulk("hi")},
			{[]string{"GET", "nokey"}, "_\r\n"},
			{[]string{"HGETALL", "h3"}, "%1\r\n" + bulk("f") + bulk("1")},
			{[]string{"SET", "k3", "v"}, "+OK\r\n"},
			{[]string{"GET", "k3"}, bulk("v")},
		} {
			if got := sub.do(tc.args...); got != tc.want {
				t.Errorf("%v while subscribed: %q, want %q", tc.args, got, tc.want)
			}
		}
		if stat("subscriptions") != 5 || stat("subscribed_clients") != 1 {
			t.Errorf("subscriptions %d, subscribed_clients %d; want 5, 1", stat("subscriptions"), stat("subscribed_clients"))
		}
		sub.send(multibulk("UNSUBSCRIBE"))
		got := sub.readN(3)
		if !strings.HasPrefix(got, ">3\r\n") || !strings.HasSuffix(got, ":1\r\n") { // the pattern is left
			t.Fatalf("UNSUBSCRIBE: %q", got)
		}
		if got, want := sub.do("PUNSUBSCRIBE"), subReply3("punsubscribe", "ch*", 0); got != want {
			t.Fatalf("PUNSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("SUNSUBSCRIBE"), subReply3("sunsubscribe", "sh1", 0); got != want {
			t.Fatalf("SUNSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("SUNSUBSCRIBE"), subReply3("sunsubscribe", "\x00", 0); got != want {
			t.Fatalf("SUNSUBSCRIBE with none held: %q, want %q", got, want)
		}
		idle(t)
	})

	t.Run("pipelined with messages", func(t *testing.T) {
		// One write: SUBSCRIBE, GET, HGETALL; the replies in order.
		sub, pub := respDial(t, addr), respDial(t, addr)
		hello3(t, sub)
		sub.send(multibulk("SUBSCRIBE", chans[1]) + multibulk("GET", "k3") + multibulk("HGETALL", "h3"))
		want := subReply3("subscribe", chans[1], 1) + bulk("v") + "%1\r\n" + bulk("f") + bulk("1")
		if got := sub.readN(3); got != want {
			t.Fatalf("pipeline: %q, want %q", got, want)
		}
		// The message comes over the subscription's server socket, GET's
		// reply over a shared one: both arrive whole, in either order.
		pub.do("PUBLISH", chans[1], "between")
		first, second := sub.do("GET", "k3"), sub.reply()
		if msg := push3(message(chans[1], "between")); !(first == msg && second == bulk("v") || first == bulk("v") && second == msg) {
			t.Fatalf("after PUBLISH, GET: %q then %q, want the message and %q", first, second, bulk("v"))
		}
		// RESET ends the subscriptions and goes back to RESP2.
		if got := sub.do("RESET"); got != "+RESET\r\n" {
			t.Fatalf("RESET: %q", got)
		}
		if got := sub.do("GET", "nokey"); got != "$-1\r\n" {
			t.Fatalf("GET after RESET: %q", got)
		}
		idle(t)
	})

	t.Run("HELLO while subscribed", func(t *testing.T) {
		const only = "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
		pub := respDial(t, addr)
		// RESP2 subscribed: HELLO is refused, and changes nothing.
		sub := respDial(t, addr)
		sub.do("SUBSCRIBE", chans[0])
		for _, args := range [][]string{{"HELLO", "3"}, {"HELLO"}, {"CLIENT", "SETNAME", "x"}} {
			name := strings.ToLower(args[0])
			if name == "client" {
				name = "client|setname"
			}
			if got, want := sub.do(args...), "-ERR Can't execute '"+name+only; got != want {
				t.Errorf("%v in RESP2 subscribed mode: %q, want %q", args, got, want)
			}
		}
		pub.do("PUBLISH", chans[0], "still 2")
		if got, want := sub.reply(), message(chans[0], "still 2"); got != want {
			t.Fatalf("message after a refused HELLO 3: %q, want %q", got, want)
		}
		sub.do("UNSUBSCRIBE")
		if got := sub.do("GET", "nokey"); got != "$-1\r\n" {
			t.Errorf("GET after a refused HELLO 3: %q, want RESP2's null", got)
		}
		if got := sub.do("CLIENT", "GETNAME"); got != "$-1\r\n" {
			t.Errorf("CLIENT GETNAME after a refused SETNAME: %q", got)
		}

		// RESP3 subscribed: HELLO 2 is served and puts the client in
		// RESP2's subscribed mode, its messages RESP2's.
		sub = respDial(t, addr)
		hello3(t, sub)
		sub.do("SUBSCRIBE", chans[0])
		if got := sub.do("HELLO", "2"); !strings.HasPrefix(got, "*14\r\n") || !strings.Contains(got, bulk("proto")+":2\r\n") {
			t.Fatalf("HELLO 2 while subscribed in RESP3: %q", got)
		}
		pub.do("PUBLISH", chans[0], "now 2")
		if got, want := sub.reply(), message(chans[0], "now 2"); got != want {
			t.Fatalf("message after HELLO 2: %q, want %q", got, want)
		}
		if got, want := sub.do("GET", "k3"), "-ERR Can't execute 'get"+only; got != want {
			t.Errorf("GET after HELLO 2: %q, want %q", got, want)
		}
		if got, want := sub.do("PING"), "*2\r\n"+bulk("pong")+bulk(""); got != want {
			t.Errorf("PING after HELLO 2: %q, want %q", got, want)
		}
		if got, want := sub.do("HELLO", "3"), "-ERR Can't execute 'hello"+only; got != want {
			t.Errorf("HELLO 3 back: %q, want %q", got, want)
		}
		if got, want := sub.do("UNSUBSCRIBE"), subReply("unsubscribe", chans[0], 0); got != want {
			t.Errorf("UNSUBSCRIBE: %q, want %q", got, want)
		}
		idle(t)
	})
}

// TestRedisPubSubRefused: a server's error reply to a subscribe command
// (an ACL user that may use channels "ok*" only: -NOPERM) refuses all of
// it, as redis-server refuses a whole command: the client holds none of
// its channels, not even those another server took, and nothing is
// counted.
func TestRedisPubSubRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  redis_auth: pw\n  redis_auth_user: limited\n  blocking_connections: 4\n")
	for _, s := range servers {
		if got := directRedis(t, s.Addr, "", 0).do("ACL", "SETUSER", "limited", "reset", "on", ">pw", "~*", "+@all",
			"resetchannels", "&ok*"); got != "+OK\r\n" {
			t.Fatalf("ACL SETUSER on %s: %q", s.Addr, got)
		}
	}
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }
	ok0, bad1 := keysOn(where, servers[0].Addr, "ok", 1)[0], keysOn(where, servers[1].Addr, "bad", 1)[0]
	ok2 := keysOn(where, servers[2].Addr, "ok", 1)[0]
	const noperm = "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n"
	login := func(proto3 bool) *respClient {
		c := respDial(t, addr)
		if got := c.do("AUTH", "limited", "pw"); got != "+OK\r\n" {
			t.Fatalf("AUTH: %q", got)
		}
		if proto3 {
			hello3(t, c)
		}
		return c
	}
	pub := login(false)
	for _, proto3 := range []bool{false, true} {
		t.Run("RESP3 "+strconv.FormatBool(proto3), func(t *testing.T) {
			sub := login(proto3)
			sr := subReply
			if proto3 {
				sr = subReply3
			}
			// ok0 on server 0 is taken, bad1 on server 1 refused.
			if got := sub.do("SUBSCRIBE", ok0, bad1); got != noperm {
				t.Fatalf("SUBSCRIBE %s %s: %q, want %q", ok0, bad1, got, noperm)
			}
			waitFor(t, 5*time.Second, "nothing held, nothing counted, server 0's subscription undone", func() bool {
				return subsGone(stat) && pubsubNumsub(t, servers[0].Addr, ok0) == "*2\r\n"+bulk(ok0)+":0\r\n"
			})
			if got := pub.do("PUBLISH", ok0, "lost"); got != ":0\r\n" {
				t.Fatalf("PUBLISH %s: %q, want no subscriber", ok0, got)
			}
			if got := sub.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING after the refusal: %q (subscribed, or a message?)", got)
			}
			if got, want := sub.do("SUBSCRIBE", ok0), sr("subscribe", ok0, 1); got != want {
				t.Fatalf("SUBSCRIBE %s: %q, want %q", ok0, got, want)
			}
			// Refused while subscribed: every server refuses "o*".
			if got := sub.do("PSUBSCRIBE", "o*"); got != noperm {
				t.Fatalf("PSUBSCRIBE o*: %q, want %q", got, noperm)
			}
			if got, want := sub.do("SUBSCRIBE", ok2), sr("subscribe", ok2, 2); got != want {
				t.Fatalf("SUBSCRIBE %s after the refused pattern: %q, want %q", ok2, got, want)
			}
			if got := stat("subscriptions"); got != 2 {
				t.Errorf("subscriptions %d, want 2", got)
			}
			if got := pub.do("PUBLISH", ok2, "heard"); got != ":1\r\n" {
				t.Fatalf("PUBLISH %s: %q", ok2, got)
			}
			want := message(ok2, "heard")
			if proto3 {
				want = push3(want)
			}
			if got := sub.reply(); got != want {
				t.Fatalf("message: %q, want %q", got, want)
			}
			sub.nc.Close()
			waitFor(t, 5*time.Second, "gauges back to 0", func() bool { return subsGone(stat) })
		})
	}
}
