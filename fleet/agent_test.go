package fleet

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	_ "shardproxy/shard" // config.Parse checks a sharded pool by its kind's rules
)

// fakeTarget stands in for the proxy where the agent's own behaviour is
// under test: what it was given is recorded, its health is set by the test.
type fakeTarget struct {
	mu       sync.Mutex
	pools    []string // ring pools
	applied  []int64  // revisions of the configurations applied, from Source
	last     *config.Config
	refused  []string
	rings    map[string]Ring
	health   map[string]Health // server -> health, pool "cache"
	watch    func(Health)
	state    State
	failNext bool // Apply refuses the next configuration (as a failed build)
}

func newFakeTarget(servers ...string) *fakeTarget {
	ft := &fakeTarget{pools: []string{"cache"}, rings: map[string]Ring{}, health: map[string]Health{}}
	for _, s := range servers {
		ft.health[s] = Health{Pool: "cache", Server: s}
	}
	return ft
}

func (ft *fakeTarget) Apply(cfg *config.Config) (string, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.failNext {
		ft.failNext = false
		return "", errors.New("build failed")
	}
	ft.applied = append(ft.applied, revOf(cfg.Source))
	ft.last = cfg
	return fmt.Sprintf("sum%d", len(cfg.Pools)), nil
}

// revOf takes the revision out of a Source.
func revOf(source string) int64 {
	rev, _ := strconv.ParseInt(source[strings.LastIndex(source, "@")+1:], 10, 64)
	return rev
}

func (ft *fakeTarget) Refuse(source string, err error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.refused = append(ft.refused, source)
}

func (ft *fakeTarget) SetRing(pool string, r Ring) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if slices.Contains(ft.pools, pool) {
		ft.rings[pool] = r
	}
}

func (ft *fakeTarget) Rings() map[string]Ring {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	out := map[string]Ring{}
	for _, p := range ft.pools {
		out[p] = ft.rings[p]
	}
	return out
}

func (ft *fakeTarget) WatchHealth(fn func(Health)) { ft.watch = fn }

func (ft *fakeTarget) Health() []Health {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []Health
	for _, h := range ft.health {
		out = append(out, h)
	}
	return out
}

func (ft *fakeTarget) SetMembers(string, []Member) {}

func (ft *fakeTarget) SetState(st State) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.state = st
}

// setBad changes a server's local health as a proxy's backend would.
func (ft *fakeTarget) setBad(server string, bad bool) {
	ft.mu.Lock()
	h := Health{Pool: "cache", Server: server, Bad: bad}
	if bad {
		h.Err = "connection refused"
	}
	ft.health[server] = h
	ft.mu.Unlock()
	ft.watch(h)
}

func (ft *fakeTarget) snapshot() (applied []int64, refused []string, rings map[string]Ring, st State) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return slices.Clone(ft.applied), slices.Clone(ft.refused), cloneRings(ft.rings), ft.state
}

func cloneRings(m map[string]Ring) map[string]Ring {
	out := map[string]Ring{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

const prefix = "/shardproxy/test"

// startAgents runs n agents against c, each over its own fake target.
func startAgents(t *testing.T, c *testserver.EtcdCluster, n int) ([]*Agent, []*fakeTarget, []context.CancelFunc) {
	t.Helper()
	var agents []*Agent
	var targets []*fakeTarget
	var stops []context.CancelFunc
	for i := range n {
		ft := newFakeTarget("s1", "s2", "s3")
		a, stop := runAgent(t, Options{Conn: Conn{Endpoints: c.Endpoints()}, Prefix: prefix, ID: fmt.Sprintf("p%d", i),
			Target: ft, LeaseTTL: 2 * time.Second, RequestTimeout: time.Second})
		agents, targets, stops = append(agents, a), append(targets, ft), append(stops, stop)
	}
	return agents, targets, stops
}

// runAgent makes an Agent of o and runs it until stop, which the test's
// end calls too (then the Agent's client closes).
func runAgent(t *testing.T, o Options) (a *Agent, stop func()) {
	t.Helper()
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(func() { stop(); a.Close() })
	return a, stop
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// put writes a configuration version, retrying while the cluster elects a
// leader after a member stopped.
func put(t *testing.T, a *Agent, yml string) int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := client(t, a).Put(ctx, prefix+"/config", yml)
		cancel()
		if err == nil {
			return resp.Header.Revision
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func poolsYAML(n int) string {
	var s string
	for i := range n {
		s += fmt.Sprintf("p%d:\n  listen: 127.0.0.1:0\n  servers:\n    - 127.0.0.1:11211:1\n", i)
	}
	return s
}

func lastApplied(ft *fakeTarget) int64 {
	applied, _, _, _ := ft.snapshot()
	if len(applied) == 0 {
		return 0
	}
	return applied[len(applied)-1]
}

func allApplied(targets []*fakeTarget, rev int64) func() bool {
	return func() bool {
		for _, ft := range targets {
			if lastApplied(ft) != rev {
				return false
			}
		}
		return true
	}
}

func allRefused(targets []*fakeTarget, n int) func() bool {
	return func() bool {
		for _, ft := range targets {
			if _, _, _, st := ft.snapshot(); st.Refused != int64(n) {
				return false
			}
		}
		return true
	}
}

// TestAgentConfig: every agent applies each good version, refuses each bad
// one and keeps the last good, rides out one member down and the whole
// cluster down, and catches up with a version put after etcd returned.
func TestAgentConfig(t *testing.T) {
	c := testserver.StartEtcd(t, 3)
	agents, targets, _ := startAgents(t, c, 3)
	rev := put(t, agents[0], poolsYAML(1))
	waitFor(t, 10*time.Second, "v1 applied everywhere", allApplied(targets, rev))
	waitFor(t, 10*time.Second, "three proxies registered", func() bool {
		_, _, _, st := targets[0].snapshot()
		return st.Proxies == 3 && st.Connected && st.ConfigChecksum == "sum1"
	})

	put(t, agents[0], "p0:\n  listen: [oops\n")                   // does not parse
	put(t, agents[0], "fleet:\n  endpoints: a:1\n  prefix: /x\n") // carries a fleet: section
	waitFor(t, 10*time.Second, "bad versions refused", allRefused(targets, 2))
	for _, ft := range targets {
		if lastApplied(ft) != rev || len(ft.refused) != 2 {
			t.Fatalf("after refusals: applied %d, refused %q", lastApplied(ft), ft.refused)
		}
	}
	targets[1].mu.Lock()
	targets[1].failNext = true // the proxy's build refuses it
	targets[1].mu.Unlock()
	rev = put(t, agents[0], poolsYAML(2))
	waitFor(t, 10*time.Second, "v2 applied by two", func() bool {
		return lastApplied(targets[0]) == rev && lastApplied(targets[2]) == rev
	})
	waitFor(t, 10*time.Second, "v2 refused by one", func() bool { return targets[1].State().Refused == 3 })

	st, err := ReadStatus(context.Background(), client(t, agents[0]), prefix)
	if err != nil || len(st.Proxies) != 3 || st.ConfigRevision != rev {
		t.Fatalf("status %+v %v", st, err)
	}

	c.Members[0].Stop()
	rev = put(t, agents[1], poolsYAML(3))
	waitFor(t, 10*time.Second, "v3 applied with a member down", allApplied(targets, rev))

	for _, m := range c.Members[1:] {
		m.Stop()
	}
	waitFor(t, 15*time.Second, "every agent sees etcd gone", func() bool {
		for _, ft := range targets {
			if st := ft.State(); st.Connected || st.Errors == 0 || st.LastError == "" {
				return false
			}
		}
		return true
	})
	for _, ft := range targets {
		if lastApplied(ft) != rev {
			t.Fatalf("configuration changed while etcd was down: %d", lastApplied(ft))
		}
	}
	for _, m := range c.Members {
		m.Restart()
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	rev = put(t, agents[2], poolsYAML(4))
	waitFor(t, 30*time.Second, "v4 applied after etcd returned", allApplied(targets, rev))
	waitFor(t, 15*time.Second, "reconnected", func() bool {
		for _, ft := range targets {
			if st := ft.State(); !st.Connected || st.Proxies != 3 {
				return false
			}
		}
		return true
	})
	if tr := agents[0].Traffic(); tr.RPCs == 0 || tr.BytesSent == 0 || tr.BytesReceived == 0 {
		t.Fatalf("traffic not counted: %+v", tr)
	}
}

func (ft *fakeTarget) State() State {
	_, _, _, st := ft.snapshot()
	return st
}

func ringOf(ft *fakeTarget) Ring {
	_, _, rings, _ := ft.snapshot()
	return rings["cache"]
}

// TestAgentRing: a server is ejected when more than half of the live
// proxies report it, at one version that every proxy applies, and restored
// when they no longer do.
func TestAgentRing(t *testing.T) {
	c := testserver.StartEtcd(t, 3)
	agents, targets, stops := startAgents(t, c, 3)
	waitFor(t, 10*time.Second, "three proxies registered", func() bool { return targets[2].State().Proxies == 3 })

	targets[0].setBad("s1", true)
	waitFor(t, 10*time.Second, "the report in etcd", func() bool {
		st, err := ReadStatus(context.Background(), client(t, agents[0]), prefix)
		return err == nil && slices.Equal(st.Reports["cache"]["s1"], []string{"p0"})
	})
	time.Sleep(300 * time.Millisecond) // a wrong decision would have been written by now
	for _, ft := range targets {
		if r := ringOf(ft); len(r.Ejected) != 0 {
			t.Fatalf("ejected on one report of three: %+v", r)
		}
	}

	targets[1].setBad("s1", true)
	sameRing := func(want []string) func() bool {
		return func() bool {
			r0 := ringOf(targets[0])
			for _, ft := range targets {
				if r := ringOf(ft); !r.Equal(r0) || !slices.Equal(r.Ejected, want) {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, "s1 ejected everywhere", sameRing([]string{"s1"}))
	v := ringOf(targets[0]).Version

	// A proxy that leaves takes its reports with it; p0 alone of two is
	// not more than half: s1 comes back at the next version.
	stops[1]()
	waitFor(t, 10*time.Second, "s1 restored after p1 left", func() bool {
		r := ringOf(targets[0])
		return r.Version > v && len(r.Ejected) == 0 && ringOf(targets[2]).Equal(r)
	})
	targets[0].setBad("s1", false)
	targets[0].setBad("s2", true)
	targets[2].setBad("s2", true)
	waitFor(t, 10*time.Second, "s2 ejected by both live proxies", func() bool {
		r := ringOf(targets[0])
		return slices.Equal(r.Ejected, []string{"s2"}) && ringOf(targets[2]).Equal(r)
	})
	st, err := ReadStatus(context.Background(), client(t, agents[0]), prefix)
	if err != nil || len(st.Proxies) != 2 || st.Rings["cache"].Version != ringOf(targets[0]).Version ||
		len(st.Reports["cache"]["s1"]) != 0 {
		t.Fatalf("status %+v %v", st, err)
	}

	// A ring value that is no ring: refused, the last ring kept, and the
	// rule's next version written over it.
	v = ringOf(targets[0]).Version
	if _, err := client(t, agents[0]).Put(context.Background(), prefix+"/ring/cache", "garbage"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the ring rewritten", func() bool {
		st, err := ReadStatus(context.Background(), client(t, agents[0]), prefix)
		return err == nil && st.Rings["cache"].Version == v+1 && slices.Equal(st.Rings["cache"].Ejected, []string{"s2"})
	})
	waitFor(t, 10*time.Second, "the rewritten ring applied", func() bool {
		r := ringOf(targets[0])
		return r.Version == v+1 && slices.Equal(r.Ejected, []string{"s2"}) && ringOf(targets[2]).Equal(r)
	})
	if st := targets[0].State(); st.Errors == 0 || !strings.Contains(st.LastError, "ring") {
		t.Fatalf("the refused ring value not shown: %+v", st)
	}
}

// TestAgentAuth: with etcd's authentication on, an agent with the user's
// password joins and applies the configuration; one with a wrong password
// shows the error and stays out.
func TestAgentAuth(t *testing.T) {
	c := testserver.StartEtcd(t, 1)
	root, err := Dial(Conn{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := root.Put(ctx, prefix+"/config", poolsYAML(1)); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	run := func(password string) *fakeTarget {
		ft := newFakeTarget()
		runAgent(t, Options{Conn: Conn{Endpoints: c.Endpoints(), Username: "root", Password: password},
			Prefix: prefix, ID: "auth-" + password, Target: ft, LeaseTTL: 2 * time.Second})
		return ft
	}
	good, bad := run("rootpw"), run("wrong")
	waitFor(t, 10*time.Second, "the configuration applied with the password", func() bool {
		return lastApplied(good) > 0 && good.State().Connected
	})
	waitFor(t, 10*time.Second, "the wrong password shown", func() bool {
		st := bad.State()
		return !st.Connected && st.Errors > 0 && strings.Contains(st.LastError, "authentication failed")
	})
	if lastApplied(bad) != 0 {
		t.Fatal("applied a configuration without authenticating")
	}
}

// TestAgentTLS: with etcd serving its clients over TLS and requiring a
// client certificate, an agent with the CA and a client certificate (as a
// fleet: section names them) reads and applies each configuration; one
// that trusts another CA, or presents no certificate, shows the TLS error
// that keeps it out and keeps the configuration it runs. Load fails so
// too.
func TestAgentTLS(t *testing.T) {
	c := testserver.StartEtcdTLS(t, 1)
	conn := func(ca, cert, key string) Conn {
		t.Helper()
		cn, err := ConnOf(&config.Fleet{Endpoints: c.Endpoints(), Prefix: prefix, TLSCA: ca, TLSCert: cert, TLSKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return cn
	}
	good := conn(c.PKI.CA, c.PKI.ClientCert, c.PKI.ClientKey)
	cli, err := Dial(good)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	publish := func(n int) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rev, err := Put(ctx, cli, prefix, []byte(poolsYAML(n)))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	first := publish(1)
	// A proxy runs the first version (Load read it as the proxy started).
	run := func(id string, cn Conn) *fakeTarget {
		ft := newFakeTarget()
		runAgent(t, Options{Conn: cn, Prefix: prefix, ID: id, Target: ft, LeaseTTL: 2 * time.Second,
			RequestTimeout: time.Second, ConfigRevision: first, ConfigChecksum: "sum1"})
		return ft
	}
	other := testserver.NewPKI(t)
	wrongCA := conn(other.CA, c.PKI.ClientCert, c.PKI.ClientKey)
	noCert := conn(c.PKI.CA, "", "")
	ok, badCA, anon := run("tls", good), run("wrong-ca", wrongCA), run("no-cert", noCert)
	second := publish(2)
	waitFor(t, 10*time.Second, "the second version applied over TLS", func() bool {
		return lastApplied(ok) == second && ok.State().Connected
	})
	for _, tc := range []struct {
		name string
		ft   *fakeTarget
		want string
	}{
		{"another CA", badCA, "x509: certificate signed by unknown authority"},
		// etcd refuses the handshake; the alert's name depends on the Go
		// version etcd was built with.
		{"no client certificate", anon, "tls: (bad certificate|certificate required)"},
	} {
		waitFor(t, 10*time.Second, tc.name+" shown", func() bool {
			st := tc.ft.State()
			return !st.Connected && st.Errors > 0 && regexp.MustCompile(tc.want).MatchString(st.LastError)
		})
		if applied, _, _, st := tc.ft.snapshot(); len(applied) != 0 || st.ConfigRevision != first {
			t.Fatalf("%s: applied %v, runs revision %d; want the first version (%d) kept", tc.name, applied,
				st.ConfigRevision, first)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cfg, rev, err := Load(ctx, good, prefix); err != nil || rev != second || len(cfg.Pools) != 2 {
		t.Fatalf("Load over TLS: revision %d, %v", rev, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := Load(ctx, wrongCA, prefix); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("Load trusting another CA: %v", err)
	}
}

// client is a's etcd client, once Run made it.
func client(t *testing.T, a *Agent) *clientv3.Client {
	t.Helper()
	var cli *clientv3.Client
	waitFor(t, 10*time.Second, "the agent's client", func() bool { cli = a.shared.Load(); return cli != nil })
	return cli
}
