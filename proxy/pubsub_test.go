package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/internal/testserver"
)

// Pub/sub through a sharded Redis pool of three real redis-servers:
// channels placed as keys, patterns on every server, the subscribed
// mode's limits, the merged PUBSUB introspection, and what becomes of a
// subscriber's server connections when it leaves, reads too slowly, or
// its server dies.

// subReply is a subscribed-mode confirmation as redis-server sends it.
func subReply(kind, name string, count int) string {
	n := "$-1\r\n"
	if name != "\x00" {
		n = bulk(name)
	}
	return "*3\r\n" + bulk(kind) + n + ":" + strconv.Itoa(count) + "\r\n"
}

// message is a message frame as redis-server sends it.
func message(ch, payload string) string {
	return "*3\r\n" + bulk("message") + bulk(ch) + bulk(payload)
}

func pmessage(pat, ch, payload string) string {
	return "*4\r\n" + bulk("pmessage") + bulk(pat) + bulk(ch) + bulk(payload)
}

// readAll reads n replies and returns them joined.
func (c *respClient) readN(n int) string {
	c.t.Helper()
	var b strings.Builder
	for range n {
		b.WriteString(c.reply())
	}
	return b.String()
}

// pubsubNumsub reads a server's count of subscribers of ch, directly.
func pubsubNumsub(t testing.TB, addr, ch string) string {
	t.Helper()
	c := directRedis(t, addr, "", 0)
	defer c.nc.Close()
	return c.do("PUBSUB", "NUMSUB", ch)
}

// keyEach returns a key with prefix for each of servers, in order: the
// first the pool places on it.
func keyEach(where func(string) string, servers []*testserver.Server, prefix string) []string {
	keys := make([]string, len(servers))
	for i, s := range servers {
		keys[i] = keysOn(where, s.Addr, prefix, 1)[0]
	}
	return keys
}

// subsGone reports whether a pool's gauges (stat) show no subscriber
// left: no dedicated connection, no subscribed client, no subscription.
func subsGone(stat func(string) int64) bool {
	return stat("dedicated_connections") == 0 && stat("subscribed_clients") == 0 && stat("subscriptions") == 0
}

func TestRedisPubSub(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  blocking_connections: 3\n")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }
	chans := keyEach(where, servers, "ch") // one channel on each server

	t.Run("subscribe meets publish on every server", func(t *testing.T) {
		sub, pub := respDial(t, addr), respDial(t, addr)
		sub.send(multibulk(append([]string{"SUBSCRIBE"}, chans...)...))
		want := subReply("subscribe", chans[0], 1) + subReply("subscribe", chans[1], 2) + subReply("subscribe", chans[2], 3)
		if got := sub.readN(3); got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}
		if got := stat("subscribed_clients"); got != 1 {
			t.Errorf("subscribed_clients %d, want 1", got)
		}
		if got := stat("subscriptions"); got != 3 {
			t.Errorf("subscriptions %d, want 3", got)
		}
		for i, ch := range chans {
			// Each channel's subscription is on the server of its name.
			if got, want := pubsubNumsub(t, servers[i].Addr, ch), "*2\r\n"+bulk(ch)+":1\r\n"; got != want {
				t.Errorf("PUBSUB NUMSUB on %s: %q, want %q", servers[i].Addr, got, want)
			}
			if got := pub.do("PUBLISH", ch, "via proxy "+ch); got != ":1\r\n" {
				t.Fatalf("PUBLISH %s through the proxy: %q", ch, got)
			}
			if got, want := sub.reply(), message(ch, "via proxy "+ch); got != want {
				t.Fatalf("message: %q, want %q", got, want)
			}
			// A publisher on the server itself reaches the subscriber too.
			direct := directRedis(t, servers[i].Addr, "", 0)
			if got := direct.do("PUBLISH", ch, "direct"); got != ":1\r\n" {
				t.Fatalf("PUBLISH %s on its server: %q", ch, got)
			}
			if got, want := sub.reply(), message(ch, "direct"); got != want {
				t.Fatalf("message: %q, want %q", got, want)
			}
		}
		// SUBSCRIBE of a held channel is confirmed alone, count unchanged.
		if got, want := sub.do("SUBSCRIBE", chans[0]), subReply("subscribe", chans[0], 3); got != want {
			t.Fatalf("SUBSCRIBE again: %q, want %q", got, want)
		}
		// UNSUBSCRIBE with no channel: every one, counting down.
		sub.send(multibulk("UNSUBSCRIBE"))
		got := sub.readN(3)
		for _, ch := range chans {
			if !strings.Contains(got, bulk("unsubscribe")+bulk(ch)) {
				t.Fatalf("UNSUBSCRIBE: %q lacks %s", got, ch)
			}
		}
		if !strings.HasSuffix(got, ":0\r\n") {
			t.Fatalf("UNSUBSCRIBE: %q does not end at count 0", got)
		}
		// Out of subscribed mode: commands work again, the connections are gone.
		if got := sub.do("SET", "after", "1"); got != "+OK\r\n" {
			t.Fatalf("SET after UNSUBSCRIBE: %q", got)
		}
		waitFor(t, 5*time.Second, "subscriber connections given back", func() bool { return subsGone(stat) })
	})

	t.Run("psubscribe on every server", func(t *testing.T) {
		sub, pub := respDial(t, addr), respDial(t, addr)
		if got, want := sub.do("PSUBSCRIBE", "ch*"), subReply("psubscribe", "ch*", 1); got != want {
			t.Fatalf("PSUBSCRIBE: %q, want %q (one confirmation, not one per server)", got, want)
		}
		if got := stat("dedicated_connections"); got != 3 {
			t.Errorf("dedicated_connections %d, want 3 (one per server)", got)
		}
		for i, ch := range chans {
			direct := directRedis(t, servers[i].Addr, "", 0)
			if got := direct.do("PUBLISH", ch, "p"+ch); got != ":1\r\n" {
				t.Fatalf("PUBLISH on %s: %q", servers[i].Addr, got)
			}
			if got, want := sub.reply(), pmessage("ch*", ch, "p"+ch); got != want {
				t.Fatalf("pmessage: %q, want %q", got, want)
			}
		}
		if got := pub.do("PUBLISH", chans[1], "x"); got != ":1\r\n" {
			t.Fatalf("PUBLISH through the proxy: %q", got)
		}
		if got, want := sub.reply(), pmessage("ch*", chans[1], "x"); got != want {
			t.Fatalf("pmessage: %q, want %q", got, want)
		}
		if got, want := pub.do("PUBSUB", "NUMPAT"), ":1\r\n"; got != want {
			t.Errorf("PUBSUB NUMPAT: %q, want %q", got, want)
		}
		if got, want := sub.do("PUNSUBSCRIBE"), subReply("punsubscribe", "ch*", 0); got != want {
			t.Fatalf("PUNSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("PUNSUBSCRIBE"), subReply("punsubscribe", "\x00", 0); got != want {
			t.Fatalf("PUNSUBSCRIBE with none held: %q, want %q", got, want)
		}
	})

	t.Run("subscribed mode", func(t *testing.T) {
		sub := respDial(t, addr)
		sub.do("SUBSCRIBE", chans[0])
		const only = "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
		for _, tc := range []struct{ args []string }{{[]string{"GET", "k"}}, {[]string{"CLIENT", "ID"}}, {[]string{"MULTI"}}, {[]string{"PUBLISH", "a", "b"}}} {
			name := strings.ToLower(tc.args[0])
			if len(tc.args) > 1 && name == "client" {
				name += "|" + strings.ToLower(tc.args[1])
			}
			if got, want := sub.do(tc.args...), "-ERR Can't execute '"+name+only; got != want {
				t.Errorf("%v: %q, want %q", tc.args, got, want)
			}
		}
		if got, want := sub.do("PING"), "*2\r\n"+bulk("pong")+bulk(""); got != want {
			t.Errorf("PING: %q, want %q", got, want)
		}
		if got, want := sub.do("PING", "hi"), "*2\r\n"+bulk("pong")+bulk("hi"); got != want {
			t.Errorf("PING hi: %q, want %q", got, want)
		}
		// Subscribed mode lasts while a shard channel is held.
		sub.do("SSUBSCRIBE", "s1")
		if got, want := sub.do("UNSUBSCRIBE"), subReply("unsubscribe", chans[0], 0); got != want {
			t.Errorf("UNSUBSCRIBE: %q, want %q", got, want)
		}
		if got := sub.do("GET", "k"); !strings.HasPrefix(got, "-ERR Can't execute") {
			t.Errorf("GET with a shard channel held: %q", got)
		}
		if got, want := sub.do("SUNSUBSCRIBE"), subReply("sunsubscribe", "s1", 0); got != want {
			t.Errorf("SUNSUBSCRIBE: %q, want %q", got, want)
		}
		if got := sub.do("PING"); got != "+PONG\r\n" {
			t.Errorf("PING after the last unsubscribe: %q", got)
		}
		// RESET ends subscribed mode at once.
		sub.do("PSUBSCRIBE", "x*")
		if got := sub.do("RESET"); got != "+RESET\r\n" {
			t.Errorf("RESET: %q", got)
		}
		if got := sub.do("GET", "nokey"); got != "$-1\r\n" {
			t.Errorf("GET after RESET: %q", got)
		}
		// UNSUBSCRIBE outside subscribed mode, as redis-server answers it.
		if got, want := sub.do("UNSUBSCRIBE", "x"), subReply("unsubscribe", "x", 0); got != want {
			t.Errorf("UNSUBSCRIBE x unsubscribed: %q, want %q", got, want)
		}
		waitFor(t, 5*time.Second, "connections given back", func() bool { return stat("dedicated_connections") == 0 })
	})

	t.Run("PUBSUB merged", func(t *testing.T) {
		a, b, c := respDial(t, addr), respDial(t, addr), respDial(t, addr)
		a.send(multibulk("SUBSCRIBE", chans[0], chans[1]))
		a.readN(2)
		b.send(multibulk("SUBSCRIBE", chans[0], chans[2]))
		b.readN(2)
		want := "*6\r\n" + bulk(chans[0]) + ":2\r\n" + bulk(chans[1]) + ":1\r\n" + bulk("nobody") + ":0\r\n"
		if got := c.do("PUBSUB", "NUMSUB", chans[0], chans[1], "nobody"); got != want {
			t.Errorf("PUBSUB NUMSUB: %q, want %q", got, want)
		}
		got := c.do("PUBSUB", "CHANNELS")
		if !strings.HasPrefix(got, "*3\r\n") {
			t.Errorf("PUBSUB CHANNELS: %q, want 3 channels", got)
		}
		for _, ch := range chans {
			if strings.Count(got, bulk(ch)) != 1 {
				t.Errorf("PUBSUB CHANNELS: %q has %s %d times", got, ch, strings.Count(got, bulk(ch)))
			}
		}
		if got := c.do("PUBSUB", "NUMSUB"); got != "*0\r\n" {
			t.Errorf("PUBSUB NUMSUB without channels: %q", got)
		}
	})

	t.Run("disconnect releases", func(t *testing.T) {
		waitFor(t, 5*time.Second, "earlier clients gone", func() bool { return stat("dedicated_connections") == 0 })
		sub := respDial(t, addr)
		sub.send(multibulk(append([]string{"SUBSCRIBE"}, chans...)...))
		sub.readN(3)
		if got := stat("dedicated_connections"); got != 3 {
			t.Fatalf("dedicated_connections %d, want 3", got)
		}
		sub.nc.Close()
		waitFor(t, 2*time.Second, "connections closed and the servers' subscriptions gone", func() bool {
			return stat("dedicated_connections") == 0 && stat("subscribed_clients") == 0 &&
				pubsubNumsub(t, servers[0].Addr, chans[0]) == "*2\r\n"+bulk(chans[0])+":0\r\n"
		})
	})

	t.Run("go-redis", func(t *testing.T) {
		ctx := context.Background()
		rdb := newGoRedis(t, &redis.Options{Addr: addr})
		ps := rdb.Subscribe(ctx, chans...)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil { // the first confirmation
			t.Fatal(err)
		}
		ps.PSubscribe(ctx, "gr*")
		for _, ch := range append(chans, "gr1") {
			if err := rdb.Publish(ctx, ch, "hi "+ch).Err(); err != nil {
				t.Fatal(err)
			}
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil || msg.Channel != ch || msg.Payload != "hi "+ch {
				t.Fatalf("ReceiveMessage: %+v %v, want %s", msg, err, ch)
			}
		}
		if err := ps.Ping(ctx); err != nil {
			t.Fatalf("PubSub Ping: %v", err)
		}
	})

	t.Run("limit exhausted", func(t *testing.T) {
		waitFor(t, 5*time.Second, "earlier clients gone", func() bool { return stat("dedicated_connections") == 0 })
		var held []*respClient
		for range 3 {
			c := respDial(t, addr)
			if got := c.do("SUBSCRIBE", chans[0]); got != subReply("subscribe", chans[0], 1) {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			held = append(held, c)
		}
		c := respDial(t, addr)
		got := c.do("SUBSCRIBE", chans[0])
		if !strings.HasPrefix(got, "-ERR no dedicated connection free for server "+servers[0].Addr) || !strings.Contains(got, "blocking_connections") {
			t.Fatalf("4th SUBSCRIBE: %q", got)
		}
		// Refused, the client is not subscribed; a channel elsewhere works.
		if got := c.do("GET", "k"); got != "$-1\r\n" {
			t.Fatalf("GET after a refused SUBSCRIBE: %q", got)
		}
		if got := c.do("SUBSCRIBE", chans[1]); got != subReply("subscribe", chans[1], 1) {
			t.Fatalf("SUBSCRIBE elsewhere: %q", got)
		}
		// PSUBSCRIBE needs every server, the full one too.
		if got := c.do("PSUBSCRIBE", "p*"); !strings.HasPrefix(got, "-ERR no dedicated connection free") {
			t.Fatalf("PSUBSCRIBE at the limit: %q", got)
		}
		held[0].nc.Close()
		waitFor(t, 2*time.Second, "a connection given back", func() bool { return stat("dedicated_connections") == 3 })
		if got := c.do("PSUBSCRIBE", "p*"); got != subReply("psubscribe", "p*", 2) {
			t.Fatalf("PSUBSCRIBE after one left: %q", got)
		}
	})
}

func TestRedisPubSubSlowClient(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 1, "")
	srv, addr := startProxy(t, yaml, "rd")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }
	sub := respDial(t, addr)
	// A small receive buffer: the client's kernel takes little.
	if tc, ok := sub.nc.(interface{ SetReadBuffer(int) error }); ok {
		tc.SetReadBuffer(4 << 10)
	}
	if got := sub.do("SUBSCRIBE", "firehose"); got != subReply("subscribe", "firehose", 1) {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	pub := directRedis(t, servers[0].Addr, "", 0)
	payload := strings.Repeat("x", 64<<10)
	start := time.Now()
	// 32 MiB published, never read: the proxy must let go of the client
	// rather than hold it all.
	for i := 0; i < 512 && stat("subscribers_dropped") == 0; i++ {
		pub.do("PUBLISH", "firehose", payload)
	}
	t.Logf("published for %v", time.Since(start))
	waitFor(t, 10*time.Second, "slow subscriber dropped", func() bool {
		return stat("subscribers_dropped") == 1 && stat("dedicated_connections") == 0 && stat("subscribed_clients") == 0
	})
	t.Logf("dropped %v after the start", time.Since(start))
	// What the client reads is whole messages, then the end.
	sub.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n := 0
	for {
		r, err := readRESP(sub.r)
		if err != nil {
			break
		}
		if r != message("firehose", payload) {
			t.Fatalf("message %d: %d bytes, not a whole message", n, len(r))
		}
		n++
	}
	if n >= 512 {
		t.Fatalf("the client read all %d messages: it was never dropped", n)
	}
	t.Logf("the slow client read %d messages of 64 KiB before the end, %v after the start", n, time.Since(start))
}

func TestRedisPubSubServerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }
	doomed := keysOn(where, servers[0].Addr, "d", 1)[0]
	safe := keysOn(where, servers[1].Addr, "s", 1)[0]

	victim, bystander, other := respDial(t, addr), respDial(t, addr), respDial(t, addr)
	victim.send(multibulk("SUBSCRIBE", doomed, safe))
	victim.readN(2)
	if got := bystander.do("SUBSCRIBE", safe); got != subReply("subscribe", safe, 1) {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	start := time.Now()
	syscall.Kill(servers[0].Pid(), syscall.SIGKILL)
	// The victim gets the error, then its connection closes.
	got := victim.reply()
	if !strings.HasPrefix(got, "-ERR pub/sub connection to server "+servers[0].Addr+" lost") {
		t.Fatalf("victim after its server died: %q", got)
	}
	victim.expectClosed()
	t.Logf("victim told and closed %v after the kill", time.Since(start))
	if time.Since(start) > 2*time.Second {
		t.Errorf("victim closed after %v", time.Since(start))
	}
	waitFor(t, 2*time.Second, "the victim's connections given back", func() bool {
		return stat("dedicated_connections") == 1 && stat("subscribed_clients") == 1 && stat("subscribers_dropped") == 1
	})
	// The bystander, subscribed on a live server, hears its messages
	// and nothing else.
	if got := other.do("PUBLISH", safe, "still here"); got != ":1\r\n" {
		t.Fatalf("PUBLISH %s: %q (the victim's subscription must be gone)", safe, got)
	}
	if got, want := bystander.reply(), message(safe, "still here"); got != want {
		t.Fatalf("bystander: %q, want %q", got, want)
	}
	if got := bystander.do("PING"); got != "*2\r\n"+bulk("pong")+bulk("") {
		t.Fatalf("bystander PING: %q", got)
	}
	// A new subscriber on the dead server's channel is refused, not hung.
	late := respDial(t, addr)
	if got := late.do("SUBSCRIBE", doomed); !strings.HasPrefix(got, "-ERR") {
		t.Fatalf("SUBSCRIBE on the dead server: %q", got)
	}
	late.expectClosed()
}
