package sentinel

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a zero Config's fields.
const (
	// DefaultTimeout bounds a dial, its AUTH, and each request to a
	// Sentinel or a server.
	DefaultTimeout = time.Second
	// DefaultRefresh is how often every Sentinel is asked for every master
	// although no event came.
	DefaultRefresh = 5 * time.Second
)

const (
	// retryGap is how soon a resolve that left a master unknown, or that
	// a failed check of an event asked for, runs again.
	retryGap = time.Second
	// minGap spaces resolves asked for by Refresh.
	minGap = 100 * time.Millisecond
	// maxReasons bounds the reasons a failed resolve reports.
	maxReasons = 4
)

// Config says which masters to follow through which Sentinels.
type Config struct {
	// Sentinels are the Sentinels' "host:port" addresses; any one that
	// answers is enough. Required.
	Sentinels []string
	// Masters are the master names (as in "sentinel monitor <name> ...")
	// to follow. Required.
	Masters []string
	// Auth is what every Sentinel connection authenticates with (the
	// Sentinels' requirepass, or an ACL user); zero: no AUTH.
	Auth Auth
	// TLS, when set, makes Sentinel connections TLS; nil: plain.
	TLS *tls.Config
	// ServerAuth and ServerTLS are how the connection that checks a
	// server's ROLE reaches it: the pool's own redis_auth and server TLS.
	ServerAuth Auth
	ServerTLS  *tls.Config
	// Timeout bounds each dial plus AUTH and each request; default
	// DefaultTimeout (1s).
	Timeout time.Duration
	// Refresh is how often the Sentinels are asked for every master;
	// default DefaultRefresh (5s). Events (+switch-master) act at once.
	Refresh time.Duration
	// Start are master addresses by name known already (a reload passes
	// the running monitor's Addrs): they are used until the Sentinels say
	// otherwise, and OnSwitch is not called for them.
	Start map[string]string
	// OnSwitch is called on the monitor's goroutine when a master's
	// address becomes known or changes to a server that answered ROLE
	// "master"; from is "" the first time. It must not block, nor call
	// Close.
	OnSwitch func(master, addr, from string)
	// OnReplicas, when set, makes the monitor learn each master's
	// replicas: every resolve asks the Sentinels (SENTINEL REPLICAS, the
	// first that answers) and OnReplicas hears of a master's replicas
	// that no Sentinel flags down or disconnected, sorted, the first time
	// and whenever they change. It is called on the monitor's goroutine,
	// after OnSwitch, and must not block nor call Close. The addresses
	// are not checked: a Sentinel's view of a replica lags.
	OnReplicas func(master string, addrs []string)
	// Logger receives switches (Info), refused answers and lost
	// subscriptions (Warn); default slog.Default().
	Logger *slog.Logger
}

// Monitor follows the masters of Config.Masters: it asks the Sentinels for
// them at New, every Refresh and when asked, listens to every Sentinel's
// +switch-master events, and checks with ROLE that an address it is given
// is a master before it reports it. All methods are safe for concurrent
// use.
type Monitor struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	addrs   map[string]string // name -> verified master address
	events  []event           // +switch-master events not yet followed
	resolve bool              // a resolve was asked for
	subs    map[string]*conn  // subscriber connections, for Close
	closed  bool

	queries map[string]*conn    // the resolver's connection per Sentinel
	refused map[string]string   // master -> the address last refused, logged once
	reps    map[string][]string // master -> replicas last reported to OnReplicas
	known   chan struct{}       // closed once every master has an address
	kick    chan struct{}       // wakes the resolver; capacity 1
	stop    chan struct{}
	wg      sync.WaitGroup

	stats counters
}

// event is one +switch-master message.
type event struct {
	sentinel, master, addr string
}

type counters struct {
	switches, events, rejected, queries, queryFailures, subscribed atomic.Int64
}

// Stats are a Monitor's counters.
type Stats struct {
	// Switches counts master address changes reported to OnSwitch.
	Switches int64
	// Events counts +switch-master messages received for followed masters
	// (each Sentinel sends one per failover).
	Events int64
	// Rejected counts addresses refused because the server did not answer
	// ROLE "master" (a replica, a Sentinel's lie, a stale answer).
	Rejected int64
	// Queries and QueryFailures count get-master-addr-by-name requests and
	// those that got no answer (Sentinel down, timeout, error reply).
	Queries, QueryFailures int64
	// Subscribed is how many Sentinels the monitor is subscribed to now.
	Subscribed int64
	// Known is how many masters have an address.
	Known int
}

// New validates cfg and starts following its masters: one resolver
// goroutine and one subscriber goroutine per Sentinel. It does not wait
// for answers; see Wait.
func New(cfg Config) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Monitor{
		cfg: cfg, log: cfg.Logger, addrs: map[string]string{}, subs: map[string]*conn{},
		queries: map[string]*conn{}, refused: map[string]string{}, reps: map[string][]string{}, known: make(chan struct{}), kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	for _, name := range cfg.Masters {
		if a := cfg.Start[name]; a != "" {
			m.addrs[name] = a
		}
	}
	m.checkKnown()
	m.wg.Add(1 + len(cfg.Sentinels))
	go m.run()
	for _, s := range cfg.Sentinels {
		go m.subscribe(s)
	}
	return m, nil
}

// Validate checks that cfg names Sentinels and masters.
func (cfg *Config) Validate() error {
	switch {
	case len(cfg.Sentinels) == 0:
		return errors.New("sentinel: no sentinels")
	case len(cfg.Masters) == 0:
		return errors.New("sentinel: no masters")
	}
	return nil
}

// Addr returns master's address, or "" while it is unknown.
func (m *Monitor) Addr(master string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addrs[master]
}

// Addrs returns a copy of every known master address by name.
func (m *Monitor) Addrs() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.addrs))
	for k, v := range m.addrs {
		out[k] = v
	}
	return out
}

// Wait waits up to timeout until every master has an address and reports
// whether they all have.
func (m *Monitor) Wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-m.known:
		return true
	case <-t.C:
		return false
	case <-m.stop:
		return false
	}
}

// Refresh asks for the Sentinels to be asked again soon (a master's server
// failed); it does not wait.
func (m *Monitor) Refresh() {
	m.mu.Lock()
	m.resolve = true
	m.mu.Unlock()
	m.wake()
}

// Stats returns the counters now.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	known := len(m.addrs)
	m.mu.Unlock()
	return Stats{
		Switches: m.stats.switches.Load(), Events: m.stats.events.Load(), Rejected: m.stats.rejected.Load(),
		Queries: m.stats.queries.Load(), QueryFailures: m.stats.queryFailures.Load(),
		Subscribed: m.stats.subscribed.Load(), Known: known,
	}
}

// Close stops the goroutines, closes every connection and waits; OnSwitch
// is not called after Close returns. It is idempotent.
func (m *Monitor) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	for _, c := range m.subs {
		c.close()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Monitor) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// post queues a +switch-master event for the resolver.
func (m *Monitor) post(ev event) {
	m.stats.events.Add(1)
	m.mu.Lock()
	m.events = append(m.events, ev)
	m.mu.Unlock()
	m.wake()
}

// run is the resolver: the one goroutine that asks Sentinels, checks
// roles and calls OnSwitch, so that a master's changes are reported in
// order. It resolves at once, every Refresh, when asked, and a second after
// a resolve that left a master unknown or could not follow an event.
func (m *Monitor) run() {
	defer m.wg.Done()
	defer m.closeQueries()
	tick := time.NewTicker(m.cfg.Refresh)
	defer tick.Stop()
	var retry <-chan time.Time
	full := true
	var last time.Time
	for {
		if full {
			if wait := time.Until(last.Add(minGap)); wait > 0 && !m.sleep(wait) {
				return
			}
			last = time.Now()
			retry = nil
			if err := m.resolveAll(); err != nil {
				retry = time.After(retryGap)
			}
		}
		select {
		case <-m.stop:
			return
		case <-tick.C:
			full = true
		case <-retry:
			full = true
		case <-m.kick:
			full = false
		}
		m.mu.Lock()
		evs, asked := m.events, m.resolve
		m.events, m.resolve = nil, false
		m.mu.Unlock()
		for _, ev := range evs {
			// A failover changes the replicas too: the old master comes
			// back as one, the promoted one is none any more.
			if !m.follow(ev) || m.cfg.OnReplicas != nil {
				full = true
			}
		}
		full = full || asked
	}
}

// sleep waits d and reports false when the monitor was closed meanwhile.
func (m *Monitor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-m.stop:
		return false
	case <-t.C:
		return true
	}
}

// follow acts on one +switch-master event: the new address is reported
// once its ROLE says master. It reports false when it could not check.
func (m *Monitor) follow(ev event) bool {
	if m.Addr(ev.master) == ev.addr {
		return true
	}
	if err := m.check(ev.master, ev.addr, "sentinel "+ev.sentinel); err != nil {
		return false
	}
	m.install(ev.master, ev.addr, "+switch-master from "+ev.sentinel)
	return true
}

// resolveAll asks every Sentinel for every master and installs, for each
// master, the address most Sentinels give that is a master. It returns an
// error when a master is left without an address or a refused answer
// stood in the way.
func (m *Monitor) resolveAll() error {
	answers := make(map[string][]tally, len(m.cfg.Masters))
	var reasons []string
	for _, s := range m.cfg.Sentinels {
		for _, name := range m.cfg.Masters {
			addr, err := m.ask(s, name)
			if err != nil {
				reasons = append(reasons, s+": "+err.Error())
				if !errors.Is(err, ErrNoMaster) {
					break // the Sentinel is down or broken: skip its other masters
				}
				continue
			}
			answers[name] = vote(answers[name], addr, s)
		}
	}
	var errs []string
	for _, name := range m.cfg.Masters {
		if err := m.choose(name, answers[name]); err != nil {
			errs = append(errs, name+": "+err.Error())
		}
	}
	if m.cfg.OnReplicas != nil {
		m.learnReplicas()
	}
	if len(errs) == 0 {
		return nil
	}
	if len(reasons) > maxReasons {
		reasons = append(reasons[:maxReasons], fmt.Sprintf("and %d more", len(reasons)-maxReasons))
	}
	return fmt.Errorf("sentinel: %s (%s)", strings.Join(errs, "; "), strings.Join(reasons, "; "))
}

// tally is one address some Sentinels gave for a master.
type tally struct {
	addr string
	by   []string
}

func vote(ts []tally, addr, sentinel string) []tally {
	for i := range ts {
		if ts[i].addr == addr {
			ts[i].by = append(ts[i].by, sentinel)
			return ts
		}
	}
	return append(ts, tally{addr: addr, by: []string{sentinel}})
}

// choose installs name's best answer: the one most Sentinels gave (the
// current address first among equals) whose ROLE says master. The current
// address is kept when it comes before every other answer that checks.
func (m *Monitor) choose(name string, ts []tally) error {
	if len(ts) == 0 {
		if m.Addr(name) != "" {
			return nil // no Sentinel answered: keep what we have
		}
		return errors.New("no sentinel answered")
	}
	cur := m.Addr(name)
	slices.SortStableFunc(ts, func(a, b tally) int {
		if c := cmp.Compare(len(b.by), len(a.by)); c != 0 {
			return c
		}
		switch {
		case a.addr == cur:
			return -1
		case b.addr == cur:
			return 1
		}
		return 0
	})
	var last error
	for _, t := range ts {
		if t.addr == cur {
			return nil
		}
		if last = m.check(name, t.addr, "sentinels "+strings.Join(t.by, ",")); last == nil {
			m.install(name, t.addr, "sentinels "+strings.Join(t.by, ","))
			return nil
		}
	}
	// No Sentinel names the current address, and none of their answers
	// checks: keep it (or stay without one) and ask again soon.
	return last
}

// ask sends get-master-addr-by-name to Sentinel s on the resolver's
// connection, dialling it when needed; a connection that failed is dropped.
func (m *Monitor) ask(s, name string) (string, error) {
	m.stats.queries.Add(1)
	c := m.queries[s]
	if c == nil {
		var err error
		if c, err = dial(s, m.cfg.Auth, m.cfg.TLS, m.cfg.Timeout); err != nil {
			m.stats.queryFailures.Add(1)
			return "", err
		}
		m.queries[s] = c
	}
	addr, err := c.masterAddr(name, m.cfg.Timeout)
	if err != nil {
		m.stats.queryFailures.Add(1)
		m.dropBroken(s, c, err)
	}
	return addr, err
}

// dropBroken closes and forgets c, the resolver's connection to Sentinel
// s, when err says the connection broke; an error reply or ErrNoMaster
// leaves it usable.
func (m *Monitor) dropBroken(s string, c *conn, err error) {
	var re *ReplyError
	if err == nil || errors.Is(err, ErrNoMaster) || errors.As(err, &re) {
		return
	}
	c.close()
	delete(m.queries, s)
}

func (m *Monitor) closeQueries() {
	for s, c := range m.queries {
		c.close()
		delete(m.queries, s)
	}
}

// check asks the server at addr for its ROLE; anything but "master" is
// refused, counted and logged (who said so is via; an address refused
// again is logged once). It runs on the resolver goroutine only.
func (m *Monitor) check(name, addr, via string) error {
	c, err := dial(addr, m.cfg.ServerAuth, m.cfg.ServerTLS, m.cfg.Timeout)
	if err != nil {
		return err
	}
	defer c.close()
	role, err := c.role(m.cfg.Timeout)
	if err != nil {
		return err
	}
	if role != "master" {
		m.stats.rejected.Add(1)
		if m.refused[name] == addr {
			return fmt.Errorf("%w: %s is a %s", ErrNotMaster, addr, role)
		}
		m.refused[name] = addr
		m.log.Warn("sentinel answer refused: not a master", "master", name, "addr", addr, "role", role, "via", via)
		return fmt.Errorf("%w: %s is a %s", ErrNotMaster, addr, role)
	}
	return nil
}

// install makes addr name's master and reports it.
func (m *Monitor) install(name, addr, via string) {
	m.mu.Lock()
	from := m.addrs[name]
	m.addrs[name] = addr
	m.mu.Unlock()
	if from == "" {
		m.log.Info("sentinel master found", "master", name, "addr", addr, "via", via)
	} else {
		m.stats.switches.Add(1)
		m.log.Info("sentinel master switched", "master", name, "from", from, "to", addr, "via", via)
	}
	if m.cfg.OnSwitch != nil {
		m.cfg.OnSwitch(name, addr, from)
	}
	m.checkKnown() // after OnSwitch: Wait's caller finds the address in use
}

// checkKnown closes known once every master has an address.
func (m *Monitor) checkKnown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.known:
		return
	default:
	}
	for _, name := range m.cfg.Masters {
		if m.addrs[name] == "" {
			return
		}
	}
	close(m.known)
}

// learnReplicas asks the Sentinels for every master's replicas, the first
// Sentinel that answers for each, and reports the lists that changed. A
// master's own address is left out (a Sentinel may list a promoted
// replica until it notices).
func (m *Monitor) learnReplicas() {
	for _, name := range m.cfg.Masters {
		for _, s := range m.cfg.Sentinels {
			c := m.queries[s]
			if c == nil {
				continue // ask dialled it, and it failed: down
			}
			addrs, err := c.replicas(name, m.cfg.Timeout)
			if err != nil {
				m.dropBroken(s, c, err)
				continue
			}
			master := m.Addr(name)
			addrs = slices.DeleteFunc(addrs, func(a string) bool { return a == master })
			if old, ok := m.reps[name]; !ok || !slices.Equal(old, addrs) {
				m.reps[name] = addrs
				m.log.Info("sentinel replicas", "master", name, "replicas", strings.Join(addrs, ","), "via", s)
				m.cfg.OnReplicas(name, addrs)
			}
			break
		}
	}
}
