package backend

import (
	"crypto/tls"
	"sync"
	"time"

	"shardproxy/codec"
)

// Source hands out backends to a router: Get returns the backend for a
// configuration, Put gives it back when the router no longer uses it.
type Source interface {
	// Get returns a backend for cfg, made on first use.
	Get(cfg Config) *Backend
	// Put gives back a backend Get returned. Once nothing holds it, the
	// backend finishes its requests in flight and closes.
	Put(b *Backend)
}

// Direct is the Source without sharing: Get makes a new backend, Put
// closes it at once.
type Direct struct{}

var _ Source = Direct{}

// Get implements Source.
func (Direct) Get(cfg Config) *Backend { return New(cfg) }

// Put implements Source.
func (Direct) Put(b *Backend) { b.Close() }

// Registry shares backends between the routers of successive
// configurations, counting their users as Caddy's usage pool does: a reload
// builds the new routers beside the old ones, so a server both use is held
// twice during the swap and keeps its sockets and health; the last Put of a
// backend closes it, once its queues have drained. All methods are safe for
// concurrent use.
type Registry struct {
	// Drain bounds how long a backend nothing holds any more waits for its
	// requests in flight before it closes; default 10s.
	Drain time.Duration
	// RetainNames bounds, per scope, the names without a live backend
	// whose counts Totals keeps (tally.go); default DefaultRetainNames.
	RetainNames int

	mu      sync.Mutex
	entries map[registryKey]*registryEntry
	byPtr   map[*Backend]*registryEntry
	tallies map[string]*tally // by scope
	seq     uint64            // counts closes, to order idle names and scopes
	closing sync.WaitGroup
}

// registryKey is what makes two configurations the same backend: every
// field that changes the sockets or the health rules. Logger is left out;
// a backend that reports its state changes never stands for one that does
// not.
type registryKey struct {
	scope                   string
	name, addr              string
	dialect                 codec.Dialect
	handshake               codec.HandshakeOptions
	conns                   int
	connect, timeout, retry time.Duration
	health, healthTimeout   time.Duration
	failureLimit            int
	keepalive, preconnect   bool
	tls                     *tls.Config
	watched, evented        bool
	reconnect, noJoin       bool
	breaks                  bool
	replay                  Replayer
}

type registryEntry struct {
	key  registryKey
	b    *Backend
	refs int
}

// Lease is one router's hold on a Registry: its backends are not shared
// with another scope (a pool's name), and Release gives back everything it
// still holds. A Lease is a Source; it is safe for concurrent use.
type Lease struct {
	r     *Registry
	scope string

	mu   sync.Mutex
	held map[*Backend]int
	made int // backends Get had to create
	kept int // backends Get found already running
}

var _ Source = (*Lease)(nil)

// Lease returns a new lease of r for scope.
func (r *Registry) Lease(scope string) *Lease {
	return &Lease{r: r, scope: scope, held: map[*Backend]int{}}
}

// Get implements Source.
func (l *Lease) Get(cfg Config) *Backend {
	b, made := l.r.get(l.scope, cfg)
	l.mu.Lock()
	l.held[b]++
	if made {
		l.made++
	} else if l.held[b] == 1 {
		l.kept++
	}
	l.mu.Unlock()
	return b
}

// Put implements Source.
func (l *Lease) Put(b *Backend) {
	l.mu.Lock()
	n, ok := l.held[b]
	if ok {
		if n == 1 {
			delete(l.held, b)
		} else {
			l.held[b] = n - 1
		}
	}
	l.mu.Unlock()
	if ok {
		l.r.put(b, true)
	}
}

// Release gives back every backend the lease holds. drain false closes
// the ones nothing else holds at once (a configuration that failed to
// build never served a request).
func (l *Lease) Release(drain bool) {
	l.mu.Lock()
	held := l.held
	l.held = map[*Backend]int{}
	l.mu.Unlock()
	for b, n := range held {
		for range n {
			l.r.put(b, drain)
		}
	}
}

// Counts reports how many distinct backends the lease's Gets created and
// how many they found running (a reload keeps those).
func (l *Lease) Counts() (made, kept int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.made, l.kept
}

func (r *Registry) get(scope string, cfg Config) (*Backend, bool) {
	k := registryKey{
		scope: scope, name: cfg.Name, addr: cfg.Addr, dialect: cfg.Dialect,
		handshake: cfg.Handshake, conns: cfg.Conns, connect: cfg.ConnectTimeout,
		timeout: cfg.Timeout, retry: cfg.RetryTimeout, failureLimit: cfg.FailureLimit,
		health: cfg.HealthInterval, healthTimeout: cfg.HealthTimeout,
		keepalive: cfg.TCPKeepalive, preconnect: cfg.Preconnect, tls: cfg.TLS,
		watched: cfg.OnStateChange != nil, evented: cfg.OnEvent != nil,
		reconnect: cfg.Reconnect, noJoin: cfg.NoJoin, breaks: cfg.BreaksStream != nil, replay: cfg.Replay,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = map[registryKey]*registryEntry{}
		r.byPtr = map[*Backend]*registryEntry{}
	}
	if e, ok := r.entries[k]; ok {
		e.refs++
		return e.b, false
	}
	e := &registryEntry{key: k, b: New(cfg), refs: 1}
	r.entries[k] = e
	r.byPtr[e.b] = e
	r.madeLocked(scope, e.b)
	return e.b, true
}

// put drops one hold on b; the last one closes it, after its queues drain
// when drain is set.
func (r *Registry) put(b *Backend, drain bool) {
	r.mu.Lock()
	e, ok := r.byPtr[b]
	if !ok {
		r.mu.Unlock()
		return
	}
	e.refs--
	if e.refs > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.byPtr, b)
	delete(r.entries, e.key)
	r.closing.Add(1)
	r.mu.Unlock()
	if !drain {
		b.Close()
		r.closed(e.key.scope, b)
		r.closing.Done()
		return
	}
	go func() {
		defer r.closing.Done()
		b.drain(r.drainTimeout())
		b.Close()
		r.closed(e.key.scope, b)
	}()
}

func (r *Registry) drainTimeout() time.Duration {
	if r.Drain > 0 {
		return r.Drain
	}
	return 10 * time.Second
}

// Len reports how many backends the registry holds.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Wait blocks until every backend put back for the last time has closed.
func (r *Registry) Wait() { r.closing.Wait() }

// drain waits, up to timeout, until no request is queued or in flight.
func (b *Backend) drain(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for b.stats.InQueue.Load()+b.stats.OutQueue.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
