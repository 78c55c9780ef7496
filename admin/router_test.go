package admin_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/internal/testserver"
)

// TestRouterStats: a redis_cluster pool's router publishes its counters and
// its nodes, like any router: on /metrics as shardproxy_router_*, on the
// stats port beside the pool's counters, with a server entry per node.
func TestRouterStats(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	cl := testserver.StartRedisCluster(t, 3, 0)
	var yaml strings.Builder
	yaml.WriteString("rc:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  timeout: 2000\n  servers:\n")
	for _, a := range cl.Addrs() {
		fmt.Fprintf(&yaml, "    - %s:1\n", a)
	}
	srv := startProxy(t, writeConfig(t, filepath.Join(t.TempDir(), "conf.yml"), yaml.String()))

	nc, err := net.DialTimeout("tcp", srv.Addr("rc").String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(nc)
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n", len(key), key)
		if l, err := r.ReadString('\n'); err != nil || l != "+OK\r\n" {
			t.Fatalf("SET %s: %q %v", key, l, err)
		}
	}

	web := admin.NewHTTP(srv, admin.HTTPConfig{Logger: testLogger(t)})
	if err := web.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	resp, err := http.Get("http://" + web.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fams := families(t, string(body))
	checks := []struct {
		name string
		want func(float64) bool
		what string
	}{
		{"shardproxy_router_cluster_refreshes_total", atLeast(1), ">= 1"},
		{"shardproxy_router_cluster_moved_total", eq(0), "0"},
		{"shardproxy_router_cluster_slots_covered", eq(16384), "16384"},
		{"shardproxy_router_cluster_masters", eq(3), "3"},
		{"shardproxy_backend_requests_total", atLeast(20), ">= 20 over the nodes"},
	}
	for _, c := range checks {
		if v, ok := value(fams, c.name, "pool", "rc"); !ok || !c.want(v) {
			t.Errorf("%s{pool=rc} = %v (present %t), want %s", c.name, v, ok, c.what)
		}
	}

	stats := admin.NewStats(srv, admin.StatsConfig{Interval: 50 * time.Millisecond, Logger: testLogger(t)})
	if err := stats.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	var pool map[string]any
	eventually(t, "the stats port shows the cluster's counters", func() bool {
		doc := statsDoc(t, readStats(t, stats.Addr().String()))
		pool, _ = doc["rc"].(map[string]any)
		return pool != nil && pool["cluster_slots_covered"] == float64(16384)
	})
	nodes := 0
	for _, a := range cl.Addrs() {
		if _, ok := pool[a].(map[string]any); ok {
			nodes++
		}
	}
	if nodes != 3 {
		t.Errorf("the stats port shows %d of the cluster's 3 nodes as servers: %v", nodes, pool)
	}
}
