package cluster

import (
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/route"
)

// clusterRetryTimeout is how long a cluster node that failed
// server_failure_limit times in a row fails fast when the file does not
// set server_retry_timeout: twemproxy's default 30s suits a server whose
// keys move elsewhere (auto_eject_hosts), not a node whose slots only it
// serves until the cluster fails it over.
const clusterRetryTimeout = time.Second

// init registers the redis_cluster kind with kind and its rules with
// config.
func init() {
	kind.Register(config.KindCluster, poolKind{})
	config.RegisterKind(configRules)
}

// poolKind is the Redis Cluster kind (redis_cluster: true).
type poolKind struct{}

var _ kind.Kind = poolKind{}

// Build implements kind.Kind (newPoolRouter).
func (poolKind) Build(k *kind.Env) (route.Router, error) { return newPoolRouter(k) }

// Describe implements kind.Kind: the number of seeds.
func (poolKind) Describe(pc *config.Pool, _ route.Router) []any {
	return []any{"cluster_seeds", len(pc.Servers)}
}

// Settings implements kind.Kind: the lines of a pool placed by hash, as
// every pool but a Lua one shows them (the slot map, not these keys,
// places a cluster's keys).
func (poolKind) Settings(pc *config.Pool, r route.Router) []codec.Stat {
	return kind.PlacementSettings(pc, r)
}

// poolRouter routes a redis_cluster pool by the cluster's slot map (a
// Cluster): the pool's router, as the proxy sees it.
type poolRouter struct {
	c   *Cluster
	ded *kind.DedicatedPool
	rc  *kind.Counters // the pool's, which counts c until it closes
}

var (
	_ route.Router       = poolRouter{}
	_ kind.Dedicator     = poolRouter{}
	_ kind.CounterSource = (*Cluster)(nil)
)

// Route implements route.Router.
func (r poolRouter) Route(x *route.Exchange) { r.c.Route(&x.Req, x.Hint, x) }

// Backends implements route.Router: the nodes of the slot map in use.
func (r poolRouter) Backends() []*backend.Backend { return r.c.Backends() }

// Cluster returns the Cluster the router routes by, for the proxy's
// stats (the slot map in use, redirects followed).
func (r poolRouter) Cluster() *Cluster { return r.c }

// Close implements route.Router.
func (r poolRouter) Close() {
	r.ded.Close()
	r.c.Close()
	r.rc.Retire(r.c)
	r.rc.Retire(r.ded)
}

// Place implements kind.Dedicator: the master of the one slot of every key.
func (r poolRouter) Place(req *codec.Request, hint uint32) (*backend.Backend, int, []byte) {
	return r.c.Place(req, hint)
}

// Dedicated implements kind.Dedicator.
func (r poolRouter) Dedicated() *kind.DedicatedPool { return r.ded }

// PatternServers implements kind.Dedicator: one node, the master of slot 0.
// Redis Cluster carries every PUBLISH to every node, so a pattern
// subscribed on one node sees every channel, and on two it would see
// each message twice. One node for every client's patterns keeps PUBSUB
// NUMPAT (the largest count of the masters) exact.
func (r poolRouter) PatternServers() ([]*backend.Backend, []byte) {
	b, _, refusal := r.c.Place(&codec.Request{Keys: [][]byte{{}}}, 0)
	if refusal != nil {
		return nil, refusal
	}
	return []*backend.Backend{b}, nil
}

// Stats implements route.Router: redirects followed, refreshes, the map in
// use, the dedicated connections.
func (r poolRouter) Stats() []route.Stat {
	return append(r.c.Counters(), r.ded.Counters()...)
}

// Counters implements kind.CounterSource: Stats as the pool's router
// counters and gauges.
func (c *Cluster) Counters() []route.Stat {
	st := c.Stats()
	ready, age := int64(0), int64(-1)
	if st.Ready {
		ready = 1
	}
	if !st.LastRefresh.IsZero() {
		age = int64(time.Since(st.LastRefresh) / time.Second)
	}
	ct, g := route.Counter, route.Gauge
	return []route.Stat{
		{Name: "cluster_moved", Kind: ct, Value: st.Moved, Help: "MOVED replies followed."},
		{Name: "cluster_ask", Kind: ct, Value: st.Ask, Help: "ASK replies followed."},
		{Name: "cluster_tryagain", Kind: ct, Value: st.TryAgain, Help: "TRYAGAIN replies retried."},
		{Name: "cluster_clusterdown", Kind: ct, Value: st.ClusterDown, Help: "CLUSTERDOWN replies from nodes, passed to clients."},
		{Name: "cluster_redirect_limit", Kind: ct, Value: st.RedirectLimit, Help: "Requests failed after too many redirects."},
		{Name: "cluster_bad_redirect", Kind: ct, Value: st.BadRedirect, Help: "Malformed MOVED or ASK replies, passed to clients."},
		{Name: "cluster_crossslot", Kind: ct, Value: st.CrossSlot, Help: "Requests refused with CROSSSLOT."},
		{Name: "cluster_failed", Kind: ct, Value: st.Failed, Help: "Requests (and parts of split ones) answered with an error of the proxy's own."},
		{Name: "cluster_fragments", Kind: ct, Value: st.Fragments, Help: "Per-slot parts of split multi-key requests."},
		{Name: "cluster_refreshes", Kind: ct, Value: st.Refreshes, Help: "Slot maps read."},
		{Name: "cluster_refresh_failures", Kind: ct, Value: st.RefreshFailures, Help: "Refreshes in which no node gave a slot map."},
		{Name: "cluster_ready", Kind: g, Value: ready, Help: "1 once a slot map is in use."},
		{Name: "cluster_shards", Kind: g, Value: int64(st.Shards), Help: "Shards in the slot map in use."},
		{Name: "cluster_masters", Kind: g, Value: int64(st.Masters), Help: "Masters in the slot map in use."},
		{Name: "cluster_slots_covered", Kind: g, Value: int64(st.SlotsCovered), Help: "Slots with an owner in the slot map in use."},
		{Name: "cluster_nodes", Kind: g, Value: int64(st.Nodes), Help: "Node backends the slot map uses."},
		{Name: "cluster_slot_map_age_seconds", Kind: g, Value: age, Help: "Seconds since the slot map in use was read from a node; -1 before the first."},
	}
}

// newPoolRouter builds the router of a redis_cluster pool: its servers
// are the seeds, and its timeout, connect_timeout, server_connections,
// server_failure_limit, server_retry_timeout, tcpkeepalive, preconnect and
// redis_auth apply to every node. A reload starts from the running pool's
// slot map, so no request waits for the new pool's first refresh, and
// nodes both maps use keep their backends (the pool's lease).
func newPoolRouter(k *kind.Env) (route.Router, error) {
	pc := k.Pool
	k.Limits.ServerInfo = true // INFO merges the masters' sections
	k.Limits.Keyspace = true   // SCAN walks the masters, KEYS ... fan out
	k.Limits.ServerConfig = pc.AllowRedisConfig
	k.Limits.DedicatedScripts = pc.RedisScripts == config.RedisScriptsDedicated
	readFrom, err := ParseReadFrom(pc.ReadFrom)
	if err != nil {
		return nil, err
	}
	seeds := make([]string, len(pc.Servers))
	for i, s := range pc.Servers {
		seeds[i] = s.Addr
	}
	node := k.BackendConfig("")
	node.Handshake = codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser}
	node.Logger = nil
	if !pc.IsSet("server_retry_timeout") {
		node.RetryTimeout = clusterRetryTimeout
	}
	cfg := Config{
		Seeds:           seeds,
		ReadFrom:        readFrom,
		RefreshInterval: pc.ClusterRefresh,
		Node:            node,
		Backends:        k.Lease,
		Logger:          k.Log,
	}
	if old, ok := k.Old.(poolRouter); ok {
		cfg.Start = old.c.Map()
		cfg.StartRead = old.c.Stats().LastRefresh
	}
	if k.Check { // New would start reading the slot map from the seeds
		return kind.Checked{}, cfg.Validate()
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	rc := k.Counters
	rc.Add(c)
	ded := kind.NewDedicatedPool(pc.BlockingConnections)
	rc.Add(ded)
	return poolRouter{c: c, ded: ded, rc: rc}, nil
}
