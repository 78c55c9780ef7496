package lua

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/route"
	"shardproxy/store"
)

// Defaults of the Router's limits.
const (
	// DefaultMaxRun is how long a handler may run between two waits for a
	// backend before it is stopped.
	DefaultMaxRun = 100 * time.Millisecond
	// DefaultQueue bounds the requests waiting for one worker.
	DefaultQueue = 64 << 10
	// maxWorkers caps the default number of workers.
	maxWorkers = 16
	// maxCallsPerRequest bounds the backend calls one request may make.
	maxCallsPerRequest = 1024
	// DefaultSetupTimeout bounds each run of the script at start.
	DefaultSetupTimeout = 10 * time.Second
)

// Config describes a Lua router. Path and Dialect are required; every other
// field has a documented default.
type Config struct {
	// Path is the route file, as named in messages. Its contents are read
	// from the file unless Source is set.
	Path string
	// Source, if not nil, is the route file's contents.
	Source []byte
	// More are route files that run after Path, in order, in the same
	// state (memcached's proxy_config=a.lua:b.lua): one file may define
	// mcp_config_pools and the next mcp_config_routes.
	More []string
	// Dirs are directories, besides Path's own, whose files the route
	// files may load (dofile, loadfile, require); see engine_files.go.
	Dirs []string
	// Dialect frames the pool's requests and replies (memcache or redis).
	Dialect codec.Dialect
	// Redis selects the Redis flavour of the API: command names instead of
	// memcached command numbers, RESP reply semantics (see the package
	// documentation).
	Redis bool
	// Options are the limits mcp.request and request rewrites parse with.
	// Password and Deny are ignored: route code is the operator's own.
	Options codec.Options
	// Handshake is what every backend socket is told first (Redis AUTH and
	// SELECT; a memcached server's "mn" with Meta or MetaProbe, for
	// MetaRewrite).
	Handshake codec.HandshakeOptions
	// MetaRewrite, if not nil, is the backends' backend.Config.MetaRewrite:
	// it may rewrite a request the route forwards untouched, without
	// reading its reply (the handlers run without entering Lua: see
	// direct_v1.go, direct_v2.go, direct_fast.go), into a cheaper wire form whose
	// reply the dialect gives the client in the words it asked in
	// (memcache.MetaGet: a one-key get sent as mg), on the sockets whose
	// server speaks meta (Handshake.Meta: all; Handshake.MetaProbe: those
	// whose server answered "mn"). A request a route handles in Lua goes
	// as the route sends it.
	MetaRewrite func(*codec.Request) bool
	// Internal is the proxy's own cache of a memcache pool (v2_internal.go):
	// what mcp.internal and mcp.internal_handler reach, and what answers
	// the commands no handler is attached for. The caller owns it (a
	// reload may pass it on); nil: those raise an error naming them, and
	// such commands are answered "SERVER_ERROR no route for command NAME".
	Internal *store.Store
	// Sections, if not nil, are the pool's "stats NAME" sections
	// (settings, proxy, conns, ...), which mcp.server_stats(NAME) gives
	// the route file as memcached's gives its own; nil: the router's
	// (Router.Section) and its own settings and counters.
	Sections codec.SectionEnv
	// Defaults are the backend tunables before the script changes them.
	Defaults Defaults
	// StartArg is what the route file reads as mcp.start_arg, in every
	// stage (memcached's proxy_arg): "" (the default) gives false, a
	// string without ':' the string, and one with ':' a table of its
	// ':'-separated items, "name_value" as name = "value" and a bare name
	// as name = true ("a:b_2:c_x_y" is {a = true, b = "2", c = "x"}).
	StartArg string
	// Servers are what mcp.servers() gives the config stage: the servers
	// the pool's servers_from resolved (api_servers.go); nil: none.
	Servers []Server
	// StartArgFile is the file StartArg names, for a route file that loads
	// it (dofile(mcp.start_arg), as memcached's routelib does): the one
	// file outside the route file's directory it may read. Default:
	// StartArg, relative to the route file's directory.
	StartArgFile string
	// Preconnect dials every backend at start instead of at first use.
	Preconnect bool
	// Reconnect keeps the backends connected by memcached's proxy's
	// rule (backend.Config.Reconnect) in place of the native pools'
	// failure rule and HealthInterval's probes.
	Reconnect bool
	// Tag is the listener tag of the pool: handlers attached with this tag
	// take precedence over untagged ones. "" means untagged.
	Tag string
	// Workers is the number of Lua states; default runtime.GOMAXPROCS(0),
	// at most 16.
	Workers int
	// MaxRun bounds each uninterrupted run of a handler (from a start or a
	// resume to its next wait or its end); default DefaultMaxRun.
	MaxRun time.Duration
	// SetupTimeout bounds each run of the script at start (its top level,
	// mcp_config_pools, mcp_config_routes); default DefaultSetupTimeout.
	SetupTimeout time.Duration
	// MaxAlloc bounds the bytes each run of route code (a handler's, as
	// MaxRun counts them, a cron's, a generator's, a setup stage) may
	// allocate, as the process's allocations during the run (see
	// engine_guard.go); default DefaultMaxAlloc.
	MaxAlloc int64
	// Queue bounds the requests waiting for each worker; default
	// DefaultQueue. A request beyond it is answered with an error.
	Queue int
	// Logger receives lifecycle events, script errors and mcp.log lines;
	// default slog.Default().
	Logger *slog.Logger
	// Hub receives the lines memcached's proxy writes to its watchers
	// (mcp.log, mcp.log_req, route errors, backend failures; see
	// api_watch.go); default a Hub of the router's own. A reload passes the
	// running router's, so its watchers stay.
	Hub *route.Hub
	// HealthInterval and HealthTimeout are every backend's
	// (backend.Config): the pool's health checks; 0 turns them off.
	HealthInterval, HealthTimeout time.Duration
	// ScheduleReload, if set, is what mcp.schedule_config_reload calls in
	// a cron: it asks for the configuration to be reloaded and must not
	// block. nil (and in a handler or a setup stage): the call does
	// nothing.
	ScheduleReload func()
	// Previous is the running router a reload replaces, or nil: the new
	// router keeps its mcp.add_stat counters (see addStat), and its config
	// state starts with the old one's globals (see keptGlobals).
	Previous *Router
	// Backends hands out the backends the script declares and takes them
	// back at Close; default backend.Direct (each router's own, closed at
	// Close). A reload passes a source shared with the next router, so
	// backends both declare keep their sockets and health.
	Backends backend.Source
}

// Defaults are the backend tunables a script starts from. A zero field
// means memcached's own default.
type Defaults struct {
	// ConnectTimeout bounds dial plus handshake; memcached's default 5s.
	ConnectTimeout time.Duration
	// RetryTimeout is how long a bad backend fails fast; default 3s.
	RetryTimeout time.Duration
	// ReadTimeout bounds each request; default 3s.
	ReadTimeout time.Duration
	// FailureLimit is how many consecutive failures mark a backend bad;
	// default 3.
	FailureLimit int
	// TCPKeepalive enables SO_KEEPALIVE on backend sockets.
	TCPKeepalive bool
	// Conns is the number of sockets per backend; default 1.
	Conns int
}

// memcached proxy's defaults (proxy_config.c).
const (
	mcConnectTimeout = 5 * time.Second
	mcRetryTimeout   = 3 * time.Second
	mcReadTimeout    = 3 * time.Second
	mcFailureLimit   = 3
)

// Completion receives the reply to a routed request: route's one
// completion contract. Complete is called from a backend's goroutine or
// with a Lua state held, so it must not block.
type Completion = route.Completion

// Router routes a pool's requests through a route file's handlers.
type Router struct {
	cfg      Config
	log      *slog.Logger
	protos   []routeFile // Path's, then More's, in order
	files    *files      // what dofile, loadfile and require may read (engine_files.go)
	workers  []*worker
	backends []*backend.Backend
	pools    []*pool
	// internal and internalPool are the proxy's own cache as a backend
	// and a pool (v2_internal.go); nil without Config.Internal.
	internal     *beRef
	internalPool *pool

	activeLimit int64 // mcp.active_req_limit; 0 = none
	bufferLimit int64 // mcp.buffer_memory_limit in bytes; 0 = none
	// overBuffer is the backend.Call.Over of the router's calls when it
	// has a bufferLimit: whether bufferUsed is over it.
	overBuffer func() bool
	// kept are the config state's globals a reload hands on (keptGlobals).
	kept       map[string]glua.LValue
	active     atomic.Int64
	bufferUsed atomic.Int64
	closed     atomic.Bool
	stop       chan struct{} // stops the watchdog

	userStats []*userStat // by mcp.add_stat id - 1
	funcs     funcStats   // stats proxyfuncs (v2_funcstats.go)
	// failedDepth counts requests failed for a backend's depth limit
	// (memcached's proxy_request_failed_depth).
	failedDepth atomic.Int64

	cronDefs  []*cronDef    // from the config stage, for worker 0
	crons     []*cronJob    // built in worker 0's state
	cronRuns  atomic.Int64  // crons run (memcached's proxy_config_cron_runs)
	cronFails atomic.Int64  // of those, the ones that raised an error
	cronStop  chan struct{} // stops runCrons
	cronDone  chan struct{} // closed when runCrons has returned

	// v1: the file attaches no function generator (V1), so that what
	// memcached 1.6.22's proxy did differently from 1.6.45's follows
	// 1.6.22 (see V1).
	v1 bool

	requests atomic.Int64
	failures atomic.Int64
	timeouts atomic.Int64
	// memoryStops counts runs stopped for allocating more than MaxAlloc.
	memoryStops atomic.Int64

	errMu   sync.Mutex
	errSeen map[string]int // script errors already logged, with counts
}

// userStat is one counter declared with mcp.add_stat.
type userStat struct {
	name  string
	value atomic.Int64
}

// New loads the route file, runs mcp_config_pools once and
// mcp_config_routes in every worker state, and starts the workers. A
// script error is a *ConfigError naming the file and line.
func New(cfg Config) (*Router, error) {
	if cfg.Dialect == nil {
		return nil, fmt.Errorf("lua: %s: no dialect", cfg.Path)
	}
	cfg.setDefaults()
	r := &Router{cfg: cfg, log: cfg.Logger.With("file", cfg.Path), errSeen: map[string]int{}}
	var err error
	if r.protos, err = cfg.compileAll(); err != nil {
		return nil, err
	}
	r.files = newFiles(&r.cfg)
	if cfg.Previous != nil { // the counters are shared; the slice is not
		r.userStats = append([]*userStat(nil), cfg.Previous.userStats...)
	}
	r.internal, r.internalPool = newInternal(&r.cfg)
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	routes, err := r.configure()
	r.cfg.Previous = nil // a generation keeps none of the older ones alive
	if err != nil {
		return nil, err
	}
	// memcached's proxy writes it before it loads the files, but exits on
	// an error in their top level or mcp_config_pools: its watchers never
	// see a start for those.
	r.watchConf("start")
	for i := range cfg.Workers {
		w, err := newWorker(r, i, routes)
		if err != nil {
			return nil, err
		}
		r.workers = append(r.workers, w)
	}
	r.v1 = len(r.workers) > 0 && len(r.workers[0].v2.entries) == 0
	if len(r.crons) > 0 {
		r.cronStop, r.cronDone = make(chan struct{}), make(chan struct{})
		go r.runCrons(r.cronStop)
	}
	r.stop = make(chan struct{})
	go r.watchdog(r.stop)
	ok = true
	r.log.Info("lua routes loaded", "workers", len(r.workers), "pools", len(r.pools), "backends", len(r.backends))
	return r, nil
}

// V1 reports whether the route file is one of memcached's V1 API
// (1.6.12 to 1.6.29): it attaches functions only, never a function
// generator or a router. Where memcached 1.6.22's proxy behaved
// differently from 1.6.45's, such a file gets 1.6.22's behaviour: the
// parser's words for a malformed multi-get (codec.Options.ProxyV1), the
// proxyreqs line of mcp.log_req without res= and cfd=,
// request:token(n, "") leaving the separator in place, and a handler's
// string in a multi-get sent with its END.
func (r *Router) V1() bool { return r.v1 }

// setDefaults fills in the defaults the fields of Config document, and
// clears the Options the router ignores (Password, Username, Deny).
func (cfg *Config) setDefaults() {
	if cfg.Workers <= 0 {
		cfg.Workers = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	if cfg.MaxRun <= 0 {
		cfg.MaxRun = DefaultMaxRun
	}
	if cfg.SetupTimeout <= 0 {
		cfg.SetupTimeout = DefaultSetupTimeout
	}
	if cfg.MaxAlloc <= 0 {
		cfg.MaxAlloc = DefaultMaxAlloc
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backends == nil {
		cfg.Backends = backend.Direct{}
	}
	if cfg.Hub == nil {
		cfg.Hub = &route.Hub{}
	}
	cfg.Options.Password, cfg.Options.Username, cfg.Options.Deny = "", "", nil
}

// routeFile is one route file, compiled.
type routeFile struct {
	path  string
	proto *glua.FunctionProto
}

// compileAll reads and compiles the route files: Path (its contents are
// Source when set), then More.
func (cfg *Config) compileAll() ([]routeFile, error) {
	out := make([]routeFile, 0, 1+len(cfg.More))
	for i, path := range append([]string{cfg.Path}, cfg.More...) {
		src := cfg.Source
		if i > 0 || src == nil {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("lua: %w", err)
			}
			src = b
		}
		p, err := compile(path, src)
		if err != nil {
			return nil, err
		}
		out = append(out, routeFile{path: path, proto: p})
	}
	return out, nil
}

// runFiles runs the route files' top levels in L, in order.
func (r *Router) runFiles(L *glua.LState) error {
	for _, f := range r.protos {
		if _, err := r.runSetup(L, L.NewFunctionFromProto(f.proto), 0); err != nil {
			return runError(f.path, "loading", err)
		}
	}
	return nil
}

// Route runs req's handler, on the calling goroutine when the client's Lua
// state (chosen by hint) is free and nothing of it is queued, and otherwise
// queued for the state's own goroutine, and returns without waiting for
// backends: c.Complete is called exactly once, from whichever goroutine
// finishes the handler (the caller's, the state's, or for a direct handler
// a backend's). req must stay valid until then. Route never blocks.
func (r *Router) Route(req *codec.Request, hint uint32, c Completion) {
	r.RouteBatch(req, hint, c, nil)
}

// RouteBatch is Route for a caller that gathers the backend calls of one
// client read in bt (route.Exchange.Batch) and flushes it when the read
// is handled; bt belongs to the calling goroutine, and nil makes it Route.
// A request a direct handler sends (direct_v1.go, direct_v2.go) is staged in
// bt when its backend is decided on the calling goroutine, so a pipelined
// read reaches each backend in one write. Any other request flushes bt
// before it is run or queued: what Lua sends, it sends at once, and it
// must not overtake the client's earlier requests staged in bt.
func (r *Router) RouteBatch(req *codec.Request, hint uint32, c Completion, bt *backend.Batch) {
	r.RouteTagged(req, hint, "", c, bt)
}

// RouteTagged is RouteBatch for a request that came on a listener with a
// tag (memcached's -l tag_NAME_:addr): the handlers attached with tag take
// precedence over the untagged ones. "" is Config.Tag's.
func (r *Router) RouteTagged(req *codec.Request, hint uint32, tag string, c Completion, bt *backend.Batch) {
	if tag == "" {
		tag = r.cfg.Tag
	}
	r.requests.Add(1)
	if r.closed.Load() {
		r.reject(req, c, "lua router closed")
		return
	}
	if r.activeLimit > 0 && r.active.Load() >= r.activeLimit {
		r.reject(req, c, "active request limit reached")
		return
	}
	if r.overBuffer != nil && r.overBuffer() && hasValue(req.Wire) {
		r.reject(req, c, "out of memory")
		return
	}
	r.active.Add(1)
	r.bufferUsed.Add(int64(len(req.Wire)))
	// A client's requests always go to the same state, as a memcached
	// connection stays on its worker thread: what a handler keeps in its
	// state between requests is the same for all of them.
	w := r.workers[hint%uint32(len(r.workers))]
	if tag == "" && r.routeFast(w, req, hint, c, bt) { // the fast path knows the untagged handlers
		return
	}
	if !w.submit(event{kind: evRequest, req: req, hint: hint, c: c, batch: bt, tag: tag}, true) {
		r.settle(int64(len(req.Wire)))
		r.reject(req, c, "lua worker queue full")
	}
}

// hasValue reports whether a request carries a value after its line (a
// storage command's): what memcached's proxy refuses while its buffers
// are over buffer_memory_limit. A request without one goes on, and its
// reply finds the buffers full (backend.Call.Over).
func hasValue(wire []byte) bool {
	i := bytes.IndexByte(wire, '\n')
	return i >= 0 && i+1 < len(wire)
}

// settle counts a request routed with Route as answered: no longer
// active, and its bytes no longer held (active_req_limit,
// buffer_memory_limit).
func (r *Router) settle(bytes int64) {
	r.active.Add(-1)
	r.bufferUsed.Add(-bytes)
}

// reject answers a request the router does not run.
func (r *Router) reject(req *codec.Request, c Completion, msg string) {
	r.failures.Add(1)
	if req.Mode == codec.ModeNoreply {
		c.Complete(nil)
		return
	}
	c.Complete(r.cfg.Dialect.AppendError(nil, codec.ErrServer, msg))
}

// Close stops the workers and gives the backends back to Config.Backends.
// Requests still queued or waiting for a backend are answered with an
// error. Close is safe to call more than once.
func (r *Router) Close() {
	if r.closed.Swap(true) {
		return
	}
	if r.cronStop != nil { // before the workers: a cron is queued to one
		close(r.cronStop)
		<-r.cronDone
	}
	for _, w := range r.workers {
		w.shutdown()
	}
	for _, b := range r.backends {
		r.cfg.Backends.Put(b)
	}
	if r.stop != nil {
		close(r.stop)
	}
}

// Stats returns the router's counters and the script's mcp.add_stat
// counters, as name/value pairs.
func (r *Router) Stats() []codec.Stat {
	counters := r.Counters()
	s := make([]codec.Stat, len(counters))
	for i, c := range counters {
		s[i] = codec.Stat{Name: c.Name, Value: strconv.FormatInt(c.Value, 10)}
	}
	return s
}

// Counters returns the router's counters as Stats names them, with what
// /metrics says of them.
func (r *Router) Counters() []route.Stat {
	s := []route.Stat{
		{Name: "lua_requests", Kind: route.Counter, Value: r.requests.Load(), Help: "Requests handed to the route file."},
		{Name: "lua_failures", Kind: route.Counter, Value: r.failures.Load(), Help: "Requests the route file failed (script errors, refused requests)."},
		{Name: "lua_timeouts", Kind: route.Counter, Value: r.timeouts.Load(), Help: "Runs of route code stopped for taking longer than their time budget."},
		{Name: "lua_memory_stops", Kind: route.Counter, Value: r.memoryStops.Load(), Help: "Runs of route code stopped for allocating more than their memory budget."},
		{Name: "lua_active", Kind: route.Gauge, Value: r.active.Load(), Help: "Requests being handled by the route file now."},
		{Name: "proxy_config_cron_runs", Kind: route.Counter, Value: r.cronRuns.Load(), Help: "Runs of the route file's crons."},
		{Name: "proxy_config_cron_fails", Kind: route.Counter, Value: r.cronFails.Load(), Help: "Runs of the route file's crons that raised an error."},
	}
	// The user counters are gauges: mcp.stat may subtract, and the
	// routers of successive generations share them (Config.Previous), so
	// kind.Counters must not add them up.
	for _, u := range r.userStats {
		if u.name != "" {
			s = append(s, route.Stat{Name: "user_" + u.name, Kind: route.Gauge, Value: u.value.Load()})
		}
	}
	return s
}

// Watch registers a watcher of the router's log streams (codec.Watch*
// bits): route.Watchable.
func (r *Router) Watch(streams int) (*route.Watcher, error) { return r.cfg.Hub.Watch(streams) }

// Hub returns the hub the router publishes to, for the next router of a
// reload (Config.Hub).
func (r *Router) Hub() *route.Hub { return r.cfg.Hub }

// Backends returns the backends the script created, in creation order. The
// slice is shared: do not modify it.
func (r *Router) Backends() []*backend.Backend { return r.backends }

// logScriptError logs a script error once per distinct message, and
// gives every one to the watchers of proxyevents.
func (r *Router) logScriptError(event string, msg string) {
	r.watchError(msg)
	r.errMu.Lock()
	n, seen := r.errSeen[msg]
	if len(r.errSeen) < 1024 || seen {
		r.errSeen[msg] = n + 1
	}
	r.errMu.Unlock()
	if !seen {
		r.log.Error(event, "err", msg)
	}
}
