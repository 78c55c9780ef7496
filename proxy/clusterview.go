package proxy

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

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

// fleetMembers is the fleet's live proxies as SetFleetMembers last set
// them, by pool: the proxies that serve each, in the order of their ids.
type fleetMembers struct {
	pools map[string]poolMembers
}

// poolMembers is the proxies of one pool: their ids and addresses, and
// which of them is this proxy (-1: none).
type poolMembers struct {
	ids, addrs []string
	self       int
}

// SetFleetMembers makes members the fleet's live proxies; self is this
// proxy's id. Safe for concurrent use.
func (s *Server) SetFleetMembers(self string, members []FleetMember) {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b FleetMember) int { return strings.Compare(a.ID, b.ID) })
	m := &fleetMembers{pools: map[string]poolMembers{}}
	for _, fm := range members {
		for pool, addr := range fm.Pools {
			if addr == "" {
				continue
			}
			pm := m.pools[pool]
			if len(pm.ids) == 0 {
				pm.self = -1
			}
			if fm.ID == self {
				pm.self = len(pm.ids)
			}
			pm.ids, pm.addrs = append(pm.ids, fm.ID), append(pm.addrs, addr)
			m.pools[pool] = pm
		}
	}
	s.members.Store(m)
}

// ClusterNodes implements codec.ClusterEnv.
func (e *localEnv) ClusterNodes() []codec.ClusterNode {
	return e.pool.clusterNodes(e.s.nc.LocalAddr().String())
}

// ClusterSlot implements codec.ClusterEnv.
func (e *localEnv) ClusterSlot(key []byte) int { return cluster.Slot(key) }

// fleetView returns the pool's proxies in the fleet; self < 0 when there
// is no fleet, or this proxy is not listed in it yet.
func (p *pool) fleetView() poolMembers {
	if m := p.srv.members.Load(); m != nil {
		if pm, ok := m.pools[p.cfg.Name]; ok {
			return pm
		}
	}
	return poolMembers{self: -1}
}

// clusterNodes returns the pool's proxies as cluster nodes; here is the
// address the asking client reached this proxy at, its node's when the
// fleet lists none for it (this proxy alone).
func (p *pool) clusterNodes(here string) []codec.ClusterNode {
	pm := p.fleetView()
	if pm.self < 0 {
		pm = poolMembers{ids: []string{"proxy " + here}, addrs: []string{here}, self: 0}
	}
	nodes := make([]codec.ClusterNode, len(pm.ids))
	for i := range pm.ids {
		first, last := slotRange(i, len(pm.ids))
		sum := sha1.Sum([]byte(pm.ids[i] + "\x00" + p.cfg.Name))
		nodes[i] = codec.ClusterNode{ID: hex.EncodeToString(sum[:]), Addr: pm.addrs[i],
			Slots: [][2]int{{first, last}}, Self: i == pm.self}
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
	pm := pl.fleetView()
	if pm.self < 0 || len(pm.ids) < 2 {
		return false
	}
	slot := cluster.Slot(p.Req.Keys[0])
	for i := range pm.ids {
		if first, last := slotRange(i, len(pm.ids)); slot >= first && slot <= last {
			if i == pm.self {
				return false
			}
			p.Answer(append(p.Out(), "-MOVED "+strconv.Itoa(slot)+" "+pm.addrs[i]+"\r\n"...))
			return true
		}
	}
	return false
}
