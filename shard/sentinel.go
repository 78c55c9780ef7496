package shard

import (
	"sync"
	"time"

	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/route"
	"shardproxy/sentinel"
)

// sentinelRetryTimeout is how long a master that failed
// server_failure_limit times in a row fails fast when the file does not set
// server_retry_timeout: a shard's keys never move, so twemproxy's 30s would
// leave them failing long after a restart; a failover replaces the backend
// anyway.
const sentinelRetryTimeout = time.Second

// sentinelShards follows the masters of a sharded redis pool whose servers
// lines name Sentinel masters: a sentinel.Monitor reports each master's
// address, and switched puts a backend for it in the router's table, in
// the slot of every shard that names the master. The shard's name, and so
// its keys, never change; requests routed before the switch finish (or
// fail) on the old backend, which the lease closes once they are done.
type sentinelShards struct {
	r     *router
	lease *backend.Lease
	mon   *sentinel.Monitor // nil in a configuration check
	all   []int             // every slot, for RouteAll's check

	mu    sync.Mutex       // serializes table changes; guards mon
	tmpl  backend.Config   // a shard's backend, but for Addr and Name
	slots map[string][]int // master name -> slots in the table
	names []string         // slot -> shard name
}

// startSentinel fills r's table for a pool with sentinels and starts
// following the masters. A reload starts from the running router's
// addresses, so kept shards keep their backends and no request waits;
// a fresh start waits (up to twice connect_timeout, at least a second) for
// the Sentinels to name every master, and then serves anyway: a shard
// still unknown answers "no master known" until a Sentinel names it.
func (r *router) startSentinel(k *kind.Env, byName map[string]config.Server) error {
	pc := k.Pool
	s := &sentinelShards{r: r, lease: k.Lease, slots: map[string][]int{}}
	r.sentinel = s
	s.tmpl = k.BackendConfig("")
	if !pc.IsSet("server_retry_timeout") {
		s.tmpl.RetryTimeout = sentinelRetryTimeout
	}
	var start map[string]string
	if old := asShard(k.Old); old != nil && old.sentinel != nil && old.sentinel.mon != nil {
		start = old.sentinel.mon.Addrs()
	}
	var masters []string
	table := make([]*backend.Backend, 0, len(pc.Servers))
	for i, ss := range r.shard.Servers() {
		srv := byName[ss.Name]
		if s.slots[srv.Master] == nil {
			masters = append(masters, srv.Master)
		}
		s.slots[srv.Master] = append(s.slots[srv.Master], i)
		s.names = append(s.names, srv.Name)
		s.all = append(s.all, i)
		var b *backend.Backend
		if addr := start[srv.Master]; addr != "" {
			b = s.lease.Get(s.config(i, addr))
		}
		table = append(table, b)
	}
	r.table.Store(&table)
	k.Watch(s.stateChanged)
	if k.Check {
		return nil
	}
	mc := sentinel.Config{
		Sentinels:  pc.Sentinels,
		Masters:    masters,
		Auth:       sentinel.Auth{Username: pc.SentinelAuthUser, Password: pc.SentinelAuth},
		ServerAuth: sentinel.Auth{Username: pc.RedisAuthUser, Password: pc.RedisAuth},
		ServerTLS:  k.DialTLS,
		Timeout:    pc.ConnectTimeout,
		Start:      start,
		OnSwitch:   s.switched,
		Logger:     k.Log,
	}
	if r.replicas != nil {
		mc.OnReplicas = s.replicasNamed
	}
	mon, err := sentinel.New(mc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.mon = mon
	s.mu.Unlock()
	r.rc.Add(s) // retired when the router closes
	if len(start) < len(masters) {
		mon.Wait(max(2*pc.ConnectTimeout, time.Second))
	}
	return nil
}

// config is the backend of slot i at addr.
func (s *sentinelShards) config(i int, addr string) backend.Config {
	cfg := s.tmpl
	cfg.Addr = addr
	cfg.Name = s.names[i]
	return cfg
}

// switched is the Monitor's OnSwitch: every slot of master gets a backend
// at addr, and the one it replaces goes back to the lease, which closes
// it once its requests in flight are answered. A request sent to the old
// master is not sent again: it may have run there.
func (s *sentinelShards) switched(master, addr, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.r.backends()
	table := append([]*backend.Backend(nil), old...)
	for _, i := range s.slots[master] {
		table[i] = s.lease.Get(s.config(i, addr))
	}
	s.r.table.Store(&table)
	for _, i := range s.slots[master] {
		if old[i] != nil {
			s.lease.Put(old[i])
		}
	}
}

// replicasNamed is the Monitor's OnReplicas: the replicas of every
// shard that names master, unless the file lists the shard's own.
func (s *sentinelShards) replicasNamed(master string, addrs []string) {
	s.r.replicas.learnt(s.slots[master], addrs)
}

// stateChanged asks the Sentinels again when one of the pool's masters is
// marked bad: a failover may have happened whose event was missed.
func (s *sentinelShards) stateChanged(b *backend.Backend, bad bool) {
	if !bad {
		return
	}
	for _, pb := range s.r.backends() {
		if pb == b {
			s.mu.Lock()
			mon := s.mon
			s.mu.Unlock()
			if mon != nil {
				mon.Refresh()
			}
			return
		}
	}
}

func (s *sentinelShards) close() {
	s.mu.Lock()
	mon := s.mon
	s.mu.Unlock()
	if mon != nil {
		mon.Close()
	}
}

// counters are the Sentinel counters of the pool's router; as a
// kind.CounterSource, they outlive the router (kind.Counters).
func (s *sentinelShards) Counters() []route.Stat {
	s.mu.Lock()
	mon := s.mon
	s.mu.Unlock()
	if mon == nil {
		return nil
	}
	st := mon.Stats()
	c, g := route.Counter, route.Gauge
	return []route.Stat{
		{Name: "sentinel_switches", Kind: c, Value: st.Switches, Help: "Shards moved to a new master (a Sentinel failover followed)."},
		{Name: "sentinel_events", Kind: c, Value: st.Events, Help: "+switch-master events received from Sentinels for the pool's masters."},
		{Name: "sentinel_rejected", Kind: c, Value: st.Rejected, Help: "Master addresses refused because the server did not answer ROLE master."},
		{Name: "sentinel_queries", Kind: c, Value: st.Queries, Help: "get-master-addr-by-name requests sent to Sentinels."},
		{Name: "sentinel_query_failures", Kind: c, Value: st.QueryFailures, Help: "Sentinel requests that got no address (Sentinel down, error, unknown master)."},
		{Name: "sentinel_subscribed", Kind: g, Value: st.Subscribed, Help: "Sentinels whose +switch-master events the pool receives now."},
		{Name: "sentinel_masters_known", Kind: g, Value: int64(st.Known), Help: "Masters whose address is known."},
	}
}
