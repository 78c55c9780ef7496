package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/observe"
	"shardproxy/route"
)

// Version is shardproxy's version, reported by memcache "version" and stats.
const Version = "0.1.0"

// Options are the run-time settings that do not come from the config file.
type Options struct {
	// Logger receives lifecycle events; default slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds how long a reload waits for removed backends'
	// in-flight requests before closing them; default 10s.
	DrainTimeout time.Duration
	// ScheduleReload, if set, is called when a pool asks for the
	// configuration to be reloaded (a route file's cron calls
	// mcp.schedule_config_reload); it must not block. nil: such asks are
	// ignored.
	ScheduleReload func()
	// FleetRing makes sharded pools with auto_eject_hosts and eject_policy
	// remap (ring pools, without sentinels) eject and restore servers
	// only as SetRing says, never on their own backends' health; a bad
	// backend still fails its requests fast. A fleet sets it (ring.go).
	FleetRing bool
	// Listen binds every pool listener and listen_tags address (network
	// "tcp" or "unix"); nil means Bind (net.Listen). A process that
	// inherits its listening sockets from the one it replaces passes a
	// hook that returns the inherited socket for an address it has one
	// for. A unix socket's permissions are applied to what it returns. A
	// pool with reuseport binds its own socket (see listen).
	Listen func(network, addr string) (net.Listener, error)
	// ReadyWait bounds how long after Start Ready waits for every pool's
	// servers to be tried; default DefaultReadyWait.
	ReadyWait time.Duration
}

// Server runs the pools of one configuration at a time and swaps to a new
// configuration on Reload without dropping a request.
type Server struct {
	log     *slog.Logger
	version string
	start   time.Time
	drain   time.Duration
	// scheduleReload is Options.ScheduleReload.
	scheduleReload func()
	fleetRing      bool                                             // Options.FleetRing
	listenFn       func(network, addr string) (net.Listener, error) // Options.Listen, or Bind
	fleet          atomic.Pointer[FleetState]                       // as SetFleetState last set it
	health         healthBook                                       // what WatchHealth's watchers were told
	drainer        drainState                                       // Drain, Ready (drain.go)

	currConns      atomic.Int64
	totalConns     atomic.Int64
	reloads        atomic.Int64
	reloadFailures atomic.Int64

	gen atomic.Pointer[generation] // what new requests use

	sources atomic.Pointer[SourceStats] // SetSourceStats

	metaLog metaLog // what each auto pool's servers speak, as last logged

	// backends are shared by the routers of successive generations:
	// each pool's router holds its own through a lease (see builder).
	backends backend.Registry

	members  atomic.Pointer[fleetMembers] // SetFleetMembers's (clusterview.go)
	tap      observe.Tap                  // every pool's requests, to the subscribers of Tap
	tracer   atomic.Pointer[tracerBox]    // SetTracer's; nil: no tracing (observe.go)
	tracking trackHub                     // client-side caching's trackers, by pool (tracker.go)

	mu        sync.Mutex      // serialises Start, Reload, SetRing and Shutdown; guards the fields below
	removed   []*poolStats    // of pools a reload removed, the latest last (removedPools at most)
	rings     map[string]Ring // by pool name, as SetRing last set them
	listeners map[listenKey]*listener
	sessions  map[*session]struct{}
	started   bool
	closed    bool
	wg        sync.WaitGroup // accept loops and sessions
	bg        sync.WaitGroup // retirements of replaced pools
}

// generation is one loaded configuration.
type generation struct {
	info      Info
	pools     []*pool // in config order (twemproxy's)
	listeners map[string]*listener
	// watchers hear of every backend state change (a sharded pool
	// ejecting a server).
	watchers []func(b *backend.Backend, bad bool)
}

// listener is one bound address. It survives a reload that keeps its address
// and then serves the new generation's pool.
type listener struct {
	key  listenKey
	ln   net.Listener
	pool atomic.Pointer[pool]
	// tag is the listen_tags tag the pool gave this address ("" for its
	// listen): stored before pool, so a session that loads the pool then
	// the tag sees the pair a reload set.
	tag atomic.Pointer[string]
}

// tagged is where gen.listeners keeps a pool's listener of tag ("" for
// its listen).
func tagged(pool, tag string) string {
	if tag == "" {
		return pool
	}
	return pool + "\x00" + tag
}

// listens returns the addresses pc listens on: its listen (tag "", none
// for a pool without listen) and its listen_tags.
func listens(pc *config.Pool) []config.TaggedListen {
	if pc.Listen == (config.Listen{}) { // a pool only a route pool reaches
		return pc.ListenTags
	}
	return append([]config.TaggedListen{{Listen: pc.Listen}}, pc.ListenTags...)
}

// listenKey identifies a listen address: a reload keeps a listener whose
// key is unchanged. Port 0 never matches (each binds a fresh port).
type listenKey struct {
	network, addr string
	fresh         uint64 // only for port 0: unique, so never matched
}

var freshListeners atomic.Uint64

// New builds a Server for cfg. Nothing is bound until Start.
func New(cfg *config.Config, opts Options) (*Server, error) {
	s := newServer(opts)
	b := &builder{s: s}
	gen, err := b.build(cfg)
	if err != nil {
		return nil, err
	}
	s.gen.Store(gen)
	s.logMetaSummaries(gen)
	s.tracking.reloaded(gen.pools) // a server gen adds, or gives new options, is tracked at once
	return s, nil
}

// newServer returns a Server with no configuration yet.
func newServer(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	if opts.Listen == nil {
		opts.Listen = Bind
	}
	if opts.ReadyWait <= 0 {
		opts.ReadyWait = DefaultReadyWait
	}
	s := &Server{
		log:            opts.Logger,
		version:        Version,
		start:          time.Now(),
		drain:          opts.DrainTimeout,
		scheduleReload: opts.ScheduleReload,
		fleetRing:      opts.FleetRing,
		listenFn:       opts.Listen,
		rings:          map[string]Ring{},
		listeners:      map[listenKey]*listener{},
		sessions:       map[*session]struct{}{},
	}
	s.backends.Drain = opts.DrainTimeout
	s.drainer.readyWait = opts.ReadyWait
	return s
}

// builder builds a generation. Each pool's router takes its backends
// from a lease of the server's registry: one the running generation holds
// too is kept, sockets, health and all.
type builder struct {
	s        *Server
	check    bool // a configuration test (Check): build everything, dial nothing
	watchers []func(b *backend.Backend, bad bool)
	links    []func(routers map[string]route.Router)
}

// build makes every pool of cfg, then links them (eject_policy failover
// names another pool). On error it closes what it created.
func (b *builder) build(cfg *config.Config) (*generation, error) {
	gen := &generation{
		info:      Info{Config: cfg, Source: cfg.Source, LoadedAt: time.Now()},
		listeners: map[string]*listener{},
	}
	byName := map[string]route.Router{}
	for _, pc := range cfg.Pools {
		lease := b.s.backends.Lease(pc.Name)
		p, err := newPool(b, cfg, pc, lease, b.s.pool(pc.Name))
		if err != nil {
			lease.Release(false)
			abort(gen)
			return nil, err
		}
		gen.pools = append(gen.pools, p)
		byName[pc.Name] = p.router
	}
	for _, link := range b.links {
		link(byName)
	}
	gen.watchers = b.watchers
	gen.info.Checksum = Checksum(cfg)
	return gen, nil
}

// abort closes the routers of a generation that never ran and gives back
// their backends: the ones it made close at once.
func abort(gen *generation) {
	for _, p := range gen.pools {
		p.router.Close()
		p.lease.Release(false)
	}
}

// backendCounts reports how many distinct backends gen's routers made and
// how many they found running.
func (gen *generation) backendCounts() (made, kept int) {
	for _, p := range gen.pools {
		m, k := p.lease.Counts()
		made, kept = made+m, kept+k
	}
	return made, kept
}

// pool returns the running pool called name, or nil.
func (s *Server) pool(name string) *pool {
	if gen := s.gen.Load(); gen != nil {
		for _, p := range gen.pools {
			if p.cfg.Name == name {
				return p
			}
		}
	}
	return nil
}

// currentPools returns the running generation's pools.
func (s *Server) currentPools() []*pool {
	if gen := s.gen.Load(); gen != nil {
		return gen.pools
	}
	return nil
}

// Info describes the running configuration.
func (s *Server) Info() Info { return s.gen.Load().info }

// backendStateChanged tells the running generation's watchers, and
// WatchHealth's of a ring pool's server.
func (s *Server) backendStateChanged(b *backend.Backend, bad bool) {
	if gen := s.gen.Load(); gen != nil {
		for _, w := range gen.watchers {
			w(b, bad)
		}
		s.health.backendChanged(gen, b)
	}
}

func keyFor(l config.Listen) listenKey {
	k := listenKey{network: l.Network, addr: l.Addr}
	if _, port, err := net.SplitHostPort(l.Addr); err == nil && port == "0" {
		k.fresh = freshListeners.Add(1)
	}
	return k
}

// bind binds every listener gen needs that is not bound yet. On error it
// closes the ones it bound and returns the error.
func (s *Server) bind(gen *generation) ([]*listener, error) {
	var bound []*listener
	for _, p := range gen.pools {
		for _, tl := range listens(p.cfg) {
			l, isNew, err := s.bindOne(p.cfg, tl.Listen)
			if err != nil {
				for _, l := range bound {
					l.ln.Close()
				}
				return nil, err
			}
			if isNew {
				bound = append(bound, l)
			}
			gen.listeners[tagged(p.cfg.Name, tl.Tag)] = l
		}
	}
	return bound, nil
}

// bindOne returns the listener of pc at addr: the running one, or a new
// one bound (isNew).
func (s *Server) bindOne(pc *config.Pool, addr config.Listen) (l *listener, isNew bool, err error) {
	k := keyFor(addr)
	if l := s.listeners[k]; l != nil {
		return l, false, nil
	}
	ln, err := listen(pc, addr, s.listenFn)
	if err != nil {
		return nil, false, fmt.Errorf("proxy: pool %q: listen %s: %w", pc.Name, addr.Addr, err)
	}
	l = &listener{key: k}
	l.ln = withTLS(ln, l.tlsConfig)
	return l, true, nil
}

// Start binds every pool's listener and starts serving. If any listener
// cannot be bound, the ones already bound are closed and nothing serves.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen.Load()
	bound, err := s.bind(gen)
	if err != nil {
		return err
	}
	s.started = true
	s.activate(gen, bound)
	s.drainer.startedAt.Store(time.Now().UnixNano())
	return nil
}

// activate points every listener of gen at its pool and starts the accept
// loops of the newly bound ones.
func (s *Server) activate(gen *generation, bound []*listener) {
	for _, p := range gen.pools {
		for _, tl := range listens(p.cfg) {
			gen.listeners[tagged(p.cfg.Name, tl.Tag)].serve(p, tl.Tag)
		}
	}
	for _, l := range bound {
		s.listeners[l.key] = l
		s.wg.Add(1)
		go s.accept(l)
	}
	for _, p := range gen.pools {
		l := gen.listeners[p.cfg.Name]
		if l == nil { // a pool without listen, reached through a route pool
			attrs := []any{"pool", p.cfg.Name, "protocol", p.dialect.Name()}
			s.log.Info("pool routed", append(attrs, p.kind.Describe(p.cfg, p.router)...)...)
			continue
		}
		addr := l.ln.Addr().String()
		p.bound.Store(&addr)
		attrs := []any{"pool", p.cfg.Name, "addr", addr, "protocol", p.dialect.Name()}
		s.log.Info("pool listening", append(attrs, p.kind.Describe(p.cfg, p.router)...)...)
	}
}

// serve points l at p, its requests tagged tag.
func (l *listener) serve(p *pool, tag string) {
	l.tag.Store(&tag)
	l.pool.Store(p)
}

// tagOf returns l's tag.
func (l *listener) tagOf() string {
	if t := l.tag.Load(); t != nil {
		return *t
	}
	return ""
}

// Addr returns the address pool name is listening on, or nil.
func (s *Server) Addr(name string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.gen.Load().listeners[name]; l != nil {
		return l.ln.Addr()
	}
	return nil
}

func (s *Server) accept(l *listener) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, keep serving.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "addr", l.ln.Addr().String(), "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		p := l.pool.Load()
		if limit := p.cfg.ClientConnections; limit > 0 && p.stats.ClientConnections.Load() >= int64(limit) {
			p.stats.ClientErr.Add(1)
			// Not in the accept loop: over TLS the write waits for the
			// client's handshake.
			go func(nc net.Conn, msg []byte) {
				nc.SetDeadline(time.Now().Add(time.Second))
				nc.Write(msg)
				nc.Close()
			}(nc, p.dialect.AppendError(nil, codec.ErrServer, "too many client connections"))
			continue
		}
		if !s.serveSession(l, p, newSession(l, p, nc)) {
			nc.Close()
			return
		}
	}
}

// serveSession serves sess, a connection of l's pool p, on a goroutine of
// its own, counted among the server's sessions; false when the server is
// closed and not draining.
func (s *Server) serveSession(l *listener, p *pool, sess *session) bool {
	s.mu.Lock()
	if s.closed && !s.drainer.draining.Load() {
		s.mu.Unlock()
		return false
	}
	if s.closed {
		// Accepted as the drain began (an upgrade's listener is
		// shared with the new process): its client has likely sent
		// its first request already. It is answered, as on any
		// draining connection, rather than lost to a close.
		sess.drain(s.drainer.handOff)
		s.drainer.late.Add(1)
	}
	s.sessions[sess] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.currConns.Add(1)
	s.totalConns.Add(1)
	stats := p.stats
	stats.ClientConnections.Add(1)
	go func() {
		defer s.wg.Done()
		sess.serve()
		stats.ClientConnections.Add(-1)
		s.currConns.Add(-1)
		s.mu.Lock()
		delete(s.sessions, sess)
		s.mu.Unlock()
	}()
	return true
}

// Reload replaces the running configuration with cfg without dropping a
// request: cfg is built and its new listeners bound beside the running
// ones; then every listener switches to its new pool at once. Backends with
// the same server and options keep their sockets and health; replaced ones
// finish their in-flight requests and close; listeners no longer in cfg
// close after their clients' in-flight requests are answered. If building
// or binding fails, nothing changes and the error is returned.
func (s *Server) Reload(cfg *config.Config) error {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("proxy: reload after shutdown")
	}
	b := &builder{s: s}
	gen, err := b.build(cfg)
	if err == nil && s.started {
		var bound []*listener
		if bound, err = s.bind(gen); err == nil {
			s.swap(gen, bound)
		} else {
			abort(gen)
		}
	} else if err == nil {
		s.swap(gen, nil)
	}
	if err != nil {
		s.refused(cfg.Source, err)
		return err
	}
	for _, p := range gen.pools {
		if w, ok := p.router.(route.ReloadWatcher); ok {
			w.Reloaded()
		}
	}
	s.health.sync(gen)
	s.reloads.Add(1)
	made, kept := gen.backendCounts()
	s.log.Info("reloaded", "source", cfg.Source, "pools", len(gen.pools),
		"backends_kept", kept, "backends_new", made, "took", time.Since(start))
	return nil
}

// ReloadFailed counts a reload that failed before Reload was called (the
// file could not be read or parsed).
func (s *Server) ReloadFailed(source string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused(source, err)
}

// refused counts and logs a failed reload, and tells the running routers
// that watch for it. Called with s.mu held.
func (s *Server) refused(source string, err error) {
	s.reloadFailures.Add(1)
	s.log.Error("reload refused", "source", source, "err", err)
	if gen := s.gen.Load(); gen != nil {
		for _, p := range gen.pools {
			if w, ok := p.router.(route.ReloadWatcher); ok {
				w.ReloadFailed(err)
			}
		}
	}
}

// swap makes gen the running generation. Called with s.mu held.
func (s *Server) swap(gen *generation, bound []*listener) {
	old := s.gen.Load()
	s.keepRemoved(old, gen)
	if s.started {
		s.activate(gen, bound)
	}
	s.gen.Store(gen)
	s.logMetaSummaries(gen)

	// Listeners gen does not use: close them and let their sessions finish.
	keep := map[*listener]bool{}
	for _, l := range gen.listeners {
		keep[l] = true
	}
	for k, l := range s.listeners {
		if keep[l] {
			continue
		}
		delete(s.listeners, k)
		l.ln.Close()
		for sess := range s.sessions {
			if sess.l == l {
				sess.stop()
			}
		}
		s.log.Info("listener closed", "addr", l.ln.Addr().String())
	}

	// The old pools retire once their requests are answered.
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.retire(old.pools)
	}()
}

// removedPools bounds how many removed pools' counters a Server keeps, so
// that a pool added back under its name counts on (poolStats.name).
const removedPools = 64

// keepRemoved keeps the counters of old's pools that gen lacks, and
// forgets the kept ones gen has taken back. Called with s.mu held.
func (s *Server) keepRemoved(old, gen *generation) {
	running := map[string]bool{}
	for _, p := range gen.pools {
		running[p.cfg.Name] = true
	}
	kept := s.removed[:0]
	for _, ps := range s.removed {
		if !running[ps.name] {
			kept = append(kept, ps)
		}
	}
	if old != nil {
		for _, p := range old.pools {
			if !running[p.cfg.Name] {
				kept = append(kept, p.stats)
			}
		}
	}
	s.removed = kept[max(0, len(kept)-removedPools):]
}

// removedStats returns the kept counters of a removed pool called name,
// or nil. Called with s.mu held (builds run under it).
func (s *Server) removedStats(name string) *poolStats {
	for i := len(s.removed) - 1; i >= 0; i-- {
		if s.removed[i].name == name {
			return s.removed[i]
		}
	}
	return nil
}

// retire waits until no session routes with the old pools and every
// request they routed is answered and written (or the drain timeout
// passes), then closes their routers and gives back their backends: the
// ones the running generation does not hold close once their queues are
// empty. Every kind of router retires this way.
func (s *Server) retire(old []*pool) {
	deadline := time.Now().Add(s.drain)
	for _, p := range old {
		for (p.routing.Load() > 0 || p.inflight.Load() > 0) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	for _, p := range old {
		p.router.Close()
		p.lease.Release(true)
	}
}

// Shutdown drains the server (Drain), then closes the backends. If ctx
// ends first, the remaining client connections are cut and ctx's error is
// returned.
func (s *Server) Shutdown(ctx context.Context) error {
	_, err := s.Drain(ctx)
	s.bg.Wait()
	s.mu.Lock()
	for _, p := range s.gen.Load().pools {
		p.router.Close()
		p.lease.Release(false)
	}
	s.mu.Unlock()
	s.wg.Wait() // the sessions cut: their requests fail with their backends
	s.backends.Wait()
	return err
}
