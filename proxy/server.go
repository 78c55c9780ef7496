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

	"shardproxy/codec"
	"shardproxy/config"
)

// Version is shardproxy's version, reported by memcache "version" and stats.
const Version = "0.1.0"

// Options are the run-time settings that do not come from the config file.
type Options struct {
	// Logger receives lifecycle events; default slog.Default().
	Logger *slog.Logger
}

// Server is a running set of pools built from one config.
type Server struct {
	cfg     *config.Config
	log     *slog.Logger
	version string
	start   time.Time
	pools   []*pool

	currConns  atomic.Int64
	totalConns atomic.Int64

	mu        sync.Mutex
	listeners map[string]net.Listener // by pool name
	sessions  map[*session]struct{}
	wg        sync.WaitGroup // accept loops and sessions
	closed    bool
}

// New builds a Server for cfg. Nothing is bound or dialled until Start.
func New(cfg *config.Config, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		cfg:       cfg,
		log:       opts.Logger,
		version:   Version,
		start:     time.Now(),
		listeners: map[string]net.Listener{},
		sessions:  map[*session]struct{}{},
	}
	for _, pc := range cfg.Pools {
		p, err := newPool(s, pc)
		if err != nil {
			for _, q := range s.pools {
				q.close()
			}
			return nil, err
		}
		s.pools = append(s.pools, p)
	}
	for _, p := range s.pools {
		if name := p.cfg.FailoverPool; name != "" && p.cfg.EjectPolicy == config.EjectFailover {
			for _, q := range s.pools {
				if q.cfg.Name == name {
					p.failover = q
				}
			}
		}
	}
	return s, nil
}

// Start binds every pool's listener and starts serving. If any listener
// cannot be bound, the ones already bound are closed and nothing serves.
func (s *Server) Start() error {
	bound := make([]net.Listener, 0, len(s.pools))
	for _, p := range s.pools {
		ln, err := listen(p.cfg)
		if err != nil {
			for _, l := range bound {
				l.Close()
			}
			return fmt.Errorf("proxy: pool %q: listen %s: %w", p.cfg.Name, p.cfg.Listen.Addr, err)
		}
		bound = append(bound, ln)
	}
	s.mu.Lock()
	for i, p := range s.pools {
		s.listeners[p.cfg.Name] = bound[i]
		s.wg.Add(1)
		go s.accept(p, bound[i])
		s.log.Info("pool listening", "pool", p.cfg.Name, "addr", bound[i].Addr().String(),
			"servers", len(p.backends), "distribution", p.cfg.Distribution, "hash", p.cfg.Hash)
	}
	s.mu.Unlock()
	return nil
}

// Addr returns the address pool name is listening on, or nil.
func (s *Server) Addr(name string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ln := s.listeners[name]; ln != nil {
		return ln.Addr()
	}
	return nil
}

func (s *Server) accept(p *pool, ln net.Listener) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, keep serving.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "pool", p.cfg.Name, "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if limit := p.cfg.ClientConnections; limit > 0 && p.stats.ClientConnections.Load() >= int64(limit) {
			p.stats.ClientErr.Add(1)
			nc.Write(p.dialect.AppendError(nil, codec.ErrServer, "too many client connections"))
			nc.Close()
			continue
		}
		sess := newSession(p, nc)
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
		p.stats.ClientConnections.Add(1)
		go func() {
			defer s.wg.Done()
			sess.serve()
			p.stats.ClientConnections.Add(-1)
			s.currConns.Add(-1)
			s.mu.Lock()
			delete(s.sessions, sess)
			s.mu.Unlock()
		}()
	}
}

// Shutdown stops accepting, lets every session finish the requests it has
// read (their replies are written), closes the client connections and then
// the backends. If ctx ends first, the remaining connections are closed
// abruptly and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for _, ln := range s.listeners {
		ln.Close()
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
	for _, p := range s.pools {
		p.close()
	}
	return err
}
