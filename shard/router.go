package shard

import (
	"bytes"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/route"
	"shardproxy/sharding"
)

// router routes a native pool (twemproxy's kind): each key goes to
// the server its hash picks in the pool's distribution; multi-key requests
// are split per server and merged. Under auto_eject_hosts a bad server
// leaves the distribution (eject_policy remap) or hands its keys to the
// failover pool (eject_policy failover); under a fleet, a remap pool's
// servers leave and return only as the fleet's ring says (ring.go). A
// pool with sentinels follows its shards' masters (sentinel.go): a
// shard's backend is replaced when Sentinel promotes another server, and
// its keys stay on the shard. A redis pool with read_from sends a shard's
// reads to its replicas (replica.go).
type router struct {
	cfg     *config.Pool
	dialect codec.Dialect
	// The pool's counters of the parts of split requests and of the
	// requests answered with an error of the router's own.
	fragments, forwardErrors *atomic.Int64
	shard                    *sharding.Pool
	shardCfg                 sharding.Config // what shard was built from; a reload reuses an equal one
	// table holds the backends in shard.Servers() order. It is replaced
	// whole (never changed in place) when Sentinel moves a shard; in a
	// pool with sentinels an entry is nil until the shard's master is
	// known, and never nil again after.
	table    atomic.Pointer[[]*backend.Backend]
	failover *router         // eject_policy failover: takes a bad server's keys
	sentinel *sentinelShards // the pool's masters through Sentinel, or nil
	replicas *replicaSet     // read_from prefer_replica or replica: the shards' replicas (replica.go); else nil
	log      *slog.Logger
	ring     *ringState          // a ring pool's under a fleet (ring.go); else nil
	ded      *kind.DedicatedPool // a Redis pool's dedicated connections; nil for memcached
	rc       *kind.Counters      // the pool's, which counts ded until it closes
	spool    *deleteSpool        // delete_spool's (spool.go); else nil
	// home is the pool's distribution with every server in it, which
	// names a key's own server while the pool's may have ejected it: a
	// spool's pool that ejects (spool.go); else nil.
	home     *sharding.Pool
	tapSpool func(*route.Exchange, *backend.Call) // spooled, bound once
}

var (
	_ route.Router    = (*router)(nil)
	_ route.Backends  = (*router)(nil)
	_ kind.MetaProber = (*router)(nil)
)

// newRouter builds a native pool's router. A reload reuses the
// running router's distribution when it is built from the same servers.
// A pool with near_cache gets its router wrapped in a nearRouter.
func newRouter(k *kind.Env) (route.Router, error) {
	pc := k.Pool
	k.Limits.ServerInfo = true // INFO merges the servers' sections
	k.Limits.Keyspace = true   // SCAN walks the servers, KEYS ... fan out
	k.Limits.ServerConfig = pc.Redis && pc.AllowRedisConfig
	k.Limits.ClusterView = pc.Redis && pc.RedisClusterView
	k.Limits.DedicatedScripts = pc.Redis && pc.RedisScripts == config.RedisScriptsDedicated
	r, byName := makeRouter(k)
	if err := r.distribute(asShard(k.Old)); err != nil {
		return nil, err
	}
	r.followRing(k)
	if err := r.startSpool(k); err != nil {
		return nil, err
	}
	if err := r.startReplicas(k); err != nil {
		return nil, err
	}
	if len(pc.Sentinels) > 0 {
		if err := r.startSentinel(k, byName); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
	r.startServers(k, byName)
	if pc.NearCache > 0 {
		return newNearRouter(r, k.Old, pc, k.Counters, k.Hot), nil
	}
	return r, nil
}

// makeRouter returns the router of k's pool, with its distribution's
// configuration but no distribution nor backends yet, and the pool's
// servers by name. A Redis pool's router gets its dedicated connections.
func makeRouter(k *kind.Env) (*router, map[string]config.Server) {
	pc := k.Pool
	servers := make([]sharding.Server, len(pc.Servers))
	byName := make(map[string]config.Server, len(pc.Servers))
	for i, s := range pc.Servers {
		servers[i] = sharding.Server{Name: s.Name, Weight: s.Weight}
		byName[s.Name] = s
	}
	r := &router{
		cfg:           pc,
		dialect:       k.Dialect,
		fragments:     k.Fragments,
		forwardErrors: k.ForwardErrors,
		log:           k.Log,
		shardCfg: sharding.Config{
			Servers:      servers,
			Hash:         pc.Hash,
			HashTag:      pc.HashTag,
			Distribution: pc.Distribution,
			AutoEject:    pc.AutoEjectHosts,
			Seed:         pc.HashSeed,
		},
	}
	if pc.Redis {
		r.ded = kind.NewDedicatedPool(pc.BlockingConnections)
		r.rc = k.Counters
		r.rc.Add(r.ded)
	}
	return r, byName
}

// distribute gives r its distribution: old's, the running router's, when
// it was built from the same configuration (building a ketama ring is
// the costly part of a reload), else a new one.
func (r *router) distribute(old *router) error {
	if old != nil && reflect.DeepEqual(old.shardCfg, r.shardCfg) {
		r.shard = old.shard
		return nil
	}
	var err error
	r.shard, err = sharding.New(r.shardCfg)
	return err
}

// startServers fills r's table for a pool without sentinels, a backend
// per server from the lease, matches the distribution to their health,
// and asks to hear of their state and of the failover pool.
func (r *router) startServers(k *kind.Env, byName map[string]config.Server) {
	pc := k.Pool
	backends := make([]*backend.Backend, 0, len(pc.Servers))
	for _, ss := range r.shard.Servers() {
		s := byName[ss.Name]
		cfg := k.BackendConfig(s.Addr)
		cfg.Name = s.Name
		if r.spool != nil {
			cfg.Replay = r.spool
		}
		if r.probesMeta() {
			autoMeta(&cfg, k.OnMeta)
		}
		backends = append(backends, k.Lease.Get(cfg))
	}
	r.table.Store(&backends)
	if r.ring == nil {
		r.matchHealth(backends)
	}
	k.Watch(r.stateChanged)
	k.Link(func(routers map[string]route.Router) {
		if pc.EjectPolicy == config.EjectFailover {
			r.failover = asShard(routers[pc.FailoverPool])
		}
	})
}

// matchHealth makes the distribution's live set match the health of
// backends: a kept backend may be ejected now, a new one is healthy.
func (r *router) matchHealth(backends []*backend.Backend) {
	live := r.shard.Live()
	for i, b := range backends {
		switch bad := b.Bad() && r.ejects(); {
		case bad && live[i]:
			r.shard.Eject(i)
		case !bad && !live[i]:
			r.shard.Restore(i)
		}
	}
}

// ejects reports whether the pool takes bad servers out of its
// distribution: not when a fleet's ring decides (ring.go).
func (r *router) ejects() bool {
	return r.cfg.AutoEjectHosts && r.cfg.EjectPolicy == config.EjectRemap && r.ring == nil
}

// backends returns the backends now, in shard.Servers() order.
func (r *router) backends() []*backend.Backend { return *r.table.Load() }

// stateChanged ejects or restores b if this pool uses it and ejects.
func (r *router) stateChanged(b *backend.Backend, bad bool) {
	if !r.ejects() {
		return
	}
	for i, pb := range r.backends() {
		if pb != b {
			continue
		}
		if bad {
			r.shard.Eject(i)
			r.log.Warn("server ejected", "server", b.Name())
		} else {
			r.shard.Restore(i)
			r.log.Info("server restored", "server", b.Name())
		}
	}
}

// pick returns the number (for Backend) of the server that takes key.
// Under eject_policy failover, a bad server's keys go to the failover
// pool, whose servers are numbered after this pool's.
func (r *router) pick(key []byte) (int, error) {
	idx, err := r.shard.Pick(key)
	if err != nil {
		return 0, err
	}
	if r.failover != nil && r.backends()[idx].Bad() {
		j, err := r.failover.shard.Pick(key)
		if err != nil {
			return 0, err
		}
		return len(r.backends()) + j, nil
	}
	return idx, nil
}

// Backend implements route.Backends: server i as numbered by pick. It is
// nil for a shard of a pool with sentinels whose master is not known yet
// (see usable).
func (r *router) Backend(i int) *backend.Backend {
	bs := r.backends()
	if i < len(bs) {
		return bs[i]
	}
	return r.failover.Backend(i - len(bs))
}

// usable reports whether every server in targets has a backend, and
// answers x with an error when one has not: a shard of a pool with
// sentinels whose master no Sentinel has named yet. A backend once there
// stays (it is only ever replaced), so what usable saw holds when the
// request is sent.
func (r *router) usable(x *route.Exchange, targets ...int) bool {
	for _, i := range targets {
		if r.Backend(i) == nil {
			r.fail(x, r.noMaster(i))
			return false
		}
	}
	return true
}

// noMaster is the refusal of a request for shard i while no Sentinel has
// named its master.
func (r *router) noMaster(i int) string {
	return "no master known for shard " + r.shard.Servers()[i].Name + " (sentinel)"
}

// Route implements route.Router.
func (r *router) Route(x *route.Exchange) {
	switch x.Req.Route {
	case codec.RouteKey:
		r.routeKey(x)
	case codec.RouteMulti:
		r.routeMulti(x)
	case codec.RouteSame:
		r.routeSame(x)
	case codec.RouteAny:
		if i := int(x.Hint) % len(r.backends()); r.usable(x, i) {
			x.Send(r.Backend(i))
		}
	case codec.RouteAll:
		if r.sentinel == nil || r.usable(x, r.sentinel.all...) {
			if x.Tap == nil { // a near cache's flush has its own
				x.Tap = r.tapAll
			}
			x.FanOutAll(r, len(r.backends()))
		}
	case codec.RouteServer:
		r.routeServer(x)
	default:
		r.fail(x, "unroutable request")
	}
}

// routeKey sends x to the server of its first key and reports whether it
// did; when it did not, x is answered with the error.
func (r *router) routeKey(x *route.Exchange) bool {
	idx, err := r.pick(x.Req.Keys[0])
	if err != nil {
		r.fail(x, err.Error())
		return false
	}
	if !r.usable(x, idx) {
		return false
	}
	if r.spool != nil {
		r.spoolRouted(x, idx)
	}
	return r.send(x, idx)
}

// send sends x to the server that serves shard target for it: one of the
// shard's replicas for a read under read_from (readTable), else the
// shard's backend. It reports false when x was answered with a refusal
// instead (readTarget).
func (r *router) send(x *route.Exchange, target int) bool {
	if t := r.readTable(x); t != nil {
		n, ok := r.readTarget(t, x, target)
		if ok {
			x.Send(t.Backend(n))
		}
		return ok
	}
	x.Send(r.Backend(target))
	return true
}

// readTable returns the replicas x may be read from, or nil when x goes
// to its masters: the pool reads from masters, or x is no read.
func (r *router) readTable(x *route.Exchange) *replicaTable {
	if r.replicas == nil || !isRead(x.Req.Name) {
		return nil
	}
	return r.replicas.tab.Load()
}

// readTarget returns the server of t that serves x's read of target
// (replicaSet.target), or answers x with the refusal and returns false.
func (r *router) readTarget(t *replicaTable, x *route.Exchange, target int) (int, bool) {
	n, refusal := r.replicas.target(t, target, x.Hint)
	if refusal != "" {
		r.fail(x, refusal)
		return 0, false
	}
	return n, true
}

func (r *router) routeMulti(x *route.Exchange) {
	targets := x.KeyTargets()
	same := true
	for _, k := range x.Req.Keys {
		idx, err := r.pick(k)
		if err != nil {
			x.KeepKeyTargets(targets)
			r.fail(x, err.Error())
			return
		}
		if len(targets) > 0 && idx != targets[0] {
			same = false
		}
		targets = append(targets, idx)
	}
	x.KeepKeyTargets(targets)
	if !r.usable(x, targets...) {
		return
	}
	var bs route.Backends = r
	if t := r.readTable(x); t != nil {
		// Each run of a shard's keys goes to one server of the shard.
		bs = t
		prev, to := -1, 0
		for i, target := range targets {
			if target != prev {
				var ok bool
				if to, ok = r.readTarget(t, x, target); !ok {
					return
				}
				prev = target
			}
			targets[i] = to
		}
	}
	if same { // every key on one server: no need to split
		x.Send(bs.Backend(targets[0]))
		return
	}
	subs, subTargets := x.Split(r.dialect, targets)
	r.fragments.Add(int64(len(subs)))
	x.FanOut(bs, subTargets)
}

// routeSame sends x to the one backend that owns every key, or refuses it.
func (r *router) routeSame(x *route.Exchange) {
	target := -1
	for _, k := range x.Req.Keys {
		idx, err := r.pick(k)
		if err != nil {
			r.fail(x, err.Error())
			return
		}
		if target >= 0 && idx != target {
			r.forwardErrors.Add(1)
			x.Answer(r.dialect.AppendError(x.Out(), codec.ErrCrossServer,
				"keys in request don't hash to the same server"))
			return
		}
		target = idx
	}
	if target < 0 {
		target = int(x.Hint) % len(r.backends())
	}
	if !r.usable(x, target) {
		return
	}
	r.send(x, target)
}

// routeServer sends x to the server it names (a SCAN's cursor): this
// pool's servers in their order, never the failover pool's. A number past
// the last server is answered codec.ErrNoTarget.
func (r *router) routeServer(x *route.Exchange) {
	if x.Req.Target < 0 || x.Req.Target >= len(r.backends()) {
		x.Answer(r.dialect.AppendError(x.Out(), codec.ErrClient, codec.ErrNoTarget))
		return
	}
	x.Req.Servers = len(r.backends())
	x.Send(r.backends()[x.Req.Target])
}

// tapAll logs a server's failure or error reply to a request sent to
// every server (FLUSHALL, FUNCTION LOAD, KEYS, ...), naming the server:
// the client gets the error alone, and a change that some servers made
// and others did not leaves them different.
func (r *router) tapAll(x *route.Exchange, c *backend.Call) {
	if i := x.CallIndex(c); i >= 0 && i < len(r.backends()) {
		logFanOutError(r.log, x.Req.Name, r.backends()[i].Name(), c.Reply)
	}
}

// logFanOutError logs reply when it is a failure (Warn: the server is in
// trouble) or an error (Info: the server refused the request, maybe
// alone), as the answer from server to a request sent to every server.
func logFanOutError(log *slog.Logger, cmd, server string, reply codec.Reply) {
	switch {
	case reply.Err != nil:
		log.Warn("server failed a request sent to every server", "server", server, "cmd", cmd, "err", reply.Err)
	case reply.Kind == codec.ReplyFailure:
		log.Warn("server failed a request sent to every server", "server", server, "cmd", cmd, "err", firstLine(reply.Raw))
	case reply.Kind == codec.ReplyError:
		log.Info("server refused a request sent to every server", "server", server, "cmd", cmd, "err", firstLine(reply.Raw))
	}
}

// firstLine is a reply's first line without its line end, at most 200
// bytes, for the log.
func firstLine(raw []byte) string {
	line, _, _ := bytes.Cut(raw, []byte("\r\n"))
	return strings.ToValidUTF8(string(line[:min(len(line), 200)]), "?")
}

// fail answers x with a server error of the proxy's own.
func (r *router) fail(x *route.Exchange, msg string) {
	r.forwardErrors.Add(1)
	out := x.Out()
	if x.Req.Mode != codec.ModeNoreply {
		out = r.dialect.AppendError(out, codec.ErrServer, msg)
	}
	x.Answer(out)
}

// Stats implements route.Router: a native pool's counters are the
// pool's; a Redis pool adds its dedicated connections, a pool with
// sentinels the Sentinel counters.
func (r *router) Stats() []route.Stat {
	var st []route.Stat
	if r.ded != nil {
		st = r.ded.Counters()
	}
	if r.sentinel != nil {
		st = append(st, r.sentinel.Counters()...)
	}
	if r.replicas != nil {
		st = append(st, r.replicas.Counters()...)
	}
	if r.spool != nil {
		st = append(st, r.spool.Counters()...)
	}
	return st
}

// Place implements kind.Dedicator: the server of every key, numbered as pick
// numbers it.
func (r *router) Place(req *codec.Request, hint uint32) (*backend.Backend, int, []byte) {
	where := -1
	for _, k := range req.Keys {
		idx, err := r.pick(k)
		if err != nil {
			r.forwardErrors.Add(1)
			return nil, 0, r.dialect.AppendError(nil, codec.ErrServer, err.Error())
		}
		if where >= 0 && idx != where {
			r.forwardErrors.Add(1)
			return nil, 0, kind.AppendCrossSlot(nil, r.dialect)
		}
		where = idx
	}
	idx := where
	if idx < 0 { // no key: any server
		idx = int(hint) % len(r.backends())
	}
	b := r.Backend(idx)
	if b == nil { // a pool with sentinels, before its master is known
		r.forwardErrors.Add(1)
		return nil, 0, r.dialect.AppendError(nil, codec.ErrServer, r.noMaster(idx))
	}
	return b, where, nil
}

// Dedicated implements kind.Dedicator.
func (r *router) Dedicated() *kind.DedicatedPool { return r.ded }

// PatternServers implements kind.Dedicator: a pattern may match a channel of
// any server, so it is subscribed on every one (never the failover
// pool's: PUBLISH goes to the channel's own server).
func (r *router) PatternServers() ([]*backend.Backend, []byte) { return r.EveryServer() }

// EveryServer returns the servers a request for every server goes to (the
// pool's, never the failover pool's), or the error reply the client gets
// when one has no master yet. The session sends a transaction's command
// for every server to them (proxy/multiall.go).
func (r *router) EveryServer() ([]*backend.Backend, []byte) {
	bs := r.backends()
	for i, b := range bs {
		if b == nil {
			r.forwardErrors.Add(1)
			return nil, r.dialect.AppendError(nil, codec.ErrServer, r.noMaster(i))
		}
	}
	return bs, nil
}

// probesMeta reports whether the pool's sockets ask their server "mn"
// (autoMeta): a memcache pool with server_protocol auto.
func (r *router) probesMeta() bool {
	return !r.cfg.Redis && r.cfg.ServerProtocol == config.ServerProtocolAuto
}

// MetaProbed returns the pool's servers when its sockets ask each server
// "mn" (probesMeta; a memcache pool has neither Sentinels nor replicas,
// so they are its backends in order).
func (r *router) MetaProbed() ([]*backend.Backend, bool) {
	if !r.probesMeta() {
		return nil, false
	}
	return r.Backends(), true
}

// Backends implements route.Router: the shards' backends, but for shards
// of a pool with sentinels whose master is not known yet, then the
// replicas read from.
func (r *router) Backends() []*backend.Backend {
	bs := r.backends()
	if r.replicas != nil {
		bs = slices.Concat(bs, r.replicas.backends())
	} else if !slices.Contains(bs, nil) {
		return bs
	}
	return slices.DeleteFunc(slices.Clone(bs), func(b *backend.Backend) bool { return b == nil })
}

// Close implements route.Router: a Redis pool closes its idle dedicated
// connections; a pool with sentinels stops following them.
func (r *router) Close() {
	if r.replicas != nil {
		r.replicas.close()
		r.rc.Retire(r.replicas)
	}
	if r.sentinel != nil {
		r.sentinel.close()
		r.rc.Retire(r.sentinel)
	}
	if r.ded != nil {
		r.ded.Close()
		r.rc.Retire(r.ded)
	}
	if r.spool != nil {
		r.spool.release()
	}
}
