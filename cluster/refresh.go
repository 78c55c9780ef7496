package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"shardproxy/codec"
)

// Wire of the topology requests.
var (
	// shardsWire is "CLUSTER SHARDS" (Redis 7.0 and later).
	shardsWire = []byte("*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n")
	// slotsWire is "CLUSTER SLOTS", the fallback.
	slotsWire = []byte("*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n")
)

const (
	// maxTopologyReply bounds a topology reply: a thousand-node cluster's
	// CLUSTER SHARDS is a few hundred KiB.
	maxTopologyReply = 64 << 20
	// maxReasons bounds the per-node reasons a failed refresh reports.
	maxReasons = 4
)

// run is the refresher: the one goroutine that reads slot maps, so
// refreshes are single-flight. It refreshes when asked (at most every
// 100ms, or every second while refreshes fail) and every RefreshInterval,
// and closes retired nodes.
func (c *Cluster) run() {
	defer close(c.done)
	defer c.closeProbe()
	tick := time.NewTicker(c.cfg.RefreshInterval)
	defer tick.Stop()
	reap := time.NewTicker(time.Second)
	defer reap.Stop()
	var last time.Time
	failing := false
	for {
		select {
		case <-c.stop:
			return
		case <-reap.C:
			c.reap()
			continue
		case <-tick.C:
		case <-c.trigger:
			gap := minRefreshGap
			if failing {
				gap = failRefreshGap
			}
			if wait := time.Until(last.Add(gap)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-c.stop:
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
		last = time.Now()
		err := c.refresh()
		c.logRefresh(err, failing)
		failing = err != nil
	}
}

// logRefresh logs a refresh's outcome when it changes: the first failure
// (an error while there is no map: nothing can be served), and recovery.
func (c *Cluster) logRefresh(err error, wasFailing bool) {
	switch {
	case err != nil && !wasFailing && c.tab.Load() == nil:
		c.log.Error("cluster has no slot map", "seeds", strings.Join(c.cfg.Seeds, ","), "err", err)
	case err != nil && !wasFailing:
		c.log.Warn("cluster refresh failed; serving the last slot map", "err", err)
	case err == nil && wasFailing:
		c.log.Info("cluster refresh recovered", "from", c.lastGood)
	}
}

// refresh reads the slot map from the first node that gives one and
// installs it. When none does, requests waiting for a first map are
// answered -CLUSTERDOWN with the reasons.
func (c *Cluster) refresh() error {
	c.mu.Lock()
	c.refreshing, c.moves = true, nil
	c.mu.Unlock()
	var reasons []string
	tried := 0
	for _, addr := range c.candidates() {
		if c.closed.Load() {
			break
		}
		m, err := c.fetch(addr)
		if err == nil {
			c.lastGood = addr
			c.stats.refreshes.Add(1)
			c.install(m, addr)
			return nil
		}
		c.closeProbe()
		if tried++; tried <= maxReasons {
			reasons = append(reasons, addr+": "+err.Error())
		}
	}
	if tried > maxReasons {
		reasons = append(reasons, fmt.Sprintf("and %d more", tried-maxReasons))
	}
	err := errors.New(strings.Join(reasons, "; "))
	c.stats.refreshFailures.Add(1)
	c.mu.Lock()
	c.refreshing, c.moves = false, nil
	c.lastErr = err.Error()
	var parked []*op
	if c.tab.Load() == nil {
		parked, c.parked = c.parked, nil
	}
	c.mu.Unlock()
	for _, o := range parked {
		o.finishDown("shardproxy has no cluster slot map: " + err.Error())
	}
	return err
}

// candidates lists the nodes to ask for the map: the last node that gave
// one, the masters and replicas of the current map, then the seeds; nodes
// the map reports unhealthy go last.
func (c *Cluster) candidates() []string {
	seen := map[string]bool{}
	var good, bad []string
	add := func(addr string, healthy bool) {
		if addr == "" || seen[addr] {
			return
		}
		seen[addr] = true
		if healthy {
			good = append(good, addr)
		} else {
			bad = append(bad, addr)
		}
	}
	var nodes []Node
	if t := c.tab.Load(); t != nil {
		for _, sh := range t.m.Shards {
			nodes = append(nodes, sh.Master)
		}
		for _, sh := range t.m.Shards {
			nodes = append(nodes, sh.Replicas...)
		}
	}
	for _, n := range nodes {
		if n.Addr == c.lastGood {
			add(n.Addr, n.Healthy)
		}
	}
	add(c.lastGood, true)
	for _, n := range nodes {
		add(n.Addr, n.Healthy)
	}
	for _, s := range c.cfg.Seeds {
		add(s, true)
	}
	return append(good, bad...)
}

// fetch reads the slot map from addr: CLUSTER SHARDS, or CLUSTER SLOTS
// from a node that refuses SHARDS (before Redis 7.0). A map serving no slot
// is an error: the node has not joined yet.
func (c *Cluster) fetch(addr string) (*SlotMap, error) {
	p, err := c.probeTo(addr)
	if err != nil {
		return nil, err
	}
	timeout := c.probeTimeout()
	if !c.useSlots {
		raw, err := p.do(shardsWire, timeout)
		if err != nil {
			return nil, err
		}
		m, err := ParseShards(raw, addr)
		var re *ReplyError
		if !errors.As(err, &re) {
			return covered(m, err)
		}
		raw, err2 := p.do(slotsWire, timeout)
		if err2 != nil {
			return nil, err2
		}
		m, err2 = ParseSlots(raw, addr)
		if err2 != nil {
			return nil, err // SHARDS's reason: "cluster support disabled"
		}
		c.useSlots = true
		c.log.Info("cluster node does not know CLUSTER SHARDS; reading CLUSTER SLOTS", "addr", addr, "err", re.Msg)
		return covered(m, nil)
	}
	raw, err := p.do(slotsWire, timeout)
	if err != nil {
		return nil, err
	}
	return covered(ParseSlots(raw, addr))
}

// covered refuses a map that serves no slot.
func covered(m *SlotMap, err error) (*SlotMap, error) {
	if err == nil && m.Covered() == 0 {
		return nil, ErrNoSlots
	}
	return m, err
}

// probeTimeout bounds one topology request.
func (c *Cluster) probeTimeout() time.Duration {
	return max(2*c.cfg.Node.ConnectTimeout, time.Second)
}

// probeConn is the refresher's own connection to one node. It is dialled
// and read on the refresher's goroutine only, never on a request's path.
type probeConn struct {
	addr string
	nc   net.Conn
	buf  []byte
}

// probeTo returns a connection to addr, reusing the last one when it goes
// to the same node.
func (c *Cluster) probeTo(addr string) (*probeConn, error) {
	if c.probe != nil && c.probe.addr == addr {
		return c.probe, nil
	}
	c.closeProbe()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Node.ConnectTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &probeConn{addr: addr, nc: nc}
	for _, req := range masterDialect.Handshake(c.cfg.Node.Handshake) {
		raw, err := p.do(req.Wire, c.probeTimeout())
		if err != nil {
			nc.Close()
			return nil, err
		}
		if _, kind, _ := masterDialect.ParseReply(raw, nil); kind != codec.ReplyOK {
			nc.Close()
			return nil, fmt.Errorf("cluster: %s refused: %s", req.Name, firstLine(raw))
		}
	}
	c.probe = p
	return p, nil
}

func (c *Cluster) closeProbe() {
	if c.probe != nil {
		c.probe.nc.Close()
		c.probe = nil
	}
}

// do sends one request and returns its reply, valid until the next do.
func (p *probeConn) do(wire []byte, timeout time.Duration) ([]byte, error) {
	p.nc.SetDeadline(time.Now().Add(timeout))
	if _, err := p.nc.Write(wire); err != nil {
		return nil, err
	}
	p.buf = p.buf[:0]
	for {
		n, _, err := masterDialect.ParseReply(p.buf, nil)
		if err == nil {
			if n != len(p.buf) {
				return nil, errors.New("cluster: bytes after the reply")
			}
			return p.buf, nil
		}
		if !errors.Is(err, codec.ErrIncomplete) {
			return nil, err
		}
		if len(p.buf) >= maxTopologyReply {
			return nil, errors.New("cluster: topology reply too large")
		}
		if len(p.buf) == cap(p.buf) {
			p.buf = append(p.buf, make([]byte, max(4096, len(p.buf)))...)[:len(p.buf)]
		}
		m, err := p.nc.Read(p.buf[len(p.buf):cap(p.buf)])
		p.buf = p.buf[:len(p.buf)+m]
		if err != nil && m == 0 {
			return nil, err
		}
	}
}
