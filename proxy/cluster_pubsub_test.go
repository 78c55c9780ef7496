package proxy_test

import (
	"strings"
	"testing"
	"time"

	"shardproxy/cluster"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// Pub/sub through a redis_cluster pool (part of TestCluster): channels
// anywhere (the cluster bus carries every PUBLISH to every node), one
// node for patterns (no message twice), shard channels on their slot's
// master.
func testClusterPubSub(t *testing.T, rc *testserver.Cluster, srv *proxy.Server, addr string) {
	stat := func(name string) int64 { return routerStat(t, srv, "rc", name) }
	owner := func(key string) string {
		m := clusterShards(t, rc.Addrs()[0])
		return m.Shards[m.Owner(cluster.Slot([]byte(key)))].Master.Addr
	}
	masters := make([]string, len(rc.Masters))
	for i, m := range rc.Masters {
		masters[i] = m.Addr
	}

	t.Run("subscribe, publish on any node", func(t *testing.T) {
		sub, pub := respDial(t, addr), respDial(t, addr)
		if got, want := sub.do("SUBSCRIBE", "news"), subReply("subscribe", "news", 1); got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}
		if got := pub.do("PUBLISH", "news", "via proxy"); got != ":1\r\n" {
			t.Fatalf("PUBLISH through the proxy: %q", got)
		}
		if got, want := sub.reply(), message("news", "via proxy"); got != want {
			t.Fatalf("message: %q, want %q", got, want)
		}
		// A PUBLISH on every node, the replicas too, reaches it once.
		for _, n := range rc.Addrs() {
			direct := directRedis(t, n, "", 0)
			direct.do("PUBLISH", "news", n)
			if got, want := sub.reply(), message("news", n); got != want {
				t.Fatalf("PUBLISH on %s: %q, want %q", n, got, want)
			}
		}
		if got := sub.do("PING"); got != "*2\r\n"+bulk("pong")+bulk("") {
			t.Fatalf("PING: %q (a message twice?)", got)
		}
	})

	t.Run("psubscribe on one node", func(t *testing.T) {
		sub := respDial(t, addr)
		if got, want := sub.do("PSUBSCRIBE", "n*"), subReply("psubscribe", "n*", 1); got != want {
			t.Fatalf("PSUBSCRIBE: %q, want %q", got, want)
		}
		if got := stat("dedicated_connections"); got != 1 {
			t.Errorf("dedicated_connections %d, want 1: patterns on one node", got)
		}
		for _, m := range masters {
			directRedis(t, m, "", 0).do("PUBLISH", "n1", m)
			if got, want := sub.reply(), pmessage("n*", "n1", m); got != want {
				t.Fatalf("PUBLISH on %s: %q, want %q", m, got, want)
			}
		}
		if got := sub.do("PING"); got != "*2\r\n"+bulk("pong")+bulk("") {
			t.Fatalf("PING: %q (a message twice?)", got)
		}
		if got := respDial(t, addr).do("PUBSUB", "NUMPAT"); got != ":1\r\n" {
			t.Errorf("PUBSUB NUMPAT: %q, want :1", got)
		}
	})

	t.Run("ssubscribe on the slot's master", func(t *testing.T) {
		sub, pub := respDial(t, addr), respDial(t, addr)
		sub.send(multibulk("SSUBSCRIBE", "{sh}a", "{sh}b"))
		if got, want := sub.readN(2), subReply("ssubscribe", "{sh}a", 1)+subReply("ssubscribe", "{sh}b", 2); got != want {
			t.Fatalf("SSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := pubsubShardNumsub(t, owner("{sh}a"), "{sh}a"), "*2\r\n"+bulk("{sh}a")+":1\r\n"; got != want {
			t.Errorf("SHARDNUMSUB on the slot's master: %q, want %q", got, want)
		}
		if got := pub.do("SPUBLISH", "{sh}b", "hello"); got != ":1\r\n" {
			t.Fatalf("SPUBLISH: %q", got)
		}
		if got, want := sub.reply(), "*3\r\n"+bulk("smessage")+bulk("{sh}b")+bulk("hello"); got != want {
			t.Fatalf("smessage: %q, want %q", got, want)
		}
		want := "*4\r\n" + bulk("{sh}a") + ":1\r\n" + bulk("zz") + ":0\r\n"
		if got := pub.do("PUBSUB", "SHARDNUMSUB", "{sh}a", "zz"); got != want {
			t.Errorf("PUBSUB SHARDNUMSUB: %q, want %q", got, want)
		}
		if got := pub.do("PUBSUB", "SHARDCHANNELS"); !strings.HasPrefix(got, "*2\r\n") {
			t.Errorf("PUBSUB SHARDCHANNELS: %q, want 2", got)
		}
		if got := respDial(t, addr).do("SSUBSCRIBE", "a", "b"); got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
			t.Errorf("SSUBSCRIBE a b: %q", got)
		}
		if got, want := sub.do("SUNSUBSCRIBE", "{sh}a"), subReply("sunsubscribe", "{sh}a", 1); got != want {
			t.Errorf("SUNSUBSCRIBE: %q, want %q", got, want)
		}
		sub.nc.Close()
		waitFor(t, 2*time.Second, "connections given back", func() bool {
			return stat("dedicated_connections") == 0 && stat("subscribed_clients") == 0
		})
	})
}

// pubsubShardNumsub reads a node's count of subscribers of a shard channel.
func pubsubShardNumsub(t testing.TB, addr, ch string) string {
	t.Helper()
	c := directRedis(t, addr, "", 0)
	defer c.nc.Close()
	return c.do("PUBSUB", "SHARDNUMSUB", ch)
}
