package proxy

import (
	"context"
	"crypto/tls"
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
}

// Server runs the pools of one configuration at a time and swaps to a new
// configuration on Reload without dropping a request.
type Server struct {
	log     *slog.Logger
	version string
	start   time.Time
	drain   time.Duration

	currConns      atomic.Int64
	totalConns     atomic.Int64
	reloads        atomic.Int64
	reloadFailures atomic.Int64

	gen atomic.Pointer[generation] // what new requests use

	mu        sync.Mutex // serialises Start, Reload and Shutdown; guards the fields below
	listeners map[listenKey]*listener
	backends  map[backendKey]*backend.Backend // every backend of the current generation
	sessions  map[*session]struct{}
	started   bool
	closed    bool
	wg        sync.WaitGroup // accept loops and sessions
	bg        sync.WaitGroup // drains of replaced backends
}

// generation is one loaded configuration.
type generation struct {
	info      Info
	pools     []*pool // in config order (twemproxy's)
	listeners map[string]*listener
}

// listener is one bound address. It survives a reload that keeps its address
// and then serves the new generation's pool.
type listener struct {
	key  listenKey
	ln   net.Listener
	pool atomic.Pointer[pool]
}

// listenKey identifies a listen address: a reload keeps a listener whose
// key is unchanged. Port 0 never matches (each binds a fresh port).
type listenKey struct {
	network, addr string
	fresh         uint64 // only for port 0: unique, so never matched
}

var freshListeners atomic.Uint64

// backendKey identifies a backend a reload may keep: same pool, server and
// options.
type backendKey struct {
	pool, name, addr, dialect string
	handshake                 codec.HandshakeOptions
	conns                     int
	connect, timeout, retry   time.Duration
	failureLimit              int
	keepalive, preconnect     bool
	tls                       *tls.Config // one pointer per TLS setup (see tlsCache)
}

// backendSource hands out backends to newPool.
type backendSource interface {
	backend(pool string, cfg backend.Config) *backend.Backend
}

// New builds a Server for cfg. Nothing is bound until Start.
func New(cfg *config.Config, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	s := &Server{
		log:       opts.Logger,
		version:   Version,
		start:     time.Now(),
		drain:     opts.DrainTimeout,
		listeners: map[listenKey]*listener{},
		backends:  map[backendKey]*backend.Backend{},
		sessions:  map[*session]struct{}{},
	}
	b := &builder{s: s, reuse: s.backends}
	gen, err := b.build(cfg)
	if err != nil {
		return nil, err
	}
	s.backends = b.used
	s.gen.Store(gen)
	return s, nil
}

// builder builds a generation, reusing the running generation's backends.
type builder struct {
	s     *Server
	reuse map[backendKey]*backend.Backend
	used  map[backendKey]*backend.Backend // what the new generation uses
	fresh []*backend.Backend              // created for it
}

func (b *builder) backend(pool string, cfg backend.Config) *backend.Backend {
	k := backendKey{
		pool: pool, name: cfg.Name, addr: cfg.Addr, dialect: cfg.Dialect.Name(),
		handshake: cfg.Handshake, conns: cfg.Conns, connect: cfg.ConnectTimeout,
		timeout: cfg.Timeout, retry: cfg.RetryTimeout, failureLimit: cfg.FailureLimit,
		keepalive: cfg.TCPKeepalive, preconnect: cfg.Preconnect, tls: cfg.TLS,
	}
	if be, ok := b.used[k]; ok {
		return be
	}
	be, ok := b.reuse[k]
	if !ok {
		be = backend.New(cfg)
		b.fresh = append(b.fresh, be)
	}
	b.used[k] = be
	return be
}

// build makes every pool of cfg, linking failover pools. On error it closes
// what it created.
func (b *builder) build(cfg *config.Config) (*generation, error) {
	b.used = map[backendKey]*backend.Backend{}
	gen := &generation{
		info:      Info{Config: cfg, Source: cfg.Source, LoadedAt: time.Now()},
		listeners: map[string]*listener{},
	}
	byName := map[string]*pool{}
	for _, pc := range cfg.Pools {
		old := b.s.pool(pc.Name)
		p, err := newPool(b.s, cfg, pc, b, old)
		if err != nil {
			b.abort(gen)
			return nil, err
		}
		if old != nil {
			p.stats = old.stats // counters are cumulative across reloads
		}
		gen.pools = append(gen.pools, p)
		byName[pc.Name] = p
	}
	for _, p := range gen.pools {
		if p.cfg.EjectPolicy == config.EjectFailover {
			p.failover = byName[p.cfg.FailoverPool]
		}
	}
	gen.info.Checksum = checksum(cfg)
	return gen, nil
}

// abort closes what a failed build created.
func (b *builder) abort(gen *generation) {
	for _, be := range b.fresh {
		be.Close()
	}
	for _, p := range gen.pools {
		if p.router != nil {
			p.router.Close()
		}
	}
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

// backendStateChanged tells every running pool that uses b.
func (s *Server) backendStateChanged(b *backend.Backend, bad bool) {
	for _, p := range s.currentPools() {
		p.stateChanged(b, bad)
	}
}

func keyFor(pc *config.Pool) listenKey {
	k := listenKey{network: pc.Listen.Network, addr: pc.Listen.Addr}
	if _, port, err := net.SplitHostPort(pc.Listen.Addr); err == nil && port == "0" {
		k.fresh = freshListeners.Add(1)
	}
	return k
}

// bind binds every listener gen needs that is not bound yet. On error it
// closes the ones it bound and returns the error.
func (s *Server) bind(gen *generation) ([]*listener, error) {
	var bound []*listener
	for _, p := range gen.pools {
		k := keyFor(p.cfg)
		if l := s.listeners[k]; l != nil {
			gen.listeners[p.cfg.Name] = l
			continue
		}
		ln, err := listen(p.cfg)
		if err != nil {
			for _, l := range bound {
				l.ln.Close()
			}
			return nil, fmt.Errorf("proxy: pool %q: listen %s: %w", p.cfg.Name, p.cfg.Listen.Addr, err)
		}
		l := &listener{key: k}
		l.ln = withTLS(ln, l.tlsConfig)
		bound = append(bound, l)
		gen.listeners[p.cfg.Name] = l
	}
	return bound, nil
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
	return nil
}

// activate points every listener of gen at its pool and starts the accept
// loops of the newly bound ones.
func (s *Server) activate(gen *generation, bound []*listener) {
	for _, p := range gen.pools {
		gen.listeners[p.cfg.Name].pool.Store(p)
	}
	for _, l := range bound {
		s.listeners[l.key] = l
		s.wg.Add(1)
		go s.accept(l)
	}
	for _, p := range gen.pools {
		addr := gen.listeners[p.cfg.Name].ln.Addr().String()
		attrs := []any{"pool", p.cfg.Name, "addr", addr, "protocol", p.dialect.Name()}
		switch {
		case p.cfg.Lua != "":
			attrs = append(attrs, "lua", p.cfg.Lua)
		case p.cfg.RedisCluster:
			attrs = append(attrs, "cluster_seeds", len(p.cfg.Servers))
		default:
			attrs = append(attrs, "servers", len(p.backends), "distribution", p.cfg.Distribution, "hash", p.cfg.Hash)
			if p.limits.MetaGets {
				attrs = append(attrs, "server_protocol", p.cfg.ServerProtocol)
			}
		}
		s.log.Info("pool listening", attrs...)
	}
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
		sess := newSession(l, p, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
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
	}
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
	b := &builder{s: s, reuse: s.backends}
	gen, err := b.build(cfg)
	if err == nil && s.started {
		var bound []*listener
		if bound, err = s.bind(gen); err == nil {
			s.swap(gen, b, bound)
		} else {
			b.abort(gen)
		}
	} else if err == nil {
		s.swap(gen, b, nil)
	}
	if err != nil {
		s.reloadFailures.Add(1)
		s.log.Error("reload refused", "source", cfg.Source, "err", err)
		return err
	}
	s.reloads.Add(1)
	s.log.Info("reloaded", "source", cfg.Source, "pools", len(gen.pools),
		"backends_kept", len(b.used)-len(b.fresh), "backends_new", len(b.fresh), "took", time.Since(start))
	return nil
}

// ReloadFailed counts a reload that failed before Reload was called (the
// file could not be read or parsed).
func (s *Server) ReloadFailed(source string, err error) {
	s.reloadFailures.Add(1)
	s.log.Error("reload refused", "source", source, "err", err)
}

// swap makes gen the running generation. Called with s.mu held.
func (s *Server) swap(gen *generation, b *builder, bound []*listener) {
	old := s.gen.Load()
	if s.started {
		s.activate(gen, bound)
	}
	s.gen.Store(gen)

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

	// Backends and routers gen does not use: drain, then close.
	var drop []*backend.Backend
	for k, be := range s.backends {
		if b.used[k] != be {
			drop = append(drop, be)
		}
	}
	s.backends = b.used
	var routers []router
	for _, p := range old.pools {
		if p.router != nil {
			routers = append(routers, p.router)
		}
	}
	if len(drop) > 0 || len(routers) > 0 {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.retire(old.pools, drop, routers)
		}()
	}
}

// retire waits until no session is routing with the old pools (a request
// routed just before the swap has then reached its backend), then for
// replaced backends' queues to empty, all bounded by the drain timeout;
// then it closes them and the old routers.
func (s *Server) retire(old []*pool, drop []*backend.Backend, routers []router) {
	deadline := time.Now().Add(s.drain)
	for _, p := range old {
		for p.routing.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	for _, be := range drop {
		st := be.Stats()
		for st.InQueue.Load()+st.OutQueue.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		be.Close()
	}
	for _, r := range routers {
		r.Close()
	}
}

// Shutdown stops accepting, lets every session finish the requests it has
// read (their replies are written), closes the client connections and then
// the backends. If ctx ends first, the remaining connections are closed
// abruptly and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for _, l := range s.listeners {
		l.ln.Close()
	}
	for sess := range s.sessions {
		sess.stop()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for sess := range s.sessions {
			sess.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	s.bg.Wait()
	s.mu.Lock()
	for _, be := range s.backends {
		be.Close()
	}
	for _, p := range s.gen.Load().pools {
		if p.router != nil {
			p.router.Close()
		}
	}
	s.mu.Unlock()
	return err
}
