package admin_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// TestRouterStats: a redis_cluster pool's router publishes its counters and
// its nodes, like any router: on /metrics as shardproxy_router_* and in
// INFO; the stats port shows its nodes as the pool's servers.
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

	web := startHTTP(t, srv)
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

	// The status page shows which master owns which slots, read from
	// the real cluster's map.
	resp, err = http.Get("http://" + web.Addr().String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Pools []struct {
			Slots []struct {
				Master string
				Count  int
				Ranges []string
			}
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if err != nil || len(status.Pools) != 1 {
		t.Fatalf("/status: %v %+v", err, status)
	}
	owners, covered := map[string]bool{}, 0
	for _, o := range status.Pools[0].Slots {
		owners[o.Master] = true
		covered += o.Count
		if len(o.Ranges) == 0 {
			t.Errorf("master %s owns %d slots in no range", o.Master, o.Count)
		}
	}
	for _, m := range cl.Masters {
		if !owners[m.Addr] {
			t.Errorf("master %s owns no slots on the status page: %+v", m.Addr, status.Pools[0].Slots)
		}
	}
	if covered != 16384 || len(owners) != 3 {
		t.Errorf("status page: %d owners cover %d slots, want 3 and 16384", len(owners), covered)
	}

	// INFO, answered by the proxy, shows the router's counters.
	nc.Write([]byte("*1\r\n$4\r\nINFO\r\n"))
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO: %q %v", head, err)
	}
	var size int
	fmt.Sscanf(head, "$%d", &size)
	info := make([]byte, size+2)
	if _, err := io.ReadFull(r, info); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), "\r\ncluster_slots_covered:16384\r\n") {
		t.Errorf("INFO lacks the cluster's counters:\n%s", info)
	}

	// The stats port keeps twemproxy's shape, which exporters parse: the
	// nodes are the pool's servers, and the pool object has nutcracker's
	// counters only (an unknown number in a pool object breaks them).
	stats := startStats(t, srv, 50*time.Millisecond)
	var pool map[string]any
	eventually(t, "the stats port shows the cluster's nodes", func() bool {
		doc := statsDoc(t, readStats(t, stats.Addr().String()))
		pool, _ = doc["rc"].(map[string]any)
		nodes := 0
		for _, a := range cl.Addrs() {
			if _, ok := pool[a].(map[string]any); ok {
				nodes++
			}
		}
		return nodes == 3
	})
	for k, v := range pool {
		if _, isNum := v.(float64); isNum && !nutcrackerPoolField[k] {
			t.Errorf("the stats port's pool object has a field nutcracker's has not: %q", k)
		}
	}
}

// nutcrackerPoolField are the counters of a pool object in nutcracker's
// stats JSON.
var nutcrackerPoolField = map[string]bool{
	"client_eof": true, "client_err": true, "client_connections": true,
	"server_ejects": true, "forward_error": true, "fragments": true,
}
