package cluster

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
)

// node is one cluster node's backend. A node is a master node or a
// replica node by the sockets it keeps: replica sockets send READONLY, so
// the same address may have one node of each kind.
type node struct {
	addr     string
	replica  bool
	b        *backend.Backend
	inflight atomic.Int64 // calls sent and not completed
	retired  time.Time    // when it left the map; guarded by Cluster.mu
}

type nodeKey struct {
	addr    string
	replica bool
}

// shardNodes are the nodes of one shard.
type shardNodes struct {
	master   *node
	replicas []*node // healthy replicas; none under ReadMaster
}

// table is what requests are routed by: a slot map resolved to nodes. It
// is immutable; changes (a refresh, a MOVED) build a new one.
type table struct {
	m       *SlotMap
	shards  []shardNodes
	owner   [Slots]int16 // index into shards; -1: not served
	masters []*node      // masters serving at least one slot

	scanOnce sync.Once
	scan     []*node // scanOrder's, made once
}

// scanOrder returns the masters serving slots in the order of the first
// slot each serves: the numbering of a SCAN cursor. It does not depend on
// the order in which a node lists the shards (which differs from node to
// node), and it survives a failover (the new master serves the same
// slots); a reshard that changes which master has the lowest slots
// renumbers them.
func (t *table) scanOrder() []*node {
	t.scanOnce.Do(func() {
		seen := make([]bool, len(t.shards))
		for _, i := range t.owner {
			if i < 0 || seen[i] {
				continue
			}
			seen[i] = true
			m := t.shards[i].master
			if !slices.Contains(t.scan, m) {
				t.scan = append(t.scan, m)
			}
		}
	})
	return t.scan
}

// replica returns a replica of the shard for hint, skipping those marked
// bad, or nil.
func (s *shardNodes) replica(hint uint32) *node {
	n := len(s.replicas)
	for i := range n {
		r := s.replicas[(int(hint)+i)%n]
		if !r.b.Bad() {
			return r
		}
	}
	return nil
}

// withSlot returns a copy of t in which slot is served by master n's shard
// (a new shard when no shard has n as master).
func (t *table) withSlot(slot int, n *node) *table {
	nt := &table{m: t.m, owner: t.owner, shards: t.shards, masters: t.masters}
	idx := -1
	for i := range t.shards {
		if t.shards[i].master == n {
			idx = i
			break
		}
	}
	if idx < 0 {
		idx = len(t.shards)
		nt.shards = append(t.shards[:len(t.shards):len(t.shards)], shardNodes{master: n})
	}
	found := false
	for _, m := range t.masters {
		found = found || m == n
	}
	if !found {
		nt.masters = append(t.masters[:len(t.masters):len(t.masters)], n)
	}
	nt.owner[slot] = int16(idx)
	return nt
}

// uses reports the nodes t routes to.
func (t *table) uses() map[*node]bool {
	used := make(map[*node]bool)
	for _, s := range t.shards {
		used[s.master] = true
		for _, r := range s.replicas {
			used[r] = true
		}
	}
	return used
}

// nodeLocked returns the node for addr of the given kind, creating it (or
// taking it back from the retiring list) when needed. Called with c.mu
// held. Creating a node dials nothing: its backend dials on its own
// goroutine when the first request is queued.
func (c *Cluster) nodeLocked(addr string, replica bool) *node {
	k := nodeKey{addr, replica}
	if n, ok := c.nodes[k]; ok {
		return n
	}
	for i, n := range c.retiring {
		if n.addr == addr && n.replica == replica {
			c.retiring = append(c.retiring[:i], c.retiring[i+1:]...)
			n.retired = time.Time{}
			c.nodes[k] = n
			return n
		}
	}
	cfg := c.cfg.Node
	cfg.Addr, cfg.Name = addr, addr
	cfg.Dialect = masterDialect
	if replica {
		cfg.Dialect = replicaDialect
	}
	cfg.Logger = c.log
	cfg.OnStateChange = nil
	n := &node{addr: addr, replica: replica, b: c.cfg.Backends.Get(cfg)}
	c.nodes[k] = n
	return n
}

// nodeAt returns the master-kind node for addr (a MOVED or ASK target).
func (c *Cluster) nodeAt(addr string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeLocked(addr, false)
}

// install makes m the routing table, applies the MOVED replies seen while
// it was being read, retires the nodes it no longer uses, and sends the
// requests that waited for a map. from is the node m came from ("" for a
// map given at start).
func (c *Cluster) install(m *SlotMap, from string) {
	c.mu.Lock()
	old := c.tab.Load()
	t := &table{m: m, owner: m.owner, shards: make([]shardNodes, len(m.Shards))}
	serving := make([]bool, len(m.Shards))
	for _, o := range m.owner {
		if o >= 0 {
			serving[o] = true
		}
	}
	for i, sh := range m.Shards {
		sn := shardNodes{master: c.nodeLocked(sh.Master.Addr, false)}
		if c.cfg.ReadFrom != ReadMaster {
			for _, r := range sh.Replicas {
				if r.Healthy {
					sn.replicas = append(sn.replicas, c.nodeLocked(r.Addr, true))
				}
			}
		}
		t.shards[i] = sn
		if serving[i] {
			t.masters = append(t.masters, sn.master)
		}
	}
	for _, mv := range c.moves {
		t = t.withSlot(mv.slot, c.nodeLocked(mv.addr, false))
	}
	c.moves, c.refreshing = nil, false
	used := t.uses()
	now := time.Now()
	for k, n := range c.nodes {
		if !used[n] {
			delete(c.nodes, k)
			n.retired = now
			c.retiring = append(c.retiring, n)
		}
	}
	c.tab.Store(t)
	parked := c.parked
	c.parked = nil
	c.lastErr = ""
	c.lastOK = now
	c.mu.Unlock()

	c.logChange(old, t, from)
	for _, o := range parked {
		o.send()
	}
}

// logChange logs a new map: at Info level when its nodes changed (the
// first map, a node joined or left, a failover), at Debug level when only
// slots moved (a reshard moves many, one refresh at a time).
func (c *Cluster) logChange(old, t *table, from string) {
	switch {
	case old != nil && sameMap(old.m, t.m):
	case old != nil && sameNodes(old.m, t.m):
		c.log.Debug("cluster slots moved", "from", from, "slots", t.m.Covered())
	default:
		c.log.Info("cluster slot map", "from", from, "shards", len(t.m.Shards),
			"masters", len(t.masters), "slots", t.m.Covered())
	}
}

// sameNodes reports whether two maps have the same shards (masters and
// replicas), whatever slots they serve.
func sameNodes(a, b *SlotMap) bool {
	if len(a.Shards) != len(b.Shards) {
		return false
	}
	for i := range a.Shards {
		x, y := a.Shards[i], b.Shards[i]
		if x.Master != y.Master || len(x.Replicas) != len(y.Replicas) {
			return false
		}
		for j := range x.Replicas {
			if x.Replicas[j] != y.Replicas[j] {
				return false
			}
		}
	}
	return true
}

// sameMap reports whether two maps route alike: same owners and nodes.
func sameMap(a, b *SlotMap) bool {
	return a.owner == b.owner && sameNodes(a, b)
}

// moved routes slot to the shard of the master at addr from now on (a
// MOVED reply), asks for a refresh (the map has changed) and returns that
// master's node.
func (c *Cluster) moved(slot int, addr string) *node {
	c.mu.Lock()
	n := c.nodeLocked(addr, false)
	t := c.tab.Load()
	if t != nil {
		if i := t.owner[slot]; i < 0 || t.shards[i].master != n {
			c.tab.Store(t.withSlot(slot, n))
		}
	}
	if c.refreshing {
		c.moves = append(c.moves, move{slot, addr})
	}
	c.mu.Unlock()
	c.Refresh()
	return n
}

// reap gives back retired nodes' backends once nothing is in flight on them, or after
// closeDrain.
func (c *Cluster) reap() {
	now := time.Now()
	var closing []*node
	c.mu.Lock()
	keep := c.retiring[:0]
	for _, n := range c.retiring {
		if n.inflight.Load() == 0 || now.Sub(n.retired) > closeDrain {
			closing = append(closing, n)
		} else {
			keep = append(keep, n)
		}
	}
	clear(c.retiring[len(keep):])
	c.retiring = keep
	c.mu.Unlock()
	for _, n := range closing {
		c.cfg.Backends.Put(n.b)
	}
}
