package admin

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/proxy"
)

// DefaultStatsInterval is nutcracker's default aggregation interval (-i).
const DefaultStatsInterval = 30 * time.Second

// Bounds on one stats connection.
const (
	statsWriteTimeout = 5 * time.Second
	statsDrainTimeout = time.Second
	statsDrainLimit   = 64 << 10
)

// ErrClosed is returned by Listen after Close.
var ErrClosed = errors.New("admin: server closed")

// StatsConfig configures a StatsServer. The zero value is valid.
type StatsConfig struct {
	// Interval is how often the counters are aggregated (nutcracker's -i);
	// 0 means DefaultStatsInterval.
	Interval time.Duration
	// Hostname is the "source" value; "" means os.Hostname(), or "unknown"
	// when that fails (as nutcracker does).
	Hostname string
	// Logger receives lifecycle events; nil means slog.Default().
	Logger *slog.Logger
	// Listen binds the listener ("tcp"); nil means net.Listen. A process
	// that inherits its sockets from the one it replaces passes its hook.
	Listen func(network, addr string) (net.Listener, error)
}

// StatsServer serves nutcracker's stats JSON on a TCP address. Create it
// with NewStats, bind it with Listen, stop it with Close.
type StatsServer struct {
	src      Source
	host     string
	interval time.Duration
	log      *slog.Logger
	listen   func(network, addr string) (net.Listener, error) // StatsConfig.Listen

	snap atomic.Pointer[proxy.Stats] // the last aggregation

	mu      sync.Mutex // guards the fields below
	addr    string     // as asked for
	ln      net.Listener
	started bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// NewStats returns a StatsServer reading src. Nothing runs until Listen.
func NewStats(src Source, cfg StatsConfig) *StatsServer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultStatsInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Hostname == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "unknown"
		}
		cfg.Hostname = h
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	return &StatsServer{src: src, host: cfg.Hostname, interval: cfg.Interval,
		log: cfg.Logger, listen: cfg.Listen, stop: make(chan struct{})}
}

// Listen serves on addr ("host:port"). Called again with another address it
// moves: addr is bound first, and only then is the old listener closed; if
// addr cannot be bound the old one keeps serving and the error is returned.
// The same address as now is a no-op. The first Listen also takes the first
// aggregation and starts the periodic one.
func (s *StatsServer) Listen(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ln != nil && addr == s.addr {
		return nil
	}
	ln, err := s.listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin: stats listen %s: %w", addr, err)
	}
	if !s.started {
		s.started = true
		s.Aggregate()
		s.wg.Add(1)
		go s.aggregate()
	}
	old := s.ln
	s.addr, s.ln = addr, ln
	s.wg.Add(1)
	go s.accept(ln)
	if old != nil {
		old.Close()
		s.log.Info("stats moved", "addr", ln.Addr().String(), "old_addr", old.Addr().String())
	} else {
		s.log.Info("stats listening", "addr", ln.Addr().String(), "interval", s.interval)
	}
	return nil
}

// Addr returns the address being served, or nil.
func (s *StatsServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Aggregate takes a snapshot of the counters now; the periodic aggregation
// calls it every interval.
func (s *StatsServer) Aggregate() {
	st := s.src.Stats()
	s.snap.Store(&st)
}

// Close stops serving and aggregating and waits for open stats connections
// to finish (each is bounded by a few seconds).
func (s *StatsServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *StatsServer) aggregate() {
	defer s.wg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Aggregate()
		}
	}
}

func (s *StatsServer) accept(ln net.Listener) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("stats accept failed", "addr", ln.Addr().String(), "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.wg.Add(1)
		go s.serve(nc)
	}
}

// serve writes the snapshot, then half-closes and drains the client's input
// so that closing does not reset the connection before the client reads.
func (s *StatsServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	st := *s.snap.Load()
	st.Now = time.Now()
	nc.SetWriteDeadline(time.Now().Add(statsWriteTimeout))
	if _, err := nc.Write(AppendStats(nil, st, s.host)); err != nil {
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	nc.SetReadDeadline(time.Now().Add(statsDrainTimeout))
	io.Copy(io.Discard, io.LimitReader(nc, statsDrainLimit))
}
