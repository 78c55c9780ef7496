package proxy

import (
	"crypto/tls"
	"time"

	"shardproxy/backend"
	"shardproxy/cluster"
	"shardproxy/codec"
	"shardproxy/config"
)

// clusterRetryTimeout is how long a cluster node that failed
// server_failure_limit times in a row fails fast when the pool leaves
// server_retry_timeout at its default: twemproxy's 30s suits a server whose
// keys move elsewhere (auto_eject_hosts), not a node whose slots only it
// serves until the cluster fails it over.
const clusterRetryTimeout = time.Second

// clusterRouter adapts a *cluster.Cluster to the pool's router interface.
type clusterRouter struct{ *cluster.Cluster }

// Route implements router.
func (r clusterRouter) Route(req *codec.Request, hint uint32, c Completion) {
	r.Cluster.Route(req, hint, c)
}

// newClusterRouter builds the router of a redis_cluster pool: its servers
// are the seeds, and its timeout, connect_timeout, server_connections,
// server_failure_limit, server_retry_timeout, tcpkeepalive, preconnect and
// redis_auth apply to every node. A reload starts from the running pool's
// slot map, so no request waits for the new pool's first refresh.
func newClusterRouter(p *pool, old *pool, dialTLS *tls.Config) (router, error) {
	pc := p.cfg
	readFrom, err := cluster.ParseReadFrom(pc.ReadFrom)
	if err != nil {
		return nil, err
	}
	seeds := make([]string, len(pc.Servers))
	for i, s := range pc.Servers {
		seeds[i] = s.Addr
	}
	retry := pc.ServerRetryTimeout
	if retry == config.DefaultServerRetryTimeout {
		retry = clusterRetryTimeout
	}
	cfg := cluster.Config{
		Seeds:           seeds,
		ReadFrom:        readFrom,
		RefreshInterval: pc.ClusterRefresh,
		Node: backend.Config{
			Handshake:      codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser},
			TLS:            dialTLS,
			Conns:          pc.ServerConnections,
			ConnectTimeout: pc.ConnectTimeout,
			Timeout:        pc.Timeout,
			FailureLimit:   pc.ServerFailureLimit,
			RetryTimeout:   retry,
			TCPKeepalive:   pc.TCPKeepalive,
			Preconnect:     pc.Preconnect,
		},
		Logger: p.log,
	}
	if old != nil {
		if r, ok := old.router.(clusterRouter); ok {
			cfg.Start = r.Map()
		}
	}
	c, err := cluster.New(cfg)
	if err != nil {
		return nil, err
	}
	return clusterRouter{c}, nil
}

// ClusterStats returns the counters and state of the redis_cluster pool
// called name (MOVED and ASK replies followed, refreshes and their
// failures, the slot map in use), and false when no such cluster pool
// runs.
func (s *Server) ClusterStats(name string) (cluster.Stats, bool) {
	p := s.pool(name)
	if p == nil {
		return cluster.Stats{}, false
	}
	r, ok := p.router.(clusterRouter)
	if !ok {
		return cluster.Stats{}, false
	}
	return r.Stats(), true
}
