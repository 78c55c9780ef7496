package proxy

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"

	"shardproxy/cluster"
	"shardproxy/codec"
)

// A Redis pool with redis_cluster_view shows its proxies to cluster-aware
// clients as a Redis Cluster of masters (resp answers CLUSTER SLOTS and
// the like from localEnv's ClusterNodes): without a fleet the proxy alone,
// serving every slot at the address the client reached; in a fleet every
// live proxy that serves the pool (FleetMember), the slots spread evenly
// over them in the order of their ids. Every proxy still serves every key;
// a client that asked for the map (codec.ClusterAwarer) is sent MOVED
// for a key another proxy's slots hold, so cluster clients spread their
// requests over the fleet as the map says.

// FleetMember is a live proxy of the fleet and the address where clients
// reach each of its pools ("host:port" by pool name).
type FleetMember struct {
	ID    string
	Pools map[string]string
}

// fleetMembers is the fleet's live proxies as SetFleetMembers last set them.
type fleetMembers struct {
	self    string // this proxy's id
	members []FleetMember
}

// SetFleetMembers makes members, sorted by id, the fleet's live proxies;
// self is this proxy's id. Safe for concurrent use.
func (s *Server) SetFleetMembers(self string, members []FleetMember) {
	m := &fleetMembers{self: self, members: slices.Clone(members)}
	slices.SortFunc(m.members, func(a, b FleetMember) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	s.members.Store(m)
}

// ClusterNodes implements codec.ClusterEnv.
func (e *localEnv) ClusterNodes() []codec.ClusterNode {
	return e.pool.clusterNodes(e.s.nc.LocalAddr().String())
}

// ClusterSlot implements codec.ClusterEnv.
func (e *localEnv) ClusterSlot(key []byte) int { return cluster.Slot(key) }

// clusterNodes returns the pool's proxies as cluster nodes; here is the
// address the asking client reached this proxy at, its node's when the
// fleet lists none for it.
func (p *pool) clusterNodes(here string) []codec.ClusterNode {
	var ids, addrs []string
	self := -1
	if m := p.srv.members.Load(); m != nil {
		for _, fm := range m.members {
			if addr := fm.Pools[p.cfg.Name]; addr != "" {
				if fm.ID == m.self {
					self = len(ids)
				}
				ids, addrs = append(ids, fm.ID), append(addrs, addr)
			}
		}
	}
	if self < 0 { // no fleet, or not yet listed in it: this proxy alone
		ids, addrs, self = []string{"proxy " + here}, []string{here}, 0
	}
	nodes := make([]codec.ClusterNode, len(ids))
	for i := range ids {
		first, last := slotRange(i, len(ids))
		sum := sha1.Sum([]byte(ids[i] + "\x00" + p.cfg.Name))
		nodes[i] = codec.ClusterNode{ID: hex.EncodeToString(sum[:]), Addr: addrs[i],
			Slots: [][2]int{{first, last}}, Self: i == self}
	}
	return nodes
}

// slotRange is the slots of the i-th of n nodes, first and last.
func slotRange(i, n int) (first, last int) {
	return i * cluster.Slots / n, (i+1)*cluster.Slots/n - 1
}

// moved answers p with MOVED when its client follows a cluster's map and
// p's key is in the slots of another proxy of the pool; it reports
// whether it did.
func (s *session) moved(p *pending, pl *pool) bool {
	if len(p.Req.Keys) == 0 || p.Req.Route == codec.RouteLocal {
		return false
	}
	if ca, ok := s.parser.(codec.ClusterAwarer); !ok || !ca.ClusterAware() {
		return false
	}
	nodes := pl.clusterNodes(s.nc.LocalAddr().String())
	if len(nodes) < 2 {
		return false
	}
	slot := cluster.Slot(p.Req.Keys[0])
	for _, n := range nodes {
		if r := n.Slots[0]; slot >= r[0] && slot <= r[1] {
			if n.Self {
				return false
			}
			p.Answer(append(p.Out(), "-MOVED "+strconv.Itoa(slot)+" "+n.Addr+"\r\n"...))
			return true
		}
	}
	return false
}
