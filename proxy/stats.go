package proxy

import (
	"time"

	"shardproxy/backend"
	"shardproxy/cluster"
	"shardproxy/config"
	"shardproxy/observe"
	"shardproxy/route"
)

// Stats is a point-in-time copy of the proxy's counters. Field names follow
// twemproxy's stats (src/nc_stats.h); the extra fields are shardproxy's.
type Stats struct {
	Version          string
	Start            time.Time
	Now              time.Time
	TotalConnections int64
	CurrConnections  int64
	Reloads          int64 // successful reloads
	ReloadFailures   int64 // reloads refused (parse, validate, bind)
	SplicedReplies   int64 // replies whose value was spliced, every pool (backend.SplicedReplies)
	// Fleet is the fleet's state as SetFleetState last set it; nil
	// without a fleet.
	Fleet *FleetState
	// Drain is the drain's state and totals (Drain).
	Drain DrainStats
	// Tap are the tap's counters: subscribers, lines, lines dropped.
	Tap   observe.TapStats
	Pools []PoolStats
}

// PoolStats are one pool's counters, pools in twemproxy's order.
type PoolStats struct {
	Name              string
	Protocol          string // dialect name: "memcache", "redis"
	ClientEOF         int64
	ClientErr         int64
	ClientConnections int64
	ServerEjects      int64 // over every server the pool had, as Latency
	ForwardError      int64
	Fragments         int64
	// Extras.
	Kind           string // the pool's kind: "sharded", "redis_cluster", "lua"
	Requests       int64
	ProtocolErrors int64
	// Latency adds up the latency of every server the pool had since it
	// was configured, removed ones included, so it never goes backwards.
	Latency LatencySnapshot
	// Router are the counters of the pool's router (a cluster's redirects,
	// a Lua route's requests); none for a sharded pool.
	Router []RouterStat
	// Source are the counters of where the pool's servers come from
	// (servers_from: dns_resolutions, ...), from Server.SetSourceStats;
	// none for a pool whose servers are its file's.
	Source []RouterStat
	// Slots are a Redis Cluster pool's slot owners from the slot map in
	// use, in slot order; nil for other pools and before the first map.
	Slots []SlotRange
	// Ring is what a ring pool under a fleet runs (Rings); nil for other
	// pools.
	Ring    *Ring
	Servers []ServerStats
	// Commands is the latency of each command the pool's clients sent,
	// from read to written, by command name (observe.Commands).
	Commands []observe.CommandLatency
	// SlowRequests counts the requests the pool's slowlog took, over its
	// life (observe.Slowlog.Added).
	SlowRequests int64
	// HotKeys are the pool's most requested keys over the last
	// observe.HotWindow, most requested first; nil without hot_keys.
	HotKeys []observe.HotKey
}

// SlotRange is a run of consecutive Redis Cluster slots one master serves.
type SlotRange struct {
	First, Last int    // slots, inclusive
	Master      string // the master's address, as its server's Addr
}

// RouterStat is one of a router's counters.
type RouterStat = route.Stat

// The kinds of RouterStat.
const (
	RouterCounter = route.Counter
	RouterGauge   = route.Gauge
)

// ServerStats are one backend's counters and state, servers in
// twemproxy's order (by name). The counters add up every backend the
// pool has had under the server's name (a reload that changed the
// server's options made a new one; one that removed it and one that
// added it back), so they never go backwards; the gauges
// (ServerConnections, InQueue, OutQueue) and State are the live
// backend's.
type ServerStats struct {
	Name              string
	Addr              string
	ServerEOF         int64
	ServerErr         int64
	ServerTimedout    int64
	ServerConnections int64
	ServerEjectedAt   int64 // unix micros; 0 if never
	Requests          int64
	RequestBytes      int64
	Responses         int64
	ResponseBytes     int64
	InQueue           int64
	InQueueBytes      int64
	OutQueue          int64
	OutQueueBytes     int64
	// Extras.
	Ejects   int64
	Failures int64 // socket failures, all causes
	// Moved, Ask and TryAgain count the Redis Cluster replies of those
	// kinds the server sent (a redis_cluster pool's; 0 for any other).
	Moved, Ask, TryAgain int64
	// Probes counts the probes of the server while it was bad,
	// ProbeFailures those that failed, Restores the times a probe
	// brought it back; IdleChecks the checks of its idle sockets,
	// IdleReplaced the sockets dropped by a failed check
	// (health_check_interval).
	Probes, ProbeFailures, Restores, IdleChecks, IdleReplaced int64
	State                                                     backend.State
	Latency                                                   LatencySnapshot
}

// LatencyBuckets are the upper bounds of LatencySnapshot's buckets.
var LatencyBuckets = backend.LatencyBuckets

// LatencySnapshot is a copy of a backend.Histogram: Counts[i] counts
// replies no slower than backend.LatencyBuckets[i], the last one the rest.
type LatencySnapshot struct {
	Counts [len(backend.LatencyBuckets) + 1]int64
	Sum    time.Duration
}

// Stats returns the counters now.
func (s *Server) Stats() Stats {
	st := Stats{
		Version:          s.version,
		Start:            s.start,
		Now:              time.Now(),
		TotalConnections: s.totalConns.Load(),
		CurrConnections:  s.currConns.Load(),
		Reloads:          s.reloads.Load(),
		ReloadFailures:   s.reloadFailures.Load(),
		SplicedReplies:   backend.SplicedReplies(),
		Fleet:            s.fleet.Load(),
		Drain:            s.drainStats(),
		Tap:              s.tap.Stats(),
	}
	for _, p := range s.currentPools() {
		st.Pools = append(st.Pools, p.snapshot())
	}
	return st
}

func (p *pool) snapshot() PoolStats {
	tot := p.srv.backends.Totals(p.cfg.Name)
	ps := PoolStats{
		Name:              p.cfg.Name,
		Protocol:          p.dialect.Name(),
		Kind:              string(p.cfg.Kind()),
		ClientEOF:         p.stats.ClientEOF.Load(),
		ClientErr:         p.stats.ClientErr.Load(),
		ClientConnections: p.stats.ClientConnections.Load(),
		ServerEjects:      tot.All.Ejects,
		ForwardError:      p.stats.ForwardError.Load(),
		Fragments:         p.stats.Fragments.Load(),
		Requests:          p.stats.Requests.Load(),
		Commands:          p.stats.obs.Commands.Snapshot(),
		SlowRequests:      p.stats.obs.Slowlog.Added(),
		HotKeys:           p.hotKeys(),
		ProtocolErrors:    p.stats.ProtocolErrors.Load(),
		Router:            p.routerStats(),
		Source:            p.srv.sourceStats(p.cfg.Name),
		Latency:           latencyOf(tot.All),
	}
	if cr, ok := p.router.(clustered); ok {
		ps.Slots = slotRanges(cr.Cluster())
	}
	ps.Ring = p.ring()
	for _, b := range p.router.Backends() {
		c, ok := tot.Of(b.Name())
		if !ok { // made after Totals read the registry
			c = b.Stats().Counts()
		}
		bs := b.Stats()
		ps.Servers = append(ps.Servers, ServerStats{
			Name:              b.Name(),
			Addr:              b.Addr(),
			ServerEOF:         c.EOF,
			ServerErr:         c.Errors,
			ServerTimedout:    c.Timeouts,
			ServerConnections: bs.Connections.Load(),
			ServerEjectedAt:   bs.EjectedAt.Load(),
			Requests:          c.Requests,
			RequestBytes:      c.RequestBytes,
			Responses:         c.Responses,
			ResponseBytes:     c.ResponseBytes,
			InQueue:           bs.InQueue.Load(),
			OutQueue:          bs.OutQueue.Load(),
			Ejects:            c.Ejects,
			Failures:          c.Failures,
			Moved:             c.Moved,
			Ask:               c.Ask,
			TryAgain:          c.TryAgain,
			Probes:            c.Probes,
			ProbeFailures:     c.ProbeFailures,
			Restores:          c.Restores,
			IdleChecks:        c.IdleChecks,
			IdleReplaced:      c.IdleReplaced,
			State:             b.State(),
			Latency:           latencyOf(c),
		})
	}
	return ps
}

// clustered is a router that routes by a Redis Cluster's slot map (the
// redis_cluster kind's).
type clustered interface {
	Cluster() *cluster.Cluster
}

// slotRanges returns the owners of c's slot map in use, nil before the
// first.
func slotRanges(c *cluster.Cluster) []SlotRange {
	m := c.Map()
	if m == nil {
		return nil
	}
	runs := m.Runs()
	out := make([]SlotRange, len(runs))
	for i, run := range runs {
		out[i] = SlotRange{First: run.First, Last: run.Last, Master: m.Shards[run.Shard].Master.Addr}
	}
	return out
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
	r, ok := p.router.(clustered)
	if !ok {
		return cluster.Stats{}, false
	}
	return r.Cluster().Stats(), true
}

// latencyOf is c's latency histogram.
func latencyOf(c backend.Counts) LatencySnapshot {
	return LatencySnapshot{Counts: c.Latency, Sum: time.Duration(c.LatencySum)}
}

// routerStats are the router's counters, each whole across the reloads
// that replaced what counts it (kind.Counters), and its gauges now.
func (p *pool) routerStats() []RouterStat { return p.stats.router.Apply(p.router.Stats()) }

// Info describes the running configuration.
type Info struct {
	Config   *config.Config
	Source   string
	Checksum string // of the loaded configuration: every pool and the admin section
	LoadedAt time.Time
}
