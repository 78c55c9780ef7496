package shard

import (
	"crypto/tls"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/cluster"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/route"
	"shardproxy/sentinel"
)

// A sharded redis pool with read_from prefer_replica or replica sends the
// read-only commands (cluster.ReadOnly, scripts excepted) of a shard to
// one of the shard's replicas: those of the replicas key, or those its
// Sentinels name. The shard is picked by the key as always; read_from only
// picks which server of the shard answers. Writes, scripts, keyless and
// every-server commands, and a pinned client's commands (the proxy's pin.go) go to the
// master.
//
// A replica serves reads while its last check passed (ROLE says slave,
// link to the master connected; every health_check_interval) and its
// backend is not marked bad (server_failure_limit failures in a row).
// With health_check_interval 0 only the second holds.

// replicaBase numbers a replicaTable's replicas for FanOut: number
// replicaBase+i is flat[i]; numbers below it are the router's (pick's).
const replicaBase = 1 << 30

// The states of a replica's last check.
const (
	replicaUnchecked int32 = iota
	replicaUp
	replicaDown
)

// replica is one replica of one shard.
type replica struct {
	b      *backend.Backend // its address is the replica's
	slot   int              // the shard's place in the router's table
	weight int
	listed bool         // from the replicas key, not a Sentinel
	state  atomic.Int32 // replicaUnchecked, replicaUp, replicaDown
}

// usable reports whether r may serve a read now.
func (r *replica) usable() bool { return r.state.Load() == replicaUp && !r.b.Bad() }

// replicaTable is the replicas in use; it is replaced whole, never
// changed, when a Sentinel names others. As a route.Backends it numbers
// both the router's servers and, from replicaBase, the replicas.
type replicaTable struct {
	r     *router
	flat  []*replica
	slots [][]int // slot -> indexes in flat
	total []int   // slot -> sum of the weights of its replicas
}

var _ route.Backends = (*replicaTable)(nil)

// Backend implements route.Backends.
func (t *replicaTable) Backend(i int) *backend.Backend {
	if i >= replicaBase {
		return t.flat[i-replicaBase].b
	}
	return t.r.Backend(i)
}

// newReplicaTable indexes flat by slot; n is the number of slots.
func newReplicaTable(r *router, flat []*replica, n int) *replicaTable {
	t := &replicaTable{r: r, flat: flat, slots: make([][]int, n), total: make([]int, n)}
	for i, rep := range flat {
		t.slots[rep.slot] = append(t.slots[rep.slot], i)
		t.total[rep.slot] += rep.weight
	}
	return t
}

// pick returns the index in flat of a usable replica of slot (a shard's,
// not the failover pool's: target sees to that), or -1. The client's hint
// picks where to start, each replica taking its weight's share of the
// hints; the next usable one after it serves.
func (t *replicaTable) pick(slot int, hint uint32) int {
	if len(t.slots[slot]) == 0 {
		return -1
	}
	idx := t.slots[slot]
	w, start := int(hint%uint32(t.total[slot])), 0
	for start < len(idx)-1 && w >= t.flat[idx[start]].weight {
		w -= t.flat[idx[start]].weight
		start++
	}
	for i := range idx {
		if j := idx[(start+i)%len(idx)]; t.flat[j].usable() {
			return j
		}
	}
	return -1
}

// replicaSet holds a router's replicas and checks them.
type replicaSet struct {
	r      *router
	from   cluster.ReadFrom
	lease  *backend.Lease
	tmpl   backend.Config // a replica's backend, but for Addr and Name
	prober *sentinel.Prober
	every  time.Duration // health_check_interval; 0: no checks
	log    *slog.Logger
	tab    atomic.Pointer[replicaTable]

	mu     sync.Mutex   // serializes table changes
	listed map[int]bool // slots whose replicas the file lists

	kick chan struct{} // asks for a check now; capacity 1
	stop chan struct{}
	wg   sync.WaitGroup

	reads, fallbacks, refused, checkFails atomic.Int64
}

// startReplicas gives r its replicas when the pool reads from them: the
// listed ones now, a Sentinel's as it names them. A reload keeps the
// running router's learnt replicas and every replica's last check, so
// reads go on where they went; a new replica is checked before the pool
// serves (within health_check_timeout).
func (r *router) startReplicas(k *kind.Env) error {
	pc := k.Pool
	from, err := cluster.ParseReadFrom(pc.ReadFrom)
	if err != nil || from == cluster.ReadMaster { // "" is master
		return err
	}
	s := newReplicaSet(r, k, from)
	s.tab.Store(newReplicaTable(r, s.initial(pc, asShard(k.Old)), len(r.shard.Servers())))
	r.replicas = s
	if k.Check {
		return nil
	}
	s.start(pc, k.DialTLS)
	r.rc.Add(s) // retired when the router closes
	return nil
}

// newReplicaSet returns r's replica set, reading from, without replicas
// yet.
func newReplicaSet(r *router, k *kind.Env, from cluster.ReadFrom) *replicaSet {
	pc := k.Pool
	s := &replicaSet{
		r: r, from: from, lease: k.Lease, every: pc.HealthCheckInterval, log: k.Log,
		listed: map[int]bool{}, kick: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	s.tmpl = k.BackendConfig("")
	if !pc.IsSet("server_retry_timeout") && s.every > 0 {
		// The checks guard a replica coming back, so it need not fail
		// fast for twemproxy's 30s.
		s.tmpl.RetryTimeout = s.every
	}
	return s
}

// initial returns the replicas s starts with: the ones pc lists and, in
// a pool with sentinels, the running router o's Sentinel replicas of
// shards still here and still without listed ones, until the Sentinels
// answer. A replica o has at the same address hands on its last check.
func (s *replicaSet) initial(pc *config.Pool, o *router) []*replica {
	slotOf := map[string]int{}
	for i, ss := range s.r.shard.Servers() {
		slotOf[ss.Name] = i
	}
	running, old := runningReplicas(o)
	var flat []*replica
	for _, rc := range pc.Replicas {
		slot := slotOf[rc.Shard]
		s.listed[slot] = true
		flat = append(flat, s.newReplica(rc.Addr, slot, rc.Weight, true, old[rc.Addr]))
	}
	if len(pc.Sentinels) == 0 || old == nil {
		return flat
	}
	for _, rep := range running {
		slot, ok := slotOf[o.shard.Servers()[rep.slot].Name]
		if !rep.listed && ok && !s.listed[slot] {
			flat = append(flat, s.newReplica(rep.b.Addr(), slot, 1, false, rep))
		}
	}
	return flat
}

// runningReplicas returns the replicas of o, the running router, from
// one snapshot of its table (its Sentinel may replace the table while
// the new one is built), and them by address; nil when o reads none.
func runningReplicas(o *router) ([]*replica, map[string]*replica) {
	if o == nil || o.replicas == nil {
		return nil, nil
	}
	running := o.replicas.tab.Load().flat
	old := map[string]*replica{}
	for _, rep := range running {
		old[rep.b.Addr()] = rep
	}
	return running, old
}

// start checks the replicas never checked, within health_check_timeout,
// and then every replica each health_check_interval (none when it is 0).
func (s *replicaSet) start(pc *config.Pool, dialTLS *tls.Config) {
	auth := sentinel.Auth{Username: pc.RedisAuthUser, Password: pc.RedisAuth}
	s.prober = sentinel.NewProber(auth, dialTLS, pc.HealthCheckTimeout)
	if s.every > 0 {
		s.checkAll(true)
		s.wg.Add(1)
		go s.run()
	}
}

// newReplica takes a backend for addr; prev, a running router's replica
// at the same address, hands on its last check.
func (s *replicaSet) newReplica(addr string, slot, weight int, listed bool, prev *replica) *replica {
	cfg := s.tmpl
	cfg.Addr, cfg.Name = addr, addr
	rep := &replica{b: s.lease.Get(cfg), slot: slot, weight: weight, listed: listed}
	switch {
	case s.every <= 0:
		rep.state.Store(replicaUp) // no checks: the backend's failures alone
	case prev != nil:
		rep.state.Store(prev.state.Load())
	}
	return rep
}

// run checks every replica every interval, and at once when kicked.
func (s *replicaSet) run() {
	defer s.wg.Done()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
		s.checkAll(false)
	}
}

// checkAll checks the replicas of the table in use, all at once, each
// within health_check_timeout; fresh checks only those never checked.
func (s *replicaSet) checkAll(fresh bool) {
	var wg sync.WaitGroup
	for _, rep := range s.tab.Load().flat {
		if fresh && rep.state.Load() != replicaUnchecked {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.check(rep)
		}()
	}
	wg.Wait()
}

// check asks rep's server whether it is a replica with its link up, and
// logs a change.
func (s *replicaSet) check(rep *replica) {
	addr := rep.b.Addr()
	err := s.prober.CheckReplica(addr)
	shard := s.r.shard.Servers()[rep.slot].Name
	if err == nil {
		if rep.state.Swap(replicaUp) != replicaUp {
			s.log.Info("replica usable", "server", addr, "shard", shard)
		}
		return
	}
	s.checkFails.Add(1)
	if rep.state.Swap(replicaDown) != replicaDown {
		s.log.Warn("replica skipped", "server", addr, "shard", shard, "err", err)
	}
}

// learnt is a Sentinel's list of the replicas of the shards in slots
// (sentinelShards.replicas): shards with listed replicas keep them;
// the others get these, a replica they had keeping its backend and last
// check, a new one checked at once. It runs on the Sentinel monitor's
// goroutine and does not block.
func (s *replicaSet) learnt(slots []int, addrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.tab.Load()
	var flat, gone []*replica
	mine := map[int]bool{}
	for _, slot := range slots {
		mine[slot] = !s.listed[slot]
	}
	for _, rep := range old.flat {
		if !mine[rep.slot] {
			flat = append(flat, rep)
		}
	}
	added := false
	for _, slot := range slots {
		if !mine[slot] {
			continue
		}
		for _, addr := range addrs {
			var kept *replica
			for _, j := range old.slots[slot] {
				if old.flat[j].b.Addr() == addr {
					kept = old.flat[j]
				}
			}
			if kept == nil {
				kept, added = s.newReplica(addr, slot, 1, false, nil), true
			}
			flat = append(flat, kept)
		}
		for _, j := range old.slots[slot] {
			if !slices.Contains(addrs, old.flat[j].b.Addr()) {
				gone = append(gone, old.flat[j])
			}
		}
	}
	s.tab.Store(newReplicaTable(s.r, flat, len(old.slots)))
	for _, rep := range gone {
		s.prober.Forget(rep.b.Addr())
		s.lease.Put(rep.b)
	}
	if added {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// target returns the number of the server that serves a read of slot
// (a number of pick's) for a client with hint: a replica's, from
// replicaBase, or slot itself for the master. It returns a refusal when
// read_from is replica and no replica of the shard is usable.
func (s *replicaSet) target(t *replicaTable, slot int, hint uint32) (int, string) {
	if slot >= len(t.slots) { // the failover pool's
		return slot, ""
	}
	if j := t.pick(slot, hint); j >= 0 {
		s.reads.Add(1)
		return replicaBase + j, ""
	}
	if s.from == cluster.ReadReplica {
		s.refused.Add(1)
		return 0, "no healthy replica serves shard " + s.r.shard.Servers()[slot].Name + " (read_from: replica)"
	}
	s.fallbacks.Add(1)
	return slot, ""
}

// backends are the replicas' backends, for the stats.
func (s *replicaSet) backends() []*backend.Backend {
	t := s.tab.Load()
	bs := make([]*backend.Backend, len(t.flat))
	for i, rep := range t.flat {
		bs[i] = rep.b
	}
	return bs
}

func (s *replicaSet) close() {
	close(s.stop)
	s.wg.Wait()
	if s.prober != nil {
		s.prober.Close()
	}
}

// counters are the replica counters of the pool's router; as a
// kind.CounterSource, they outlive the router (kind.Counters).
func (s *replicaSet) Counters() []route.Stat {
	usable := 0
	t := s.tab.Load()
	for _, rep := range t.flat {
		if rep.usable() {
			usable++
		}
	}
	c, g := route.Counter, route.Gauge
	return []route.Stat{
		{Name: "replica_reads", Kind: c, Value: s.reads.Load(), Help: "Read-only requests (or parts of split ones) sent to a replica."},
		{Name: "replica_fallbacks", Kind: c, Value: s.fallbacks.Load(), Help: "Reads sent to the master under read_from prefer_replica because no replica of the shard was usable."},
		{Name: "replica_refused", Kind: c, Value: s.refused.Load(), Help: "Reads refused under read_from replica because no replica of the shard was usable."},
		{Name: "replica_check_failures", Kind: c, Value: s.checkFails.Load(), Help: "Replica checks that found the server down, not a replica, or its link to the master down."},
		{Name: "replicas", Kind: g, Value: int64(len(t.flat)), Help: "Replicas the pool may read from."},
		{Name: "replicas_usable", Kind: g, Value: int64(usable), Help: "Replicas that passed their last check and are not marked bad."},
	}
}

// isRead reports whether a request named name may go to a replica: a
// command redis-server flags read-only, but for the scripts (EVAL_RO,
// FCALL_RO), which go to the master as every script does.
func isRead(name string) bool {
	return cluster.ReadOnly(name) && !strings.HasPrefix(name, "eval") && !strings.HasPrefix(name, "fcall")
}
