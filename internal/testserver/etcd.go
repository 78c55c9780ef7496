package testserver

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/proc"
)

// etcdTimeout bounds how long a new etcd cluster may take to elect a
// leader and answer /health on every member.
const etcdTimeout = 30 * time.Second

// EtcdCluster is a cluster of real etcd members (Debian's etcd-server) on
// loopback ports, each with its own data directory.
type EtcdCluster struct {
	// Members are the cluster's members; Members[i].Addr is its client
	// address, "127.0.0.1:PORT".
	Members []*Server
}

// StartEtcd starts an etcd cluster of n members (n >= 1) and returns once
// every member reports itself healthy (which needs a leader). Each member
// has a client and a peer port of its own and a data directory under the
// test's temporary directory, kept across Stop and Restart, so a restarted
// member rejoins with its data. The members are stopped when the test ends.
func StartEtcd(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testserver: StartEtcd(%d): need at least one member", n)
	}
	if testing.Short() {
		t.Skip("testserver: -short: skipping test that needs a real etcd")
	}
	path := lookBinary(t, "etcd")
	dir := t.TempDir()
	client := make([]int, n)
	peer := make([]int, n)
	var initial []string
	for i := range n {
		client[i], peer[i] = FreePort(t), FreePort(t)
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, peer[i]))
	}
	c := &EtcdCluster{}
	for i := range n {
		name := "m" + strconv.Itoa(i)
		cu := "http://" + loopback(client[i])
		pu := "http://" + loopback(peer[i])
		args := []string{
			"--name", name,
			"--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", cu, "--advertise-client-urls", cu,
			"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "shardproxy-test",
			// Small timings so that a killed member's absence shows soon.
			"--heartbeat-interval", "50", "--election-timeout", "500",
			"--logger", "zap", "--log-level", "warn",
		}
		p := proc.New(proc.Config{Name: "etcd " + name, Path: path, Args: args, Addr: loopback(client[i]),
			StopGrace: 0})
		s := &Server{Addr: loopback(client[i]), Port: client[i], t: t, p: p}
		// A member accepts connections before the cluster has a leader, so
		// Start returns at once; health is awaited below for all of them.
		if err := p.Start(); err != nil {
			t.Fatalf("testserver: %v\n%s", err, s.details())
		}
		t.Cleanup(s.cleanup)
		c.Members = append(c.Members, s)
	}
	if err := c.WaitHealthy(etcdTimeout); err != nil {
		t.Fatalf("testserver: etcd cluster %v: %v", c.Endpoints(), err)
	}
	return c
}

// Endpoints returns every member's client address.
func (c *EtcdCluster) Endpoints() []string {
	var eps []string
	for _, s := range c.Members {
		eps = append(eps, s.Addr)
	}
	return eps
}

// WaitHealthy waits until every running member answers its /health with
// "health": "true", which needs a leader and a quorum.
func (c *EtcdCluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range c.Members {
		if s.Pid() == 0 {
			continue
		}
		for {
			err := etcdHealthy(s.Addr)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("member %s: %w", s.Addr, err)
			}
			time.Sleep(pollInterval)
		}
	}
	return nil
}

// etcdHealthy asks one member's /health endpoint.
func etcdHealthy(addr string) error {
	hc := http.Client{Timeout: probeTimeout}
	resp, err := hc.Get("http://" + addr + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("not healthy: %s", strings.TrimSpace(string(body)))
	}
	return nil
}
