package proxy_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/cluster"
	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// TestClusterPubSubRESP3 runs pub/sub through a real 3x2 Redis Cluster:
// a RESP3 client's pushes from publishers on every node, and a shard
// channel whose slot moves to another master (CLUSTER SETSLOT
// IMPORTING/MIGRATING, SETSLOT NODE on every master): the old owner
// sends an unsolicited sunsubscribe, which the client gets, with its
// own count, and the channel is no longer counted.
func TestClusterPubSubRESP3(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	rc := testserver.StartRedisCluster(t, 3, 1)
	cfg, err := config.Parse([]byte(clusterYAML("rc", rc.Addrs()[:1], "  timeout: 1000\n  cluster_refresh: 200\n")), "cluster.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	addr := srv.Addr("rc").String()
	// The pool serves before its first slot map: wait for it, or the
	// first SUBSCRIBE may get -CLUSTERDOWN.
	probe := respDial(t, addr)
	for deadline := time.Now().Add(10 * time.Second); strings.HasPrefix(probe.do("GET", "probe"), "-CLUSTERDOWN"); {
		if time.Now().After(deadline) {
			t.Fatal("no slot map within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stat := func(name string) int64 { return routerStat(t, srv, "rc", name) }
	owner := func(key string) string {
		m := clusterShards(t, rc.Addrs()[0])
		return m.Shards[m.Owner(cluster.Slot([]byte(key)))].Master.Addr
	}

	t.Run("pushes from every node", func(t *testing.T) {
		sub, pub := respDial(t, addr), respDial(t, addr)
		hello3(t, sub)
		if got, want := sub.do("SUBSCRIBE", "news"), subReply3("subscribe", "news", 1); got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("PSUBSCRIBE", "x*"), subReply3("psubscribe", "x*", 2); got != want {
			t.Fatalf("PSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("SSUBSCRIBE", "{sh}a"), subReply3("ssubscribe", "{sh}a", 1); got != want {
			t.Fatalf("SSUBSCRIBE: %q, want %q", got, want)
		}
		// A direct RESP3 subscriber of the channel's own node.
		direct := directRedis(t, owner("news"), "", 0)
		serverHello3(t, direct)
		direct.do("SUBSCRIBE", "news")
		for _, n := range rc.Addrs() { // masters and replicas
			d := directRedis(t, n, "", 0)
			d.do("PUBLISH", "news", "from "+n)
			own := direct.reply()
			if own != push3(message("news", "from "+n)) {
				t.Fatalf("direct subscriber: %q", own)
			}
			if got := sub.reply(); got != own {
				t.Fatalf("PUBLISH on %s: %q, want the server's own %q", n, got, own)
			}
			d.do("PUBLISH", "xy", n)
			if got, want := sub.reply(), push3(pmessage("x*", "xy", n)); got != want {
				t.Fatalf("PUBLISH xy on %s: %q, want %q", n, got, want)
			}
			d.nc.Close()
		}
		if got := pub.do("SPUBLISH", "{sh}a", "s"); got != ":1\r\n" {
			t.Fatalf("SPUBLISH: %q", got)
		}
		if got, want := sub.reply(), ">3\r\n"+bulk("smessage")+bulk("{sh}a")+bulk("s"); got != want {
			t.Fatalf("smessage: %q, want %q", got, want)
		}
		pub.do("HSET", "{sh}h", "f", "v")
		if got, want := sub.do("HGETALL", "{sh}h"), "%1\r\n"+bulk("f")+bulk("v"); got != want {
			t.Errorf("HGETALL while subscribed: %q, want %q", got, want)
		}
		if got := sub.do("GET", "nokey"); got != "_\r\n" {
			t.Errorf("GET while subscribed: %q", got)
		}
		sub.nc.Close()
		waitFor(t, 5*time.Second, "gauges back to 0", func() bool {
			return stat("subscriptions") == 0 && stat("subscribed_clients") == 0 && stat("dedicated_connections") == 0
		})
	})

	t.Run("slot moved", func(t *testing.T) {
		const a, b = "{m}a", "{m}b"
		slot := cluster.Slot([]byte(a))
		from := owner(a)
		to := rc.Masters[0].Addr
		if to == from {
			to = rc.Masters[1].Addr
		}
		id := func(addr string) string {
			r := directRedis(t, addr, "", 0).do("CLUSTER", "MYID")
			return r[strings.Index(r, "\n")+1 : len(r)-2]
		}
		fromID, toID := id(from), id(to)

		sub2, sub3, pub := respDial(t, addr), respDial(t, addr), respDial(t, addr)
		sub2.send(multibulk("SSUBSCRIBE", a, b))
		if got, want := sub2.readN(2), subReply("ssubscribe", a, 1)+subReply("ssubscribe", b, 2); got != want {
			t.Fatalf("SSUBSCRIBE: %q, want %q", got, want)
		}
		hello3(t, sub3)
		sub3.do("SUBSCRIBE", "plain")
		if got, want := sub3.do("SSUBSCRIBE", a), subReply3("ssubscribe", a, 1); got != want {
			t.Fatalf("SSUBSCRIBE: %q, want %q", got, want)
		}
		if got := stat("subscriptions"); got != 4 {
			t.Fatalf("subscriptions %d, want 4", got)
		}

		s := strconv.Itoa(slot)
		admin := func(addr string, args ...string) {
			t.Helper()
			if got := directRedis(t, addr, "", 0).do(args...); got != "+OK\r\n" {
				t.Fatalf("%v on %s: %q", args, addr, got)
			}
		}
		admin(to, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID)
		admin(from, "CLUSTER", "SETSLOT", s, "MIGRATING", toID)
		for _, m := range rc.Masters {
			admin(m.Addr, "CLUSTER", "SETSLOT", s, "NODE", toID)
		}
		// The old owner unsubscribes both (in its own order); the
		// client's count goes down to 0.
		got := []string{sub2.reply(), sub2.reply()}
		names := []string{}
		for i, r := range got {
			for _, n := range []string{a, b} {
				if r == subReply("sunsubscribe", n, 1-i) {
					names = append(names, n)
				}
			}
		}
		if sort.Strings(names); fmt.Sprint(names) != fmt.Sprint([]string{a, b}) {
			t.Fatalf("after the move, RESP2 client: %q", got)
		}
		if got, want := sub3.reply(), subReply3("sunsubscribe", a, 0); got != want {
			t.Fatalf("after the move, RESP3 client: %q, want %q", got, want)
		}
		// The RESP2 client holds nothing: out of subscribed mode.
		if got := sub2.do("PING"); got != "+PONG\r\n" {
			t.Errorf("PING after the last shard channel went: %q", got)
		}
		waitFor(t, 5*time.Second, "the moved channels no longer counted", func() bool {
			return stat("subscriptions") == 1 && stat("subscribed_clients") == 1 && stat("dedicated_connections") == 1
		})
		// The RESP3 client keeps its channel.
		pub.do("PUBLISH", "plain", "p")
		if got, want := sub3.reply(), push3(message("plain", "p")); got != want {
			t.Fatalf("message on the channel left: %q, want %q", got, want)
		}
		// Once the proxy knows the new owner, a new SSUBSCRIBE goes there.
		waitFor(t, 5*time.Second, "the proxy's slot map", func() bool {
			c := respDial(t, addr)
			defer c.nc.Close()
			ok := c.do("SSUBSCRIBE", a) == subReply("ssubscribe", a, 1)
			// Leave the channel before closing, so that the server no
			// longer counts this probe when the SPUBLISH below asks: a
			// close reaches the server later than the next command may.
			c.do("SUNSUBSCRIBE", a)
			return ok
		})
		if got, want := sub2.do("SSUBSCRIBE", a), subReply("ssubscribe", a, 1); got != want {
			t.Fatalf("SSUBSCRIBE after the move: %q, want %q", got, want)
		}
		if got := pub.do("SPUBLISH", a, "moved"); got != ":1\r\n" {
			t.Fatalf("SPUBLISH after the move: %q", got)
		}
		if got, want := sub2.reply(), "*3\r\n"+bulk("smessage")+bulk(a)+bulk("moved"); got != want {
			t.Fatalf("smessage after the move: %q, want %q", got, want)
		}
		sub2.nc.Close()
		sub3.nc.Close()
		waitFor(t, 5*time.Second, "gauges back to 0", func() bool {
			return stat("subscriptions") == 0 && stat("subscribed_clients") == 0 && stat("dedicated_connections") == 0
		})
	})
}
