package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterTimeout bounds how long a new cluster may take to agree on its
// slot map.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of redis-server nodes on loopback ports.
type Cluster struct {
	// Masters[i] serves the i-th of len(Masters) equal, consecutive slot
	// ranges (the last one takes the remainder).
	Masters []*Server
	// Replicas[j] replicates Masters[j % len(Masters)].
	Replicas []*Server

	busPort map[*Server]int // each node's --cluster-port
}

// StartRedisCluster starts masters redis-server nodes in cluster mode (each
// with its own free cluster bus port, via --cluster-port) plus replicas
// replicas of each master, spreads the slots evenly over the masters, joins
// the nodes, and returns once every node reports cluster_state:ok and knows
// every other node, and every replica has synced with its master. args go
// to every node. The nodes are stopped when the test ends; a restarted node
// rejoins from its nodes.conf.
func StartRedisCluster(t testing.TB, masters, replicas int, args ...string) *Cluster {
	t.Helper()
	if masters < 1 || replicas < 0 {
		t.Fatalf("testserver: StartRedisCluster(%d masters, %d replicas): need at least one master", masters, replicas)
	}
	c := &Cluster{busPort: make(map[*Server]int)}
	node := func() *Server {
		t.Helper()
		bus := FreePort(t)
		argv := []string{
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "2000",
		}
		s := StartRedis(t, append(argv, args...)...)
		c.busPort[s] = bus
		return s
	}
	for range masters {
		c.Masters = append(c.Masters, node())
	}
	for range masters * replicas {
		c.Replicas = append(c.Replicas, node())
	}
	if err := c.form(); err != nil {
		t.Fatalf("testserver: form redis cluster of %v: %v", c.Addrs(), err)
	}
	return c
}

// Addrs returns the address of every node, masters first.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, s := range c.nodes() {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

func (c *Cluster) nodes() []*Server { return slices.Concat(c.Masters, c.Replicas) }

// form assigns slots, introduces every node to the first master, attaches
// the replicas and waits until all nodes agree that the cluster is ok.
func (c *Cluster) form() error {
	per := clusterSlots / len(c.Masters)
	for i, m := range c.Masters {
		first, last := i*per, (i+1)*per-1
		if i == len(c.Masters)-1 {
			last = clusterSlots - 1
		}
		if _, err := RedisDo(m.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			return fmt.Errorf("%s: %w", m.Addr, err)
		}
	}
	seed := c.Masters[0]
	for _, s := range c.nodes()[1:] {
		_, err := RedisDo(s.Addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(seed.Port), strconv.Itoa(c.busPort[seed]))
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr, err)
		}
	}
	deadline := time.Now().Add(clusterTimeout)
	for j, r := range c.Replicas {
		if err := c.attach(r, c.Masters[j%len(c.Masters)], deadline); err != nil {
			return err
		}
	}
	if err := c.waitOK(deadline); err != nil {
		return err
	}
	return c.waitSynced(deadline)
}

// waitSynced polls every replica until its link to its master is up: a
// replica that never finished its first sync refuses to fail over (its
// data counts as too old), so a test that kills a master right after
// StartRedisCluster would wait for a failover that never comes.
func (c *Cluster) waitSynced(deadline time.Time) error {
	for _, r := range c.Replicas {
		for {
			info, err := RedisDo(r.Addr, "INFO", "replication")
			if err == nil && strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %s not synced with its master within %v: %q %v", r.Addr, clusterTimeout, info, err)
			}
			time.Sleep(pollInterval)
		}
	}
	return nil
}

// attach makes r a replica of m, retrying while r has not yet heard of m.
func (c *Cluster) attach(r, m *Server, deadline time.Time) error {
	id, err := RedisDo(m.Addr, "CLUSTER", "MYID")
	if err != nil {
		return fmt.Errorf("%s: %w", m.Addr, err)
	}
	for {
		_, err := RedisDo(r.Addr, "CLUSTER", "REPLICATE", id)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: replicate %s: %w", r.Addr, m.Addr, err)
		}
		time.Sleep(pollInterval)
	}
}

// waitOK polls every node until each reports cluster_state:ok, all slots ok
// and every node known.
func (c *Cluster) waitOK(deadline time.Time) error {
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    strconv.Itoa(clusterSlots),
		"cluster_known_nodes": strconv.Itoa(len(c.nodes())),
	}
	for _, s := range c.nodes() {
		for {
			err := clusterInfoHas(s.Addr, want)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready within %v: %w", s.Addr, clusterTimeout, err)
			}
			time.Sleep(pollInterval)
		}
	}
	return nil
}

// clusterInfoHas checks CLUSTER INFO on addr for the wanted fields.
func clusterInfoHas(addr string, want map[string]string) error {
	info, err := RedisDo(addr, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	got := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s is %q, want %q", k, got[k], v)
		}
	}
	return nil
}

// RedisDo sends one command to addr and returns a simple, integer or bulk
// string reply; an error reply becomes an error. It is just enough RESP to
// set up a cluster.
func RedisDo(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * probeTimeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unsupported reply %q", line)
}
