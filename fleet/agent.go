package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Options configure an Agent. Conn, Prefix and Target are required.
type Options struct {
	Conn
	// Prefix is the fleet's key prefix, "/shardproxy/NAME".
	Prefix string
	// ID names this proxy in the fleet; default host name and pid.
	ID string
	// Target is the proxy the Agent drives.
	Target Target
	// Logger receives the fleet's events; default slog.Default().
	Logger *slog.Logger
	// LeaseTTL is the lease of this proxy's registration and health keys:
	// a proxy that stops answering is gone from the fleet after it. Default
	// 6s, at least 2s.
	LeaseTTL time.Duration
	// RequestTimeout bounds each etcd request; default 3s.
	RequestTimeout time.Duration
	// ConfigRevision and ConfigChecksum name a configuration from etcd the
	// Target already runs (read by Load before the proxy started); a
	// version at that revision is not applied again.
	ConfigRevision int64
	ConfigChecksum string
	// Version and Listen are shown in the registration: the proxy's version
	// and, called on each refresh, its listen addresses.
	Version string
	Listen  func() []string
	// Pools, called on each refresh, gives the address clients reach each
	// pool at; it goes into the registration, which every proxy reads
	// (Target.SetMembers). Nil: none.
	Pools func() map[string]string
}

// Agent is one proxy's member of the fleet. Run drives it.
type Agent struct {
	o      Options
	cli    *clientv3.Client                // Run's; nil until the first connect
	shared atomic.Pointer[clientv3.Client] // cli, for Reread and Close
	log    *slog.Logger
	meter  meter

	started time.Time
	host    string

	cfgMu sync.Mutex // one configuration version applied at a time
	cfg   applied    // under cfgMu

	healthSig chan struct{} // the Target's health changed

	stMu sync.Mutex
	st   State // what SetState was last given

	// Owned by Run's goroutine.
	view      *view
	published map[string]healthValue // pool/server -> this proxy's health key
	reg       []byte                 // the registration put this session
	status    []byte                 // the status last put this session
	pending   map[string]time.Time   // pool -> since when the rule wants another ring
	lost      map[string]int64       // pool -> the ring key's ModRevision a write lost against
	leaseID   clientv3.LeaseID
}

// applied is the configuration version the Target runs or last refused.
type applied struct {
	seen     int64 // revision last handled, applied or refused
	revision int64 // applied
	checksum string
}

// New returns an Agent for o with its own etcd client; it does not reach
// etcd until Run.
func New(o Options) (*Agent, error) {
	if o.Target == nil || o.Prefix == "" {
		return nil, errors.New("fleet: Options.Target and Options.Prefix are required")
	}
	host, _ := os.Hostname()
	if o.ID == "" {
		o.ID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 6 * time.Second
	}
	o.LeaseTTL = max(o.LeaseTTL, 2*time.Second)
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 3 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &Agent{o: o, log: o.Logger.With("fleet", o.Prefix, "fleet_id", o.ID), started: time.Now(), host: host,
		healthSig: make(chan struct{}, 1), published: map[string]healthValue{}}
	a.cfg = applied{seen: o.ConfigRevision, revision: o.ConfigRevision, checksum: o.ConfigChecksum}
	if len(o.Endpoints) == 0 {
		return nil, errors.New("fleet: no etcd endpoints")
	}
	a.st = State{ID: o.ID, Prefix: o.Prefix, Endpoints: o.Endpoints,
		ConfigRevision: o.ConfigRevision, ConfigChecksum: o.ConfigChecksum}
	o.Target.WatchHealth(func(Health) {
		select {
		case a.healthSig <- struct{}{}:
		default:
		}
	})
	return a, nil
}

// ID is this proxy's name in the fleet.
func (a *Agent) ID() string { return a.o.ID }

// Traffic returns what this Agent's etcd client has sent and received.
func (a *Agent) Traffic() Traffic { return a.meter.traffic() }

// State returns the fleet as this proxy sees it.
func (a *Agent) State() State {
	a.stMu.Lock()
	defer a.stMu.Unlock()
	return a.st
}

// Close closes the etcd client; call it after Run returned.
func (a *Agent) Close() error {
	if cli := a.shared.Load(); cli != nil {
		return cli.Close()
	}
	return nil
}

// connect makes the etcd client, once: with a user and password, making
// it asks etcd for a token, so it fails while etcd cannot be reached.
func (a *Agent) connect() error {
	if a.cli != nil {
		return nil
	}
	c := a.o.Conn
	c.DialOptions = append(append(c.DialOptions[:0:0], c.DialOptions...), a.meter.dialOption())
	cli, err := Dial(c)
	if err != nil {
		return err
	}
	a.cli = cli
	a.shared.Store(cli)
	return nil
}

// Run keeps this proxy in the fleet until ctx ends: a session (a lease,
// the registration, the keys read and watched) at a time, a new one after
// any failure, with backoff. It returns ctx's error, having revoked the
// lease so the fleet forgets this proxy at once.
func (a *Agent) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := a.connect()
		if err == nil {
			err = a.session(ctx)
		}
		if ctx.Err() != nil {
			a.revoke()
			return ctx.Err()
		}
		a.failed(err)
		if time.Since(start) > 2*a.o.LeaseTTL {
			backoff = 100 * time.Millisecond
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// failed records a lost session: Connected false, the error counted and
// shown.
func (a *Agent) failed(err error) {
	a.log.Warn("fleet session lost, retrying; configuration and ring kept", "err", err)
	a.setState(func(s *State) {
		s.Connected = false
		s.Errors++
		s.LastError = err.Error()
	})
}

func (a *Agent) setState(f func(*State)) {
	a.stMu.Lock()
	f(&a.st)
	st := a.st
	a.stMu.Unlock()
	a.o.Target.SetState(st)
}

// revoke ends this proxy's lease, best effort.
func (a *Agent) revoke() {
	if a.leaseID == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a.cli.Revoke(ctx, a.leaseID)
	a.leaseID = 0
}

func (a *Agent) key(parts ...string) string {
	k := a.o.Prefix
	for _, p := range parts {
		k += "/" + p
	}
	return k
}

func (a *Agent) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.o.RequestTimeout)
}

// errLeaseLost ends a session whose lease could not be kept alive.
var errLeaseLost = errors.New("fleet: lease lost (etcd unreachable for longer than its TTL)")

// session is one lease's life: it grants the lease, reads every key under
// the prefix, catches up (configuration, rings, this proxy's keys), then
// follows the watch from the revision read until something fails.
func (a *Agent) session(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rctx, rcancel := a.reqCtx(sctx)
	lease, err := a.cli.Grant(rctx, int64(a.o.LeaseTTL/time.Second))
	rcancel()
	if err != nil {
		return fmt.Errorf("fleet: lease: %w", err)
	}
	a.leaseID = lease.ID
	ka, err := a.cli.KeepAlive(sctx, lease.ID)
	if err != nil {
		return fmt.Errorf("fleet: keepalive: %w", err)
	}
	rev, err := a.catchUp(sctx)
	if err != nil {
		return err
	}
	a.log.Info("fleet session started", "revision", rev, "proxies", len(a.view.live))
	wch := a.watch(sctx, rev+1)
	// A decision that waits (its deciding proxy is stuck) is looked at
	// again without a new event.
	tick := time.NewTicker(a.o.LeaseTTL / 2)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if len(a.pending) > 0 {
				if err := a.sync(sctx); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-ka:
			if !ok {
				return errLeaseLost
			}
		case wr := <-wch:
			if wr.closed {
				return errors.New("fleet: watch closed")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("fleet: watch: %w", err)
			}
			if err := a.events(sctx, wr.Events); err != nil {
				return err
			}
		case <-a.healthSig:
			if err := a.sync(sctx); err != nil {
				return err
			}
		}
	}
}

// watchRange is the range of keys an Agent reads and watches: every key
// under the prefix that sorts before P/status/ (config, health, proxies,
// ring), not the proxies' status keys, which only `fleet status` reads.
func (a *Agent) watchRange() clientv3.OpOption { return clientv3.WithRange(a.key("status") + "/") }

// watched is a watch response, or the end of the watch (closed).
type watched struct {
	clientv3.WatchResponse
	closed bool
}

// watch follows every key under the prefix from rev on, in one watch: the
// rule must see the registrations and the reports in the order etcd wrote
// them (with a watch of their own, the registrations could lag and a
// proxy would decide on too few live proxies).
func (a *Agent) watch(ctx context.Context, rev int64) <-chan watched {
	ch := a.cli.Watch(clientv3.WithRequireLeader(ctx), a.o.Prefix+"/", a.watchRange(), clientv3.WithRev(rev))
	out := make(chan watched)
	go func() {
		for wr := range ch {
			select {
			case out <- watched{WatchResponse: wr}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- watched{closed: true}:
		case <-ctx.Done():
		}
	}()
	return out
}

// catchUp reads every key under the prefix into a new view, applies what
// changed while this proxy was away, and puts this proxy's keys under the
// new lease. It returns the revision read.
func (a *Agent) catchUp(ctx context.Context) (int64, error) {
	rctx, cancel := a.reqCtx(ctx)
	resp, err := a.cli.Get(rctx, a.o.Prefix+"/", a.watchRange())
	cancel()
	if err != nil {
		return 0, fmt.Errorf("fleet: read %s/: %w", a.o.Prefix, err)
	}
	a.view = newView()
	a.published = map[string]healthValue{}
	a.reg, a.status = nil, nil
	a.pending, a.lost = map[string]time.Time{}, map[string]int64{}
	for _, kv := range resp.Kvs {
		a.put(string(kv.Key), kv.Value, kv.ModRevision)
	}
	// Keys this proxy left under an older lease: what sync does not put
	// again is deleted, so none outlives the state it showed.
	stale := a.ownHealthKeys()
	if err := a.sync(ctx); err != nil {
		return 0, err
	}
	for _, k := range stale {
		if _, again := a.published[k]; again {
			continue
		}
		if err := a.do(ctx, clientv3.OpDelete(a.healthKey(k))); err != nil {
			return 0, err
		}
	}
	a.setState(func(s *State) { s.Connected, s.Proxies = true, len(a.view.live) })
	return resp.Header.Revision, nil
}

// ownHealthKeys are the pool/server of this proxy's health keys in the view.
func (a *Agent) ownHealthKeys() []string {
	var out []string
	for pool, servers := range a.view.health {
		for server, ids := range servers {
			if ids[a.o.ID] {
				out = append(out, hkey(pool, server))
			}
		}
	}
	return out
}
