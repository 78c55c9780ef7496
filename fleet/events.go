package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// events folds a watch response into the view, then syncs.
func (a *Agent) events(ctx context.Context, evs []*clientv3.Event) error {
	for _, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			a.del(string(ev.Kv.Key))
			continue
		}
		a.put(string(ev.Kv.Key), ev.Kv.Value, ev.Kv.ModRevision)
	}
	return a.sync(ctx)
}

// put takes one key's new value: a configuration version is applied at
// once; the others go into the view.
func (a *Agent) put(key string, value []byte, modRev int64) {
	switch {
	case key == a.key("config"):
		a.applyVersion(value, modRev, false)
	case strings.HasPrefix(key, a.key("proxies")+"/"):
		if p, ok := keyParts(key, a.key("proxies")+"/", 1); ok {
			a.view.live[p[0]] = true
			a.setMember(p[0], value)
		}
	case strings.HasPrefix(key, a.key("health")+"/"):
		if pool, server, id, ok := a.healthParts(key); ok {
			a.view.setHealth(pool, server, id, true)
		}
	case strings.HasPrefix(key, a.key("ring")+"/"):
		a.putRing(key, value, modRev)
	}
}

// del takes one key's deletion (or its lease's expiry).
func (a *Agent) del(key string) {
	switch {
	case key == a.key("config"):
		a.log.Warn("fleet configuration deleted from etcd; the running one is kept", "key", key)
	case strings.HasPrefix(key, a.key("proxies")+"/"):
		if p, ok := keyParts(key, a.key("proxies")+"/", 1); ok {
			delete(a.view.live, p[0])
			a.setMember(p[0], nil)
		}
	case strings.HasPrefix(key, a.key("health")+"/"):
		if pool, server, id, ok := a.healthParts(key); ok {
			a.view.setHealth(pool, server, id, false)
		}
	case strings.HasPrefix(key, a.key("ring")+"/"):
		if p, ok := a.ringPool(key); ok {
			delete(a.view.rings, p)
		}
	}
}

func (a *Agent) putRing(key string, value []byte, modRev int64) {
	pool, ok := a.ringPool(key)
	if !ok {
		return
	}
	r, err := parseRing(value)
	if err != nil {
		// Refused whole: the last ring stays, and the rule's next version
		// replaces the value.
		a.log.Error("fleet ring value refused", "key", key, "revision", modRev, "err", err)
		a.setState(func(s *State) { s.Errors++; s.LastError = key + ": " + err.Error() })
		a.view.rings[pool] = ringState{ring: a.view.rings[pool].ring, modRev: modRev, bad: true}
		return
	}
	a.view.rings[pool] = ringState{ring: r, modRev: modRev}
}

func (a *Agent) ringPool(key string) (string, bool) {
	p, ok := keyParts(key, a.key("ring")+"/", 1)
	if !ok {
		return "", false
	}
	pool, err := url.PathUnescape(p[0])
	return pool, err == nil
}

// healthParts splits P/health/<pool>/<server>/<id>; pool and server are
// path-escaped in keys (a server named by a socket path holds slashes).
func (a *Agent) healthParts(key string) (pool, server, id string, ok bool) {
	p, ok := keyParts(key, a.key("health")+"/", 3)
	if !ok {
		return "", "", "", false
	}
	pool, err1 := url.PathUnescape(p[0])
	server, err2 := url.PathUnescape(p[1])
	return pool, server, p[2], err1 == nil && err2 == nil
}

// hkey names a pool's server in published.
func hkey(pool, server string) string { return url.PathEscape(pool) + "/" + url.PathEscape(server) }

func (a *Agent) healthKey(hk string) string { return a.key("health", hk, a.o.ID) }

// sync brings etcd and the Target in line with the view: this proxy's
// health keys, the rings the rule decides, the rings applied, the
// registration.
func (a *Agent) sync(ctx context.Context) error {
	if err := a.publishHealth(ctx); err != nil {
		return err
	}
	if err := a.decide(ctx); err != nil {
		return err
	}
	a.applyRings()
	a.setState(func(s *State) { s.Proxies = len(a.view.live) })
	return a.register(ctx)
}

// publishHealth puts a health key for each server the Target sees failing
// and deletes the keys of those it no longer does.
func (a *Agent) publishHealth(ctx context.Context) error {
	want := map[string]Health{}
	for _, h := range a.o.Target.Health() {
		if h.Bad {
			want[hkey(h.Pool, h.Server)] = h
		}
	}
	for k, h := range want {
		if _, ok := a.published[k]; ok {
			continue
		}
		v := healthValue{Since: time.Now().UTC().Format(time.RFC3339Nano), Err: h.Err}
		b, _ := json.Marshal(v)
		if err := a.do(ctx, clientv3.OpPut(a.healthKey(k), string(b), clientv3.WithLease(a.leaseID))); err != nil {
			return err
		}
		a.published[k] = v
		a.log.Info("fleet: server reported failing", "pool", h.Pool, "server", h.Server, "err", h.Err)
	}
	for k := range a.published {
		if _, ok := want[k]; ok {
			continue
		}
		if err := a.do(ctx, clientv3.OpDelete(a.healthKey(k))); err != nil {
			return err
		}
		delete(a.published, k)
		a.log.Info("fleet: server reported healthy again", "server", k)
	}
	return nil
}

// decide writes each ring the rule decides anew, each with a Txn on the
// ring key's ModRevision. One proxy writes: the live proxy with the
// smallest id (every proxy knows the same live set, so no election is
// needed), or any proxy that has seen a decision wait longer than its
// lease (the deciding one is stuck or its registration lingers). A write
// that lost the race is not tried again until the ring key moves: the
// value that won arrives in the watch.
func (a *Agent) decide(ctx context.Context) error {
	decisions := a.view.decisions()
	for pool := range a.pending {
		if _, ok := decisions[pool]; !ok {
			delete(a.pending, pool)
		}
	}
	for pool, d := range decisions {
		since, ok := a.pending[pool]
		if !ok {
			since = time.Now()
			a.pending[pool] = since
		}
		if lost, ok := a.lost[pool]; ok && lost == d.modRev {
			continue
		}
		if a.view.decider() != a.o.ID && time.Since(since) <= a.o.LeaseTTL {
			continue
		}
		key := a.key("ring", url.PathEscape(pool))
		rctx, cancel := a.reqCtx(ctx)
		resp, err := a.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", d.modRev)).
			Then(clientv3.OpPut(key, string(encodeRing(d.ring)))).Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("fleet: write %s: %w", key, err)
		}
		if !resp.Succeeded {
			a.lost[pool] = d.modRev
			continue
		}
		a.log.Info("fleet ring decided", "pool", pool, "version", d.ring.Version, "ejected", d.ring.Ejected,
			"proxies", len(a.view.live))
	}
	return nil
}

// applyRings hands each ring pool of the Target the fleet's version when
// it runs another: a ring decided anew, or a pool that a new configuration
// made a ring pool.
func (a *Agent) applyRings() {
	running := a.o.Target.Rings()
	for pool, rs := range a.view.rings {
		cur, ok := running[pool]
		if !ok || rs.ring.Version == 0 || cur.Equal(rs.ring) {
			continue
		}
		a.o.Target.SetRing(pool, rs.ring)
		a.log.Info("fleet ring applied", "pool", pool, "version", rs.ring.Version, "ejected", rs.ring.Ejected)
	}
}

// do runs one request under the request timeout.
func (a *Agent) do(ctx context.Context, op clientv3.Op) error {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	if _, err := a.cli.Do(rctx, op); err != nil {
		return fmt.Errorf("fleet: %s: %w", op.KeyBytes(), err)
	}
	return nil
}

// Registration is what `fleet status` shows of one live proxy: who it is
// (P/proxies/<id>, written once a session, watched by every proxy: the
// live set the ring rule counts) and what it runs (P/status/<id>, written
// when it changes, watched by none, so a new version does not send every
// proxy's status to every proxy). Both are leased.
type Registration struct {
	ID      string            `json:"id"`
	Host    string            `json:"host"`
	PID     int               `json:"pid"`
	Version string            `json:"version"`
	Started time.Time         `json:"started"`
	Pools   map[string]string `json:"pools,omitempty"` // where clients reach each pool (Options.Pools)
	ProxyStatus
}

// ProxyStatus is the JSON of P/status/<id>.
type ProxyStatus struct {
	Listen         []string         `json:"listen,omitempty"`
	ConfigRevision int64            `json:"config_revision"`
	ConfigChecksum string           `json:"config_checksum,omitempty"`
	Rings          map[string]int64 `json:"rings,omitempty"`
	EtcdErrors     int64            `json:"etcd_errors"`
}

// register puts the registration once a session, and the status when
// what it shows changed.
func (a *Agent) register(ctx context.Context) error {
	r := Registration{ID: a.o.ID, Host: a.host, PID: os.Getpid(), Version: a.o.Version, Started: a.started.UTC()}
	if a.o.Pools != nil {
		r.Pools = a.o.Pools()
	}
	b, _ := json.Marshal(struct {
		ID      string            `json:"id"`
		Host    string            `json:"host"`
		PID     int               `json:"pid"`
		Version string            `json:"version"`
		Started time.Time         `json:"started"`
		Pools   map[string]string `json:"pools,omitempty"`
	}{r.ID, r.Host, r.PID, r.Version, r.Started, r.Pools})
	if string(b) != string(a.reg) { // once a session, and when the pools moved
		if err := a.do(ctx, clientv3.OpPut(a.key("proxies", a.o.ID), string(b), clientv3.WithLease(a.leaseID))); err != nil {
			return err
		}
		a.reg = b
	}
	a.cfgMu.Lock()
	cfg := a.cfg
	a.cfgMu.Unlock()
	st := ProxyStatus{ConfigRevision: cfg.revision, ConfigChecksum: cfg.checksum, Rings: map[string]int64{},
		EtcdErrors: a.State().Errors}
	if a.o.Listen != nil {
		st.Listen = slices.Sorted(slices.Values(a.o.Listen()))
	}
	for pool, ring := range a.o.Target.Rings() {
		st.Rings[pool] = ring.Version
	}
	b, _ = json.Marshal(st)
	if string(b) == string(a.status) {
		return nil
	}
	if err := a.do(ctx, clientv3.OpPut(a.key("status", a.o.ID), string(b), clientv3.WithLease(a.leaseID))); err != nil {
		return err
	}
	a.status = b
	return nil
}

// setMember takes a proxy's registration (nil: it left) into the members
// the Target is given: the pools it lists and where clients reach them.
// An unreadable registration lists no pools.
func (a *Agent) setMember(id string, value []byte) {
	if value == nil {
		delete(a.view.members, id)
	} else {
		var r Registration
		json.Unmarshal(value, &r)
		if maps.Equal(a.view.members[id], r.Pools) && a.view.members[id] != nil {
			return
		}
		a.view.members[id] = r.Pools
		if r.Pools == nil {
			a.view.members[id] = map[string]string{}
		}
	}
	members := make([]Member, 0, len(a.view.members))
	for _, id := range slices.Sorted(maps.Keys(a.view.members)) {
		members = append(members, Member{ID: id, Pools: maps.Clone(a.view.members[id])})
	}
	a.o.Target.SetMembers(a.o.ID, members)
}
