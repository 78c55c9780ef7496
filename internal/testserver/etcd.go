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
	// PKI, for a cluster StartEtcdTLS started, holds the CA that signed
	// the members' server certificates and a client certificate they
	// accept; nil for a cluster that serves its clients in plain text.
	PKI *PKI
}

// StartEtcd starts an etcd cluster of n members (n >= 1) and returns once
// every member reports itself healthy (which needs a leader). Each member
// has a client and a peer port of its own and a data directory under the
// test's temporary directory, kept across Stop and Restart, so a restarted
// member rejoins with its data. The members are stopped when the test ends.
func StartEtcd(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	return startEtcd(t, n, nil)
}

// StartEtcdTLS starts a cluster as StartEtcd does whose members serve
// their clients over TLS only, with a server certificate of a new PKI
// (c.PKI), and accept only clients that present a certificate that PKI's
// CA signed (etcd's --client-cert-auth): c.PKI.CA, c.PKI.ClientCert and
// c.PKI.ClientKey are what a client needs. The peers talk plain HTTP among
// themselves.
func StartEtcdTLS(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	return startEtcd(t, n, NewPKI(t))
}

// startEtcd starts n members, serving clients over TLS with pki's server
// certificate if pki is not nil.
func startEtcd(t testing.TB, n int, pki *PKI) *EtcdCluster {
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
	c := &EtcdCluster{PKI: pki}
	for i := range n {
		name := "m" + strconv.Itoa(i)
		cu := c.scheme() + "://" + loopback(client[i])
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
		if pki != nil {
			args = append(args, "--cert-file", pki.ServerCert, "--key-file", pki.ServerKey,
				"--trusted-ca-file", pki.CA, "--client-cert-auth")
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

// scheme is the members' client URLs' scheme.
func (c *EtcdCluster) scheme() string {
	if c.PKI != nil {
		return "https"
	}
	return "http"
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
			err := c.healthy(s.Addr)
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

// healthy asks one member's /health endpoint, over TLS with the client
// certificate for a cluster that serves its clients so.
func (c *EtcdCluster) healthy(addr string) error {
	hc := http.Client{Timeout: probeTimeout}
	if c.PKI != nil {
		hc.Transport = &http.Transport{TLSClientConfig: c.PKI.ClientTLS(true)}
		defer hc.CloseIdleConnections()
	}
	resp, err := hc.Get(c.scheme() + "://" + addr + "/health")
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
