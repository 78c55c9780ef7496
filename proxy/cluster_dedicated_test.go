package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/cluster"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// Blocking commands and transactions through a redis_cluster pool (part
// of TestCluster): a blocked client woken by a push, keys in two slots, a
// transaction in one slot, one naming another slot, one whose slot moves
// before EXEC.
func testClusterDedicated(t *testing.T, rc *testserver.Cluster, srv *proxy.Server, addr string) {
	stat := func(name string) int64 { return routerStat(t, srv, "rc", name) }
	owner := func(key string) string {
		m := clusterShards(t, rc.Addrs()[0])
		return m.Shards[m.Owner(cluster.Slot([]byte(key)))].Master.Addr
	}

	t.Run("BLPOP woken by LPUSH", func(t *testing.T) {
		waiter, pusher := mustDial(t, addr), mustDial(t, addr)
		if err := waiter.send([]string{"BLPOP", "{q}jobs", "0"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "client blocked on the node", func() bool {
			return infoInt(t, owner("{q}jobs"), "blocked_clients") == 1
		})
		if got := mustDo(t, pusher, "LPUSH", "{q}jobs", "j1"); got != ":1\r\n" {
			t.Fatalf("LPUSH: %q", got)
		}
		if got, err := waiter.read(); err != nil || got != "*2\r\n"+bulk("{q}jobs")+bulk("j1") {
			t.Fatalf("BLPOP: %q %v", got, err)
		}
		// Keys in two slots, as a cluster node refuses them.
		if got := mustDo(t, pusher, "BLPOP", "a", "b", "0"); got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
			t.Fatalf("BLPOP a b: %q", got)
		}
		// A timeout longer than the pool's (1000ms).
		start := time.Now()
		if got := mustDo(t, pusher, "BRPOP", "{q}none", "1.3"); got != "*-1\r\n" || time.Since(start) < 1200*time.Millisecond {
			t.Fatalf("BRPOP 1.3: %q after %v", got, time.Since(start))
		}
	})

	t.Run("client leaves while blocked", func(t *testing.T) {
		node := owner("{q}gone")
		c := mustDial(t, addr)
		c.send([]string{"BLPOP", "{q}gone", "0"})
		waitFor(t, 5*time.Second, "client blocked", func() bool { return infoInt(t, node, "blocked_clients") == 1 })
		c.close()
		waitFor(t, 2*time.Second, "blocked client released", func() bool {
			return infoInt(t, node, "blocked_clients") == 0 && stat("dedicated_connections") == 0
		})
	})

	t.Run("transaction in one slot", func(t *testing.T) {
		c, other := mustDial(t, addr), mustDial(t, addr)
		mustDo(t, c, "SET", "{tx}a", "1")
		mustDo(t, c, "WATCH", "{tx}a")
		mustDo(t, other, "SET", "{tx}a", "2")
		mustDo(t, c, "MULTI")
		mustDo(t, c, "SET", "{tx}b", "1")
		if got := mustDo(t, c, "EXEC"); got != "*-1\r\n" {
			t.Fatalf("EXEC after a concurrent write: %q", got)
		}
		c.send([]string{"MULTI"}, []string{"INCR", "{tx}a"}, []string{"GET", "{tx}a"}, []string{"EXEC"})
		var got []string
		for range 4 {
			r, err := c.read()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		if want := []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n:3\r\n" + bulk("3")}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("pipelined transaction: %q, want %q", got, want)
		}
	})

	t.Run("transaction naming another slot", func(t *testing.T) {
		c := mustDial(t, addr)
		mustDo(t, c, "MULTI")
		mustDo(t, c, "SET", "{tx}c", "1")
		if got := mustDo(t, c, "SET", "{other}c", "1"); got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
			t.Fatalf("a key in another slot: %q", got)
		}
		if got := mustDo(t, c, "EXEC"); got != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
			t.Fatalf("EXEC: %q", got)
		}
		if got := mustDo(t, c, "EXISTS", "{tx}c"); got != ":0\r\n" {
			t.Fatalf("{tx}c set by an aborted transaction: %q", got)
		}
	})

	t.Run("slot moves before EXEC", func(t *testing.T) {
		key := "{mv}k"
		slot := strconv.Itoa(cluster.Slot([]byte(key)))
		src := owner(key)
		var dst string
		for _, m := range rc.Masters {
			if m.Addr != src {
				dst = m.Addr
				break
			}
		}
		id := func(a string) string {
			r, err := testserver.RedisDo(a, "CLUSTER", "MYID")
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		move := func(from, to string) {
			t.Helper()
			fromID, toID := id(from), id(to)
			for _, step := range []struct{ node, state, id string }{
				{to, "IMPORTING", fromID}, {from, "MIGRATING", toID}, {to, "NODE", toID}, {from, "NODE", toID},
			} {
				if r, err := testserver.RedisDo(step.node, "CLUSTER", "SETSLOT", slot, step.state, step.id); err != nil || r != "OK" {
					t.Fatalf("CLUSTER SETSLOT %s %s on %s: %q %v", slot, step.state, step.node, r, err)
				}
			}
			for _, m := range rc.Masters {
				testserver.RedisDo(m.Addr, "CLUSTER", "SETSLOT", slot, "NODE", toID)
			}
		}
		c := mustDial(t, addr)
		mustDo(t, c, "MULTI")
		if got := mustDo(t, c, "SET", key, "1"); got != "+QUEUED\r\n" {
			t.Fatalf("SET: %q", got)
		}
		move(src, dst)
		defer move(dst, src)
		got := mustDo(t, c, "EXEC")
		t.Logf("EXEC after the slot moved: %q", got)
		if !strings.HasPrefix(got, "-MOVED "+slot+" ") && !strings.HasPrefix(got, "-EXECABORT") {
			t.Fatalf("EXEC after the slot moved: %q", got)
		}
		// Nothing was written, and the client goes on through the shared connections.
		waitFor(t, 5*time.Second, "proxy follows the move", func() bool {
			r, err := c.do("EXISTS", key)
			return err == nil && r == ":0\r\n"
		})
	})
}
