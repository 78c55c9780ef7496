package proxy_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// TestClusterViewAlone points go-redis's ClusterClient at one proxy of a
// pool with redis_cluster_view: the proxy is a cluster of one master that
// serves every slot, and the client's keys, hash-tagged multi-key commands
// included, go through it; the pool without the key refuses CLUSTER.
func TestClusterViewAlone(t *testing.T) {
	_, yaml := redisPool(t, 2, "  redis_cluster_view: true\n")
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	slots := c.do("CLUSTER", "SLOTS")
	host, port, _ := strings.Cut(addr, ":")
	if !strings.HasPrefix(slots, fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$%d\r\n%s\r\n:%s\r\n$40\r\n", len(host), host, port)) {
		t.Fatalf("CLUSTER SLOTS: %q", slots)
	}
	if got := c.do("CLUSTER", "KEYSLOT", "foo"); got != ":12182\r\n" {
		t.Errorf("CLUSTER KEYSLOT foo: %q", got)
	}
	if got := c.do("READONLY"); got != "+OK\r\n" {
		t.Errorf("READONLY: %q", got)
	}
	nodes := bulkText(t, c.do("CLUSTER", "NODES"))
	if !strings.Contains(nodes, " "+addr+"@") || !strings.Contains(nodes, "myself,master - 0 0 1 connected 0-16383\n") {
		t.Errorf("CLUSTER NODES: %q", nodes)
	}
	if info := bulkText(t, c.do("CLUSTER", "INFO")); !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_known_nodes:1\r\n") {
		t.Errorf("CLUSTER INFO: %q", info)
	}

	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	defer cc.Close()
	for i := range 50 {
		k := fmt.Sprintf("k%d", i)
		if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if got, err := cc.MGet(ctx, "{u}a", "{u}b").Result(); err != nil || len(got) != 2 {
		t.Fatalf("MGET: %v %v", got, err)
	}
	if got, err := cc.Get(ctx, "k7").Result(); err != nil || got != "7" {
		t.Fatalf("GET k7: %q %v", got, err)
	}
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil || len(shards) != 1 || len(shards[0].Nodes) != 1 || shards[0].Nodes[0].Endpoint != host {
		t.Fatalf("CLUSTER SHARDS: %+v %v", shards, err)
	}

	_, plain := redisPool(t, 1, "")
	_, plainAddr := startProxy(t, plain, "rd")
	if got := respDial(t, plainAddr).do("CLUSTER", "SLOTS"); !strings.Contains(got, "shardproxy is not a Redis Cluster node") {
		t.Errorf("CLUSTER SLOTS without redis_cluster_view: %q", got)
	}
}

// TestClusterViewFleet runs two proxies of one pool that know each other
// as a fleet's members: each serves half the slots in the map; a
// cluster-aware client asking the wrong one is sent MOVED to the other,
// a plain client is served by either; go-redis's ClusterClient spreads
// its keys over both.
func TestClusterViewFleet(t *testing.T) {
	servers, _ := redisPool(t, 2, "")
	yaml := func(listen string) string {
		return fmt.Sprintf("rd:\n  listen: %s\n  redis: true\n  redis_cluster_view: true\n  servers:\n    - %s:1\n    - %s:1\n",
			listen, servers[0].Addr, servers[1].Addr)
	}
	a1, a2 := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	p1, _ := startProxy(t, yaml(a1), "rd")
	p2, _ := startProxy(t, yaml(a2), "rd")
	members := []proxy.FleetMember{{ID: "a", Pools: map[string]string{"rd": a1}}, {ID: "b", Pools: map[string]string{"rd": a2}}}
	p1.SetFleetMembers("a", members)
	p2.SetFleetMembers("b", members)

	// "foo" is slot 12182: the second half, p2's.
	aware := respDial(t, a1)
	aware.do("CLUSTER", "SLOTS")
	if got := aware.do("GET", "foo"); got != "-MOVED 12182 "+a2+"\r\n" {
		t.Errorf("GET foo from the first proxy, cluster-aware: %q", got)
	}
	if got := aware.do("SET", "bar", "1"); got != "+OK\r\n" { // slot 5061: the first's
		t.Errorf("SET bar from the first proxy: %q", got)
	}
	if got := respDial(t, a1).do("SET", "foo", "v"); got != "+OK\r\n" {
		t.Errorf("SET foo from the first proxy, plain client: %q", got)
	}
	// redis-cli -c, a second cluster client: it reads the map the first
	// proxy gives, and, having asked nothing before its GET, is served
	// where it asks (it would follow a MOVED).
	host, port, _ := strings.Cut(a1, ":")
	out, err := exec.Command("redis-cli", "-c", "-h", host, "-p", port, "CLUSTER", "SLOTS").CombinedOutput()
	if err != nil || !strings.Contains(string(out), a2[strings.LastIndex(a2, ":")+1:]) {
		t.Errorf("redis-cli -c CLUSTER SLOTS: %q %v", out, err)
	}
	out, err = exec.Command("redis-cli", "-c", "-h", host, "-p", port, "GET", "foo").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "v" {
		t.Errorf("redis-cli -c GET foo through the first proxy: %q %v", out, err)
	}

	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{a1}})
	defer cc.Close()
	before1, before2 := requestsRead(p1), requestsRead(p2)
	for i := range 200 {
		k := fmt.Sprintf("key%d", i)
		if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if got, err := cc.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s: %d %v", k, got, err)
		}
	}
	n1, n2 := requestsRead(p1)-before1, requestsRead(p2)-before2
	if n1 < 100 || n2 < 100 {
		t.Errorf("requests per proxy: %d and %d, want both about 200", n1, n2)
	}
	t.Logf("400 requests of a ClusterClient: %d to the first proxy, %d to the second", n1, n2)
}
