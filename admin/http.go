package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultHTTPAddr is the HTTP admin's default address: loopback only, one
// above nutcracker's stats port.
const DefaultHTTPAddr = "127.0.0.1:22223"

// Timeouts of the HTTP admin server. Every handler answers from memory or
// runs a reload, which takes milliseconds.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second
	httpMaxHeaderBytes    = 16 << 10
	// httpDrainTimeout bounds how long a moved or closed server waits for
	// its requests in flight (such as the POST /reload that moved it).
	httpDrainTimeout = 5 * time.Second
)

// ReloadResult describes a successful reload.
type ReloadResult struct {
	// Source is the file the new configuration was read from.
	Source string
	// Checksum identifies the new configuration (proxy.Info.Checksum).
	Checksum string
	// Took is how long the reload took.
	Took time.Duration
	// Warnings are problems that did not refuse the reload, such as an
	// admin address that could not be bound (the old one kept serving).
	Warnings []string
}

// HTTPConfig configures an HTTPServer. The zero value is valid.
type HTTPConfig struct {
	// Reload runs a reload for POST /reload; the command passes the same
	// function SIGHUP runs. It must be safe for concurrent use. nil makes
	// POST /reload answer 501.
	Reload func() (ReloadResult, error)
	// Drain starts the drain for POST /drain; the command passes what
	// SIGTERM starts (the process exits when the drain ends). It must
	// not wait for the drain, and must be safe for concurrent use. nil
	// makes POST /drain answer 501.
	Drain func()
	// Logger receives lifecycle events; nil means slog.Default().
	Logger *slog.Logger
	// Listen binds the listener ("tcp"); nil means net.Listen. A process
	// that inherits its sockets from the one it replaces passes its hook.
	Listen func(network, addr string) (net.Listener, error)
}

// HTTPServer serves the HTTP admin endpoints (see the package doc). Create
// it with NewHTTP, bind it with Listen, stop it with Close.
type HTTPServer struct {
	handler http.Handler
	hist    *history // the status page's samples
	log     *slog.Logger
	listen  func(network, addr string) (net.Listener, error) // HTTPConfig.Listen

	mu       sync.Mutex // guards the fields below
	addr     string     // as asked for
	ln       net.Listener
	srv      *http.Server
	closed   bool
	sampling bool           // the sampling goroutine started
	stop     chan struct{}  // closed by Close: stops the sampling
	wg       sync.WaitGroup // Serve loops, the drains of moved servers, the sampling
}

// NewHTTP returns an HTTPServer reading src. Nothing runs until Listen.
func NewHTTP(src Source, cfg HTTPConfig) *HTTPServer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	h := newHandlers(src, cfg)
	return &HTTPServer{handler: h.mux(), hist: h.hist, log: cfg.Logger, listen: cfg.Listen,
		stop: make(chan struct{})}
}

// Handler returns the admin endpoints as one http.Handler, for callers that
// serve it themselves. Without an HTTPServer nothing samples in the
// background: the status page samples when it is read, so its graphs begin
// with the first view.
func Handler(src Source, cfg HTTPConfig) http.Handler { return newHandlers(src, cfg).mux() }

func newHandlers(src Source, cfg HTTPConfig) *handlers {
	h := &handlers{src: src, reload: cfg.Reload, drain: cfg.Drain, log: cfg.Logger, hist: newHistory(src)}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

// mux routes the endpoints, behind the token check but for the probes.
func (h *handlers) mux() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(h.src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{h.log},
	}))
	mux.HandleFunc("GET /config", h.config)
	mux.HandleFunc("GET /backends", h.backends)
	mux.HandleFunc("GET /version", h.version)
	mux.HandleFunc("POST /reload", h.reloadNow)
	mux.HandleFunc("POST /drain", h.drainNow)
	mux.HandleFunc("GET /slowlog", h.slowlog)
	mux.HandleFunc("POST /slowlog/reset", h.slowlogReset)
	mux.HandleFunc("GET /tap", h.tap)
	mux.HandleFunc("GET /{$}", h.page)
	mux.HandleFunc("GET /status", h.status)
	mux.HandleFunc("GET /status/live", h.live)
	mux.Handle("GET /static/status.css", assets())
	mux.Handle("GET /static/status.js", assets())
	// Go's profiler, for operators chasing CPU or memory: behind the same
	// token as the rest.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return h.probes(h.authorize(mux))
}

// Listen serves on addr ("host:port"); "" stops serving. Called again with
// another address it moves: addr is bound first, and only then is the old
// listener closed (its requests in flight finish); if addr cannot be bound
// the old one keeps serving and the error is returned. The same address as
// now is a no-op.
func (h *HTTPServer) Listen(addr string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	if addr == h.addr && (h.ln != nil || addr == "") {
		return nil
	}
	var ln net.Listener
	if addr != "" {
		var err error
		if ln, err = h.listen("tcp", addr); err != nil {
			return fmt.Errorf("admin: http listen %s: %w", addr, err)
		}
	}
	oldLn, oldSrv := h.ln, h.srv
	h.addr, h.ln, h.srv = addr, ln, nil
	if ln != nil {
		h.srv = h.serve(ln)
		h.startSampling()
	}
	if oldLn != nil {
		h.retire(oldLn, oldSrv)
	}
	switch {
	case ln != nil && oldLn != nil:
		h.log.Info("admin moved", "addr", ln.Addr().String(), "old_addr", oldLn.Addr().String())
	case ln != nil:
		h.log.Info("admin listening", "addr", ln.Addr().String())
	case oldLn != nil:
		h.log.Info("admin closed", "old_addr", oldLn.Addr().String())
	}
	return nil
}

// startSampling starts, once, the status page's sampling: one Stats read
// per second while the server runs. Called with h.mu held.
func (h *HTTPServer) startSampling() {
	if h.sampling {
		return
	}
	h.sampling = true
	h.hist.sample()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.hist.run(h.stop)
	}()
}

// serve starts an http.Server on ln. Called with h.mu held.
func (h *HTTPServer) serve(ln net.Listener) *http.Server {
	srv := &http.Server{
		Handler:           h.handler,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	// Every reply closes its connection. A kept-alive connection would be
	// closed by the server once idle, and a request sent on it just then
	// gets a reset and no reply: a POST /reload is not retried by clients,
	// so it would fail without reaching the server, and a scraper that
	// polls at the idle timeout hits that window. The endpoints are called
	// seconds apart; a new connection costs nothing here.
	srv.SetKeepAlivesEnabled(false)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		srv.Serve(ln) // returns when ln is closed
	}()
	return srv
}

// retire closes ln at once, so its address refuses connections, and lets
// srv finish its requests in flight in the background: one of them may be
// the POST /reload that is moving the server. Called with h.mu held.
func (h *HTTPServer) retire(ln net.Listener, srv *http.Server) {
	ln.Close()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), httpDrainTimeout)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}()
}

// Addr returns the address being served, or nil.
func (h *HTTPServer) Addr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ln == nil {
		return nil
	}
	return h.ln.Addr()
}

// Close stops serving: the listener closes at once, requests in flight get
// a few seconds to finish. It waits for that and returns nil.
func (h *HTTPServer) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.stop)
	if h.ln != nil {
		h.retire(h.ln, h.srv)
		h.ln, h.srv = nil, nil
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

// promLogger passes promhttp's error messages to slog.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }
