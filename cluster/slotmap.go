package cluster

import (
	"net"
	"strconv"
)

// Node is one cluster node as a topology reply names it.
type Node struct {
	// Addr is "host:port" (IPv6 hosts in brackets): the node's preferred
	// endpoint, else its IP, else (unknown) the host of the node that sent
	// the reply.
	Addr string
	// ID is the node's 40-character cluster id ("" if the reply had none).
	ID string
	// Healthy is false for a node the cluster reports as failed or loading
	// (CLUSTER SHARDS health other than "online"). CLUSTER SLOTS lists
	// healthy nodes only.
	Healthy bool
}

// Shard is a master and its replicas.
type Shard struct {
	Master   Node
	Replicas []Node
}

// SlotMap is one view of a cluster: its shards and the shard serving each
// slot. A SlotMap is immutable once parsed and safe for concurrent reads.
type SlotMap struct {
	// Shards are in the order of the reply.
	Shards []Shard
	owner  [Slots]int16 // index into Shards; -1: not served
}

func newSlotMap() *SlotMap {
	m := &SlotMap{}
	for i := range m.owner {
		m.owner[i] = -1
	}
	return m
}

// Owner returns the index in m.Shards of the shard serving slot, or -1 when
// no shard serves it.
func (m *SlotMap) Owner(slot int) int {
	if slot < 0 || slot >= Slots {
		return -1
	}
	return int(m.owner[slot])
}

// Covered returns how many slots a shard serves.
func (m *SlotMap) Covered() int {
	n := 0
	for _, o := range m.owner {
		if o >= 0 {
			n++
		}
	}
	return n
}

// Ranges returns the slot ranges of shard i, in slot order, as [first,
// last] pairs.
func (m *SlotMap) Ranges(i int) [][2]int {
	var r [][2]int
	for s := 0; s < Slots; s++ {
		if int(m.owner[s]) != i {
			continue
		}
		if n := len(r); n > 0 && r[n-1][1] == s-1 {
			r[n-1][1] = s
		} else {
			r = append(r, [2]int{s, s})
		}
	}
	return r
}

// SlotRun is a run of consecutive slots one shard serves.
type SlotRun struct {
	First, Last int // slots, inclusive
	Shard       int // index into SlotMap.Shards
}

// Runs returns every run of slots a shard serves, in slot order, read in
// one pass over the map; slots no shard serves are in no run.
func (m *SlotMap) Runs() []SlotRun {
	var r []SlotRun
	for s := 0; s < Slots; s++ {
		o := int(m.owner[s])
		switch n := len(r); {
		case o < 0:
		case n > 0 && r[n-1].Shard == o && r[n-1].Last == s-1:
			r[n-1].Last = s
		default:
			r = append(r, SlotRun{First: s, Last: s, Shard: o})
		}
	}
	return r
}

// assign gives slots first..last to shard i.
func (m *SlotMap) assign(first, last int64, i int) error {
	if first < 0 || last >= Slots || first > last {
		return errorf("bad slot range %d-%d", first, last)
	}
	for s := first; s <= last; s++ {
		if m.owner[s] >= 0 && int(m.owner[s]) != i {
			return errorf("slot %d is served by two shards", s)
		}
		m.owner[s] = int16(i)
	}
	return nil
}

// ParseShards reads a CLUSTER SHARDS reply (Redis 7.0 and later; RESP2, so
// each map is a flat array of names and values). from is the address of
// the node that sent it. A shard serving slots must have a master; a shard
// serving none is kept (its nodes may be named by a redirect) when it has
// one. Where a shard lists two masters (during a failover) the healthy one
// is taken.
func ParseShards(reply []byte, from string) (*SlotMap, error) {
	top, err := readValue(reply)
	if err != nil {
		return nil, err
	}
	if top.kind != '*' {
		return nil, topologyReplyError(top)
	}
	m := newSlotMap()
	for _, sv := range top.arr {
		sh, ranges, err := parseShard(sv, from)
		if err != nil {
			return nil, err
		}
		if sh == nil {
			if len(ranges) > 0 {
				return nil, errorf("a shard serving slots has no master")
			}
			continue
		}
		i := len(m.Shards)
		m.Shards = append(m.Shards, *sh)
		for j := 0; j < len(ranges); j += 2 {
			if err := m.assign(ranges[j], ranges[j+1], i); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// parseShard reads one shard's map: its master and replicas (nil when it
// has no master) and its slot ranges as first, last pairs.
func parseShard(sv value, from string) (*Shard, []int64, error) {
	slots, ok1 := sv.field("slots")
	nodes, ok2 := sv.field("nodes")
	if !ok1 || !ok2 || slots.kind != '*' || nodes.kind != '*' || len(slots.arr)%2 != 0 {
		return nil, nil, errorf("a shard needs slots (pairs of numbers) and nodes")
	}
	ranges := make([]int64, len(slots.arr))
	for i, s := range slots.arr {
		if s.kind != ':' {
			return nil, nil, errorf("a slot bound is no integer")
		}
		ranges[i] = s.num
	}
	sh, hasMaster, err := parseShardNodes(nodes, from)
	if err != nil {
		return nil, nil, err
	}
	if !hasMaster {
		return nil, ranges, nil
	}
	return &sh, ranges, nil
}

// parseShardNodes reads a shard's nodes: its master (the first healthy
// one, else the first; hasMaster false when none says master) and the
// others as its replicas.
func parseShardNodes(nodes value, from string) (sh Shard, hasMaster bool, err error) {
	for _, nv := range nodes.arr {
		n, role, err := parseShardNode(nv, from)
		if err != nil {
			return Shard{}, false, err
		}
		switch {
		case role != "master":
			sh.Replicas = append(sh.Replicas, n)
		case !hasMaster || (!sh.Master.Healthy && n.Healthy):
			if hasMaster {
				sh.Replicas = append(sh.Replicas, sh.Master)
			}
			sh.Master, hasMaster = n, true
		default:
			sh.Replicas = append(sh.Replicas, n)
		}
	}
	return sh, hasMaster, nil
}

// parseShardNode reads one node's map of a CLUSTER SHARDS reply.
func parseShardNode(nv value, from string) (Node, string, error) {
	if nv.kind != '*' {
		return Node{}, "", errorf("a node is no map")
	}
	var n Node
	n.ID = fieldText(nv, "id")
	host := fieldText(nv, "endpoint")
	if host == "" || host == "?" {
		host = fieldText(nv, "ip")
	}
	port, ok := nv.field("port")
	if !ok || port.kind != ':' {
		port, ok = nv.field("tls-port")
	}
	if !ok || port.kind != ':' {
		return Node{}, "", errorf("node %q has no port", n.ID)
	}
	addr, err := nodeAddr(host, port.num, from)
	if err != nil {
		return Node{}, "", err
	}
	n.Addr = addr
	health := fieldText(nv, "health")
	n.Healthy = health == "online" || health == ""
	return n, fieldText(nv, "role"), nil
}

// fieldText returns a text field of a flat map, or "".
func fieldText(v value, name string) string {
	f, ok := v.field(name)
	if !ok {
		return ""
	}
	s, _ := f.text()
	return s
}

// ParseSlots reads a CLUSTER SLOTS reply: for each slot range, the range,
// its master and its healthy replicas, each as [ip, port, id, ...]. from is
// the address of the node that sent it. Ranges with the same master make
// one shard.
func ParseSlots(reply []byte, from string) (*SlotMap, error) {
	top, err := readValue(reply)
	if err != nil {
		return nil, err
	}
	if top.kind != '*' {
		return nil, topologyReplyError(top)
	}
	m := newSlotMap()
	byMaster := map[string]int{}
	for _, rv := range top.arr {
		if rv.kind != '*' || len(rv.arr) < 3 || rv.arr[0].kind != ':' || rv.arr[1].kind != ':' {
			return nil, errorf("a slot range needs first, last and a master")
		}
		nodes := make([]Node, 0, len(rv.arr)-2)
		for _, nv := range rv.arr[2:] {
			n, err := parseSlotsNode(nv, from)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
		}
		i, ok := byMaster[nodes[0].Addr]
		if !ok {
			i = len(m.Shards)
			byMaster[nodes[0].Addr] = i
			m.Shards = append(m.Shards, Shard{Master: nodes[0], Replicas: nodes[1:]})
		}
		if err := m.assign(rv.arr[0].num, rv.arr[1].num, i); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseSlotsNode reads [ip, port, id, metadata] of a CLUSTER SLOTS reply;
// only ip and port are required.
func parseSlotsNode(nv value, from string) (Node, error) {
	if nv.kind != '*' || len(nv.arr) < 2 || nv.arr[1].kind != ':' {
		return Node{}, errorf("a node needs a host and a port")
	}
	host, _ := nv.arr[0].text()
	addr, err := nodeAddr(host, nv.arr[1].num, from)
	if err != nil {
		return Node{}, err
	}
	n := Node{Addr: addr, Healthy: true}
	if len(nv.arr) > 2 {
		n.ID, _ = nv.arr[2].text()
	}
	return n, nil
}

// nodeAddr joins a node's host and port; an unknown host ("" or "?") is
// the host of from, the node that sent the reply.
func nodeAddr(host string, port int64, from string) (string, error) {
	if port < 1 || port > 65535 {
		return "", errorf("bad port %d", port)
	}
	if host == "" || host == "?" {
		h, _, ok := splitHost(from)
		if !ok {
			return "", errorf("node with unknown host, and no host to stand in")
		}
		host = h
	}
	if len(host) > maxHost || !hostOK([]byte(host)) {
		return "", errorf("bad host %q", host)
	}
	return net.JoinHostPort(host, strconv.FormatInt(port, 10)), nil
}

// topologyReplyError describes a reply that is not a topology at all: an
// error reply means the node is no cluster node (or refuses the command).
func topologyReplyError(v value) error {
	if v.kind == '-' {
		return &ReplyError{Msg: string(v.str)}
	}
	return errorf("reply is no array")
}

// ReplyError is an error reply a node gave to a topology request, such as
// "ERR This instance has cluster support disabled". It wraps ErrNotCluster.
type ReplyError struct {
	Msg string // without the leading '-' and the line end
}

func (e *ReplyError) Error() string { return "cluster: node replied -" + e.Msg }

// Unwrap makes errors.Is(err, ErrNotCluster) true.
func (e *ReplyError) Unwrap() error { return ErrNotCluster }
