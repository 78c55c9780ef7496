package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"shardproxy/config"
	"shardproxy/fleet"
	"shardproxy/internal/testserver"
	_ "shardproxy/shard" // config.Parse checks a sharded pool by its kind's rules
)

// The scale simulation runs many fleet.Agents, each with its own etcd
// client, in one process against a real 3-member etcd cluster. Each drives
// a simTarget, which only records when it was given a configuration or a
// ring, so the figures are the fleet's (etcd, the watch fan-out, the ring
// rule), not the proxy's reload. BenchmarkFleet100 (make bench-fleet)
// measures 100 agents and prints a report; TestFleetScale runs a short one
// in every test run so that the harness cannot rot.

// scale is one simulation's size.
type scale struct {
	agents   int
	changes  int           // configuration versions published, one at a time
	ejects   int           // ejection and restore rounds
	rest     time.Duration // the quiet window traffic is measured over
	deadline time.Duration // what one change may take to reach every agent
}

// simPool is the ring pool every agent's target has, and simServer the
// server the ejection rounds fail.
const (
	simPrefix = "/shardproxy/scale"
	simPool   = "cache"
	simServer = "s2"
)

var simServers = []string{"s1", "s2", "s3"}

// simConfig is version v of the simulated fleet's configuration: one ring
// pool (sharded, auto_eject_hosts, remap) over three named servers; the
// timeout changes with v so that every version differs.
func simConfig(v int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  listen: 127.0.0.1:22120\n  distribution: ketama\n  timeout: %d\n", simPool, 100+v)
	b.WriteString("  auto_eject_hosts: true\n  eject_policy: remap\n  servers:\n")
	for i, s := range simServers {
		fmt.Fprintf(&b, "    - 127.0.0.1:%d:1 %s\n", 11211+i, s)
	}
	return b.String()
}

// stamp is a ring a target was given and when.
type stamp struct {
	at   time.Time
	ring fleet.Ring
}

// simTarget is a fleet.Target that records what the Agent gives it: the
// time each configuration revision was applied and every ring, with its
// time. Its servers' health is set by the simulation.
type simTarget struct {
	mu      sync.Mutex
	applied map[int64]time.Time
	rings   []stamp
	ring    fleet.Ring
	bad     map[string]bool
	watch   func(fleet.Health)
	state   fleet.State
}

var _ fleet.Target = (*simTarget)(nil)

func newSimTarget() *simTarget {
	return &simTarget{applied: map[int64]time.Time{}, bad: map[string]bool{}}
}

// Apply records when the revision named by cfg.Source arrived.
func (s *simTarget) Apply(cfg *config.Config) (string, error) {
	rev, err := strconv.ParseInt(cfg.Source[strings.LastIndex(cfg.Source, "@")+1:], 10, 64)
	if err != nil {
		return "", err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied[rev] = now
	return "sum" + strconv.FormatInt(rev, 10), nil
}

func (s *simTarget) Refuse(string, error) {}

func (s *simTarget) SetRing(pool string, r fleet.Ring) {
	if pool != simPool {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring = r
	s.rings = append(s.rings, stamp{now, r})
}

func (s *simTarget) Rings() map[string]fleet.Ring {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]fleet.Ring{simPool: s.ring}
}

func (s *simTarget) WatchHealth(fn func(fleet.Health)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watch = fn
}

func (s *simTarget) Health() []fleet.Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hs []fleet.Health
	for i, name := range simServers {
		hs = append(hs, fleet.Health{Pool: simPool, Server: name, Addr: "127.0.0.1:" + strconv.Itoa(11211+i),
			Bad: s.bad[name]})
	}
	return hs
}

func (s *simTarget) SetMembers(string, []fleet.Member) {}

func (s *simTarget) SetState(st fleet.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
}

// setBad is the proxy's own health check marking server bad or good.
func (s *simTarget) setBad(server string, bad bool) {
	s.mu.Lock()
	s.bad[server] = bad
	fn := s.watch
	s.mu.Unlock()
	if fn != nil {
		fn(fleet.Health{Pool: simPool, Server: server, Bad: bad})
	}
}

// appliedAt returns when revision rev was applied.
func (s *simTarget) appliedAt(rev int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.applied[rev]
	return t, ok
}

// ringAt returns when the target was first given, after since, a ring
// that ejects server (eject true) or does not (eject false).
func (s *simTarget) ringAt(since time.Time, server string, eject bool) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.rings {
		if !st.at.Before(since) && slices.Contains(st.ring.Ejected, server) == eject {
			return st.at, true
		}
	}
	return time.Time{}, false
}

// sim is a running simulation: the etcd cluster, a client of its own for
// publishing and counting keys, and the agents with their targets.
type sim struct {
	tb      testing.TB
	etcd    *testserver.EtcdCluster
	cli     *clientv3.Client
	agents  []*fleet.Agent
	targets []*simTarget
}

// startSim starts a 3-member etcd cluster, publishes the first version and
// n agents, and waits until every agent registered and applied it.
func startSim(tb testing.TB, n int, deadline time.Duration) *sim {
	tb.Helper()
	s := &sim{tb: tb, etcd: testserver.StartEtcd(tb, 3)}
	cli, err := fleet.Dial(fleet.Conn{Endpoints: s.etcd.Endpoints()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	s.cli = cli
	rev, _ := s.publish(0)
	for i := range n {
		t := newSimTarget()
		a, err := fleet.New(fleet.Options{Conn: fleet.Conn{Endpoints: s.etcd.Endpoints()}, Prefix: simPrefix,
			ID: fmt.Sprintf("proxy%03d", i), Target: t, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = a.Run(ctx); close(done) }()
		tb.Cleanup(func() { cancel(); <-done; a.Close() })
		s.agents, s.targets = append(s.agents, a), append(s.targets, t)
	}
	s.waitFor(deadline, "every agent registered and applied the first version", func() bool {
		return s.count("/proxies/") == n && s.applied(rev)
	})
	return s
}

// publish puts version v of the configuration and returns its revision
// and the time just before the Put was sent.
func (s *sim) publish(v int) (int64, time.Time) {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	rev, err := fleet.Put(ctx, s.cli, simPrefix, []byte(simConfig(v)))
	if err != nil {
		s.tb.Fatal(err)
	}
	return rev, t0
}

// count returns how many keys are under the fleet's prefix plus dir.
func (s *sim) count(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, simPrefix+dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return -1
	}
	return int(resp.Count)
}

// registered reports whether every agent's registration shows the
// configuration revision rev and the ring version ring.
func (s *sim) registered(rev, ring int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := fleet.ReadStatus(ctx, s.cli, simPrefix)
	if err != nil || len(st.Proxies) != len(s.agents) {
		return false
	}
	for _, r := range st.Proxies {
		if r.ConfigRevision != rev || r.Rings[simPool] != ring {
			return false
		}
	}
	return true
}

// settleMargin is how long the watch events of the last writes are given
// to reach every agent once etcd holds them all: no agent tells how far
// its watch has come, and a window must not count the previous one's
// events. They take milliseconds on loopback.
const settleMargin = time.Second

// settle waits until every agent sees every other and every registration
// shows what its target runs, then for settleMargin, so that a measured
// window holds the writes a change causes and no more.
func (s *sim) settle(d time.Duration) {
	s.tb.Helper()
	var rev int64
	s.targets[0].mu.Lock()
	for r := range s.targets[0].applied {
		rev = max(rev, r)
	}
	s.targets[0].mu.Unlock()
	ring := s.targets[0].Rings()[simPool].Version
	s.waitFor(d, fmt.Sprintf("every registration at revision %d, ring version %d", rev, ring), func() bool {
		for _, a := range s.agents {
			if a.State().Proxies != len(s.agents) {
				return false
			}
		}
		return s.registered(rev, ring)
	})
	time.Sleep(settleMargin)
}

// applied reports whether every target applied revision rev.
func (s *sim) applied(rev int64) bool {
	for _, t := range s.targets {
		if _, ok := t.appliedAt(rev); !ok {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds, or fails the run after d.
func (s *sim) waitFor(d time.Duration, what string, cond func() bool) {
	s.tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			s.tb.Fatalf("fleet scale: after %v, not yet: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// configRounds publishes sc.changes versions one after another and
// returns, for every agent and version, the time from the Put to the
// agent's Apply.
func (s *sim) configRounds(sc scale) []time.Duration {
	s.tb.Helper()
	var lat []time.Duration
	for v := 1; v <= sc.changes; v++ {
		rev, t0 := s.publish(v)
		s.waitFor(sc.deadline, fmt.Sprintf("version %d (revision %d) applied everywhere", v, rev),
			func() bool { return s.applied(rev) })
		for _, t := range s.targets {
			at, _ := t.appliedAt(rev)
			lat = append(lat, at.Sub(t0))
		}
	}
	return lat
}

// ejectRounds fails simServer sc.ejects times: first in one agent short of
// a majority, which must not eject it, then in one more, the report that
// tips the majority. It returns, for every agent and round, the time from
// that report to the agent's ring without the server, and the same for the
// restore (every agent reports it good again at once).
func (s *sim) ejectRounds(sc scale) (eject, restore []time.Duration) {
	s.tb.Helper()
	quorum := len(s.targets)/2 + 1
	for round := 1; round <= sc.ejects; round++ {
		for _, t := range s.targets[:quorum-1] {
			t.setBad(simServer, true)
		}
		dir := "/health/" + simPool + "/" + simServer + "/"
		s.waitFor(sc.deadline, fmt.Sprintf("round %d: %d health reports", round, quorum-1),
			func() bool { return s.count(dir) == quorum-1 })
		for _, t := range s.targets {
			if slices.Contains(t.Rings()[simPool].Ejected, simServer) {
				s.tb.Fatalf("round %d: %s ejected by %d reports of %d proxies", round, simServer, quorum-1, len(s.targets))
			}
		}
		t0 := time.Now()
		s.targets[quorum-1].setBad(simServer, true)
		eject = append(eject, s.ringTimes(sc, t0, true, fmt.Sprintf("round %d: ejected everywhere", round))...)

		t1 := time.Now()
		for _, t := range s.targets[:quorum] {
			t.setBad(simServer, false)
		}
		restore = append(restore, s.ringTimes(sc, t1, false, fmt.Sprintf("round %d: restored everywhere", round))...)
	}
	return eject, restore
}

// ringTimes waits until every target got, after t0, a ring that ejects
// simServer (or does not), and returns each one's delay from t0.
func (s *sim) ringTimes(sc scale, t0 time.Time, eject bool, what string) []time.Duration {
	s.tb.Helper()
	s.waitFor(sc.deadline, what, func() bool {
		for _, t := range s.targets {
			if _, ok := t.ringAt(t0, simServer, eject); !ok {
				return false
			}
		}
		return true
	})
	versions := map[int64]bool{}
	var lat []time.Duration
	for _, t := range s.targets {
		at, _ := t.ringAt(t0, simServer, eject)
		lat = append(lat, at.Sub(t0))
		versions[t.Rings()[simPool].Version] = true
	}
	if len(versions) != 1 {
		s.tb.Errorf("%s: the agents run %d ring versions, want one: %v", what, len(versions), versions)
	}
	return lat
}

// TestFleetScale is the simulation at a size every test run can afford:
// 20 agents, one configuration change, one ejection and restore.
func TestFleetScale(t *testing.T) {
	r := runScale(t, scale{agents: 20, changes: 1, ejects: 1, rest: 2 * time.Second, deadline: 30 * time.Second})
	t.Log("\n" + r.String())
}

// BenchmarkFleet100 is the simulation of issue 40: 100 agents, 10
// configuration changes, 10 ejections, 20 s at rest; run it once
// (make bench-fleet: -benchtime 1x). It prints the report and gives the
// headline figures as metrics.
func BenchmarkFleet100(b *testing.B) {
	r := runScale(b, scale{agents: 100, changes: 10, ejects: 10, rest: 20 * time.Second, deadline: 60 * time.Second})
	// On stdout: a benchmark's log is cut after a few lines.
	fmt.Print(r.String())
	b.ReportMetric(ms(r.config.p50), "apply-p50-ms")
	b.ReportMetric(ms(r.config.p99), "apply-p99-ms")
	b.ReportMetric(ms(r.eject.p99), "eject-p99-ms")
	b.ReportMetric(r.atRest.perProxy(r.atRest.client.MessagesSent), "rest-req/s/proxy")
}

// runScale runs one simulation and measures it.
func runScale(tb testing.TB, sc scale) *report {
	tb.Helper()
	s := startSim(tb, sc.agents, sc.deadline)
	r := &report{scale: sc}
	s.settle(sc.deadline)
	w := s.window()
	time.Sleep(sc.rest)
	r.atRest = w.end()

	// Each window ends once every registration shows the last change, so
	// that the writes that follow it are counted.
	w = s.window()
	r.config = percentiles(s.configRounds(sc))
	s.settle(sc.deadline)
	r.changing = w.end()

	w = s.window()
	ej, rs := s.ejectRounds(sc)
	r.eject, r.restore = percentiles(ej), percentiles(rs)
	s.settle(sc.deadline)
	r.ejecting = w.end()
	for _, a := range s.agents {
		r.errors += a.State().Errors
	}
	return r
}
