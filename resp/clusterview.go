package resp

import (
	"net"
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// A pool with redis_cluster_view (codec.Options.ClusterView) shows its
// proxies to cluster-aware clients as a Redis Cluster of masters: CLUSTER
// SLOTS, SHARDS, NODES, INFO, MYID and KEYSLOT answer from the Env
// (codec.ClusterEnv) in redis-server 7.0's formats; READONLY, READWRITE
// and ASKING are taken with +OK. A client that asked for the map (SLOTS,
// SHARDS or NODES) is cluster-aware (ClusterAware): the proxy sends it
// MOVED for a key another proxy serves.

var _ codec.ClusterAwarer = (*parser)(nil)

// ClusterAware implements codec.ClusterAwarer.
func (p *parser) ClusterAware() bool { return p.aware }

// clusterReply decides a cluster command while parsing: READONLY and the
// like are +OK; the map's commands mark the client cluster-aware, and
// AppendLocal answers them.
func (p *parser) clusterReply(out []byte, local localCmd) []byte {
	switch local {
	case localClusterOK:
		return redcon.AppendOK(out)
	case localClusterSlots, localClusterShards, localClusterNodes:
		p.aware = true
	}
	return out
}

// appendCluster answers a cluster command from env's nodes.
func appendCluster(dst []byte, req *codec.Request, local localCmd, env codec.Env) []byte {
	ce, ok := env.(codec.ClusterEnv)
	if !ok {
		return redcon.AppendError(dst, "ERR no cluster view here")
	}
	if local == localClusterKeyslot {
		args := wireArgs(req.Wire)
		if len(args) != 1 {
			return append(dst, wrongArity("cluster|keyslot")...)
		}
		return redcon.AppendInt(dst, int64(ce.ClusterSlot(args[0])))
	}
	nodes := ce.ClusterNodes()
	switch local {
	case localClusterSlots:
		return appendClusterSlots(dst, nodes, req.Proto)
	case localClusterShards:
		return appendClusterShards(dst, nodes, req.Proto)
	case localClusterNodes:
		return appendText(dst, req.Proto, appendClusterNodes(nil, nodes))
	case localClusterInfo:
		return appendText(dst, req.Proto, appendClusterInfo(nil, len(nodes)))
	}
	for _, n := range nodes { // localClusterMyID
		if n.Self {
			return redcon.AppendBulkString(dst, n.ID)
		}
	}
	return redcon.AppendBulkString(dst, "")
}

// splitAddr returns addr's host and port.
func splitAddr(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

// appendClusterSlots is CLUSTER SLOTS: per range, its first and last slot
// and its node (ip, port, id, a map of no more endpoints).
func appendClusterSlots(dst []byte, nodes []codec.ClusterNode, proto uint8) []byte {
	n := 0
	for _, nd := range nodes {
		n += len(nd.Slots)
	}
	dst = redcon.AppendArray(dst, n)
	for _, nd := range nodes {
		host, port := splitAddr(nd.Addr)
		for _, r := range nd.Slots {
			dst = redcon.AppendArray(dst, 3)
			dst = redcon.AppendInt(dst, int64(r[0]))
			dst = redcon.AppendInt(dst, int64(r[1]))
			dst = redcon.AppendArray(dst, 4)
			dst = redcon.AppendBulkString(dst, host)
			dst = redcon.AppendInt(dst, int64(port))
			dst = redcon.AppendBulkString(dst, nd.ID)
			dst = appendFieldsHeader(dst, 0, proto)
		}
	}
	return dst
}

// appendClusterShards is CLUSTER SHARDS: per node a shard of one master,
// its slots as first, last pairs.
func appendClusterShards(dst []byte, nodes []codec.ClusterNode, proto uint8) []byte {
	dst = redcon.AppendArray(dst, len(nodes))
	for _, nd := range nodes {
		host, port := splitAddr(nd.Addr)
		dst = appendFieldsHeader(dst, 2, proto)
		dst = redcon.AppendBulkString(dst, "slots")
		dst = redcon.AppendArray(dst, 2*len(nd.Slots))
		for _, r := range nd.Slots {
			dst = redcon.AppendInt(dst, int64(r[0]))
			dst = redcon.AppendInt(dst, int64(r[1]))
		}
		dst = redcon.AppendBulkString(dst, "nodes")
		dst = redcon.AppendArray(dst, 1)
		dst = appendFieldsHeader(dst, 7, proto)
		for _, kv := range [][2]string{{"id", nd.ID}, {"ip", host}, {"endpoint", host}, {"role", "master"}, {"health", "online"}} {
			dst = redcon.AppendBulkString(dst, kv[0])
			dst = redcon.AppendBulkString(dst, kv[1])
		}
		dst = redcon.AppendBulkString(dst, "port")
		dst = redcon.AppendInt(dst, int64(port))
		dst = redcon.AppendBulkString(dst, "replication-offset")
		dst = redcon.AppendInt(dst, 0)
	}
	return dst
}

// appendClusterNodes is CLUSTER NODES's text: a line per node.
func appendClusterNodes(b []byte, nodes []codec.ClusterNode) []byte {
	for _, nd := range nodes {
		_, port := splitAddr(nd.Addr)
		flags := "master"
		if nd.Self {
			flags = "myself,master"
		}
		b = append(b, nd.ID+" "+nd.Addr+"@"+strconv.Itoa(port+10000)+" "+flags+" - 0 0 1 connected"...)
		for _, r := range nd.Slots {
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(r[0]), 10)
			if r[1] != r[0] {
				b = append(b, '-')
				b = strconv.AppendInt(b, int64(r[1]), 10)
			}
		}
		b = append(b, '\n')
	}
	return b
}

// appendClusterInfo is CLUSTER INFO's text for nodes masters that serve
// every slot.
func appendClusterInfo(b []byte, nodes int) []byte {
	n := strconv.Itoa(nodes)
	return append(b, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n"+
		"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:"+n+"\r\ncluster_size:"+n+"\r\n"+
		"cluster_current_epoch:1\r\ncluster_my_epoch:1\r\ncluster_stats_messages_sent:0\r\n"+
		"cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"...)
}
