package admin_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// respConn is a raw RESP client of the proxy.
type respConn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialRESP(t testing.TB, addr string) *respConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &respConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// do sends one command and returns its reply; it fails the test on a
// transport error, so only the test's goroutine may call it.
func (c *respConn) do(args ...string) string {
	c.t.Helper()
	r, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("%q: %v", args, err)
	}
	return r
}

// try sends one command and returns its reply (simple, error, integer or
// bulk; an array's header and elements, for MGET).
func (c *respConn) try(args ...string) (string, error) {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.nc, b.String()); err != nil {
		return "", err
	}
	head, err := readRESP(c.r)
	if err != nil || head[0] != '*' {
		return head, err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	for range n {
		el, err := readRESP(c.r)
		if err != nil {
			return "", err
		}
		head += el
	}
	return head, nil
}

// redis runs a command on a node directly and fails the test on an error.
func redis(t testing.TB, addr string, args ...string) string {
	t.Helper()
	r, err := testserver.RedisDo(addr, args...)
	if err != nil {
		t.Fatalf("%s %q: %v", addr, args, err)
	}
	return r
}

// TestClusterCounters moves one slot from a master to another by hand
// (CLUSTER SETSLOT IMPORTING and MIGRATING, MIGRATE, SETSLOT NODE), as
// redis-cli --cluster reshard does, while a client works through the
// proxy; requests for the slot meet an ASK, a TRYAGAIN and a MOVED. The
// counters move on /metrics, on the stats port (per node) and in INFO's
// Proxy section; a second pool whose seed does not answer counts refresh
// failures.
func TestClusterCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	cl := testserver.StartRedisCluster(t, 3, 0)
	var yaml strings.Builder
	yaml.WriteString("rc:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  timeout: 2000\n  cluster_refresh: 60000\n  servers:\n")
	for _, a := range cl.Addrs() {
		fmt.Fprintf(&yaml, "    - %s:1\n", a)
	}
	fmt.Fprintf(&yaml, "dead:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  cluster_refresh: 100\n  servers:\n    - 127.0.0.1:%d:1\n",
		testserver.FreePort(t))
	srv := startProxy(t, writeConfig(t, filepath.Join(t.TempDir(), "conf.yml"), yaml.String()))
	web := startHTTP(t, srv)
	stats := startStats(t, srv, 20*time.Millisecond)
	addr := srv.Addr("rc").String()

	// The slot of tag {m}, its owner (testserver gives master i the i-th
	// third of the slots) and another master to move it to.
	slot := redis(t, cl.Masters[0].Addr, "CLUSTER", "KEYSLOT", "{m}")
	n, _ := strconv.Atoi(slot)
	from := cl.Masters[min(n/(16384/3), 2)]
	to := cl.Masters[0]
	if to == from {
		to = cl.Masters[1]
	}
	fromID, toID := redis(t, from.Addr, "CLUSTER", "MYID"), redis(t, to.Addr, "CLUSTER", "MYID")

	c := dialRESP(t, addr)
	for _, k := range []string{"{m}a", "{m}b"} {
		if r := c.do("SET", k, "v-"+k); r != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, r)
		}
	}
	before := families(t, httpBody(t, "http://"+web.Addr().String()+"/metrics"))

	// A client works on other keys all along.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops, errs atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := dialRESP(t, addr)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := "w" + strconv.Itoa(i%500)
			set, err1 := w.try("SET", k, "x")
			get, err2 := w.try("GET", k)
			if err1 != nil || err2 != nil {
				errs.Add(1)
				return
			}
			if set != "+OK\r\n" || get != "$1\r\nx\r\n" {
				errs.Add(1)
			}
			ops.Add(2)
		}
	}()

	redis(t, to.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	redis(t, from.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	migrate := func(key string) {
		redis(t, from.Addr, "MIGRATE", "127.0.0.1", strconv.Itoa(to.Port), "", "0", "5000", "KEYS", key)
	}
	migrate("{m}a")
	// {m}a has moved: its owner answers ASK.
	if r := c.do("GET", "{m}a"); r != "$6\r\nv-{m}a\r\n" {
		t.Fatalf("GET {m}a during the migration: %q", r)
	}
	// Half the slot's keys moved: a two-key request gets TRYAGAIN, which
	// the proxy retries until the slot has moved, then follows the MOVED.
	got := make(chan string, 1)
	go func() {
		r, err := c.try("MGET", "{m}a", "{m}b")
		if err != nil {
			r = err.Error()
		}
		got <- r
	}()
	time.Sleep(100 * time.Millisecond)
	migrate("{m}b")
	for _, m := range cl.Masters {
		redis(t, m.Addr, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	}
	if r := <-got; r != "*2\r\n$6\r\nv-{m}a\r\n$6\r\nv-{m}b\r\n" {
		t.Fatalf("MGET across the migration: %q", r)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if errs.Load() != 0 || ops.Load() == 0 {
		t.Errorf("the client on other slots: %d requests, %d failed", ops.Load(), errs.Load())
	}

	// /metrics: the pool's counters and the node's.
	after := families(t, httpBody(t, "http://"+web.Addr().String()+"/metrics"))
	grew := func(name string, labels ...string) {
		t.Helper()
		b, _ := value(before, name, labels...)
		a, ok := value(after, name, labels...)
		if !ok || a <= b {
			t.Errorf("%s%q: %v before, %v after (present %t); want it to grow", name, labels, b, a, ok)
		}
	}
	for _, kind := range []string{"moved", "ask", "tryagain"} {
		grew("shardproxy_router_cluster_"+kind+"_total", "pool", "rc")
		grew("shardproxy_backend_redirects_total", "pool", "rc", "backend", from.Addr, "kind", kind)
	}
	grew("shardproxy_router_cluster_refreshes_total", "pool", "rc")
	if v, ok := value(after, "shardproxy_router_cluster_slot_map_age_seconds", "pool", "rc"); !ok || v < 0 || v > 5 {
		t.Errorf("rc's slot map age %v (present %t); want 0 to 5 seconds", v, ok)
	}
	eventually(t, "the dead pool counts refresh failures", func() bool {
		fams := families(t, httpBody(t, "http://"+web.Addr().String()+"/metrics"))
		v, _ := value(fams, "shardproxy_router_cluster_refresh_failures_total", "pool", "dead")
		age, _ := value(fams, "shardproxy_router_cluster_slot_map_age_seconds", "pool", "dead")
		return v >= 2 && age == -1
	})

	// The stats port: the node that answered ASK, TRYAGAIN and MOVED
	// counts them; every node repeats the pool's refreshes and map age.
	eventually(t, "the stats port counts the redirects", func() bool {
		doc := statsDoc(t, readStats(t, stats.Addr().String()))
		pool, _ := doc["rc"].(map[string]any)
		node, _ := pool[from.Addr].(map[string]any)
		other, _ := pool[to.Addr].(map[string]any)
		num := func(o map[string]any, k string) float64 { v, _ := o[k].(float64); return v }
		return num(node, "moved") >= 1 && num(node, "ask") >= 1 && num(node, "tryagain") >= 1 &&
			num(other, "moved") == 0 && num(node, "slot_map_refreshes") >= 2 &&
			num(other, "slot_map_refreshes") == num(node, "slot_map_refreshes") &&
			num(node, "slot_map_refresh_failures") == 0 && num(node, "slot_map_age") >= 0
	})

	// INFO's Proxy section, merged after the servers'.
	info := c.do("INFO")
	for _, line := range []string{"cluster_moved", "cluster_ask", "cluster_tryagain", "cluster_refreshes"} {
		i := strings.Index(info, "\r\n"+line+":")
		if i < 0 {
			t.Errorf("INFO lacks %s:\n%s", line, info)
			continue
		}
		v := info[i+len(line)+3:]
		v = v[:strings.Index(v, "\r\n")]
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			t.Errorf("INFO's %s is %q; want 1 or more", line, v)
		}
	}
	if !strings.Contains(info, "\r\ncluster_slot_map_age_seconds:") || !strings.Contains(info, "# Proxy\r\n") {
		t.Errorf("INFO lacks the slot map age or the Proxy section:\n%s", info)
	}
	dead := dialRESP(t, srv.Addr("dead").String()).do("INFO", "proxy")
	if !strings.Contains(dead, "\r\ncluster_refresh_failures:") || strings.Contains(dead, "\r\ncluster_refresh_failures:0\r\n") ||
		!strings.Contains(dead, "\r\ncluster_slot_map_age_seconds:-1\r\n") {
		t.Errorf("INFO proxy of a pool whose seed is down:\n%s", dead)
	}
}
