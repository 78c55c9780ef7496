package backend

import (
	"crypto/tls"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/codec"
)

// Defaults of a zero Config's fields, applied by New.
const (
	// DefaultConnectTimeout bounds dial plus handshake when
	// Config.ConnectTimeout is 0. It is the one place the 1s is written;
	// config.DefaultConnectTimeout, which config cannot take from here (it
	// imports no transport), is pinned to it by a test in config.
	DefaultConnectTimeout = time.Second
	// DefaultRetryTimeout is how long a bad backend fails fast when
	// Config.RetryTimeout is 0: twemproxy's server_retry_timeout default,
	// pinned to config.DefaultServerRetryTimeout the same way.
	DefaultRetryTimeout = 30 * time.Second
	// DefaultHealthTimeout bounds one health probe when
	// Config.HealthTimeout is 0; pinned to config.DefaultHealthCheckTimeout
	// by a test in config, as the others.
	DefaultHealthTimeout = time.Second
)

// Config describes one backend server. A zero Config is not usable: Addr and
// Dialect are required; every other field has a documented default.
type Config struct {
	// Addr is "host:port", or a unix socket path (anything with a '/').
	Addr string
	// Name identifies the backend in logs and stats; default Addr.
	Name string
	// Dialect frames replies and provides the handshake.
	Dialect codec.Dialect
	// Handshake is passed to Dialect.Handshake for every new socket.
	Handshake codec.HandshakeOptions
	// Conns is the number of sockets (twemproxy server_connections); default 1.
	Conns int
	// ConnectTimeout bounds dial plus handshake; 0 means
	// DefaultConnectTimeout (1s).
	ConnectTimeout time.Duration
	// Timeout bounds each request from Send to its reply; 0 waits forever.
	Timeout time.Duration
	// FailureLimit is how many consecutive failures mark the backend bad; 0
	// never marks it bad.
	FailureLimit int
	// RetryTimeout is how long a bad backend fails fast; 0 means
	// DefaultRetryTimeout (30s).
	RetryTimeout time.Duration
	// HealthInterval, when not 0, turns on active health checks
	// (health.go): a backend marked bad comes back only once a probe (a
	// new socket's whole handshake) succeeds, tried RetryTimeout after it
	// was marked bad and every HealthInterval from then on; and a shared
	// socket that carried nothing for HealthInterval is sent the
	// dialect's validation request before it carries a call again. 0 (the
	// default) keeps twemproxy's rule: the first request after
	// RetryTimeout tries the server again.
	HealthInterval time.Duration
	// HealthTimeout bounds one probe: dial and handshake of a bad
	// backend's, the reply to an idle socket's; 0 means
	// DefaultHealthTimeout (1s).
	HealthTimeout time.Duration
	// TCPKeepalive enables SO_KEEPALIVE on sockets.
	TCPKeepalive bool
	// TLS, when set, makes every socket a TLS client connection with this
	// configuration; nil (the default) dials plain sockets. When its
	// ServerName is empty and InsecureSkipVerify is false, the host of Addr
	// is used. The TLS handshake counts against ConnectTimeout. The Config
	// is not modified and may be shared between backends.
	TLS *tls.Config
	// MetaRewrite, if set, rewrites the request of a call marked
	// Call.MetaRewrite just before it is written on a socket whose server
	// answered the meta probe (Handshake.MetaProbe or Meta), and reports
	// whether it did; on a text server's socket the request goes as it is.
	// It runs on the socket's writer goroutine and must not block
	// (memcache.MetaGet: a one-key get sent as mg).
	MetaRewrite func(*codec.Request) bool
	// OnMeta, if set, is called (on a socket's dialling goroutine, never
	// under a lock) when a new socket's handshake tells that the server
	// speaks the meta protocol (meta=true) or text only, and that differs
	// from what the previous socket's told: the first time (first=true),
	// and when the server at the address changed.
	OnMeta func(b *Backend, meta, first bool)
	// Preconnect dials every socket at New instead of at first use.
	Preconnect bool
	// FirstIdle picks a call's socket as memcached's proxy does: the
	// first slot with nothing queued or in flight, else the one with the
	// fewest, so that a lightly loaded backend uses its first socket; and
	// Preconnect dials the slots one after another, in slot order. Off
	// (the default), a call goes to slot hint % Conns, which keeps one
	// client's requests in order on one socket.
	FirstIdle bool
	// OnStateChange, if set, is called (on its own goroutine's time, never
	// under a lock) when the backend is marked bad (bad=true) and when its
	// retry time arrives (bad=false); with HealthInterval set, when a
	// probe restores it (bad=false).
	OnStateChange func(b *Backend, bad bool)
	// Reconnect replaces twemproxy's failure rule with memcached's
	// proxy's (reconnect.go): a failed socket is dialled again at once
	// until more than FailureLimit failures in a row mark the backend
	// bad, a bad backend is dialled again every RetryTimeout, and only a
	// validated socket ends the bad period. The validation reply is
	// awaited for Timeout, when set; HealthInterval is ignored.
	Reconnect bool
	// BreaksStream, if set, tells an error reply (codec.ReplyError)
	// after which the socket is not trusted: the reply is passed on, and
	// the socket fails with CauseInvalidProtocol, as a ReplyFatal one
	// does (memcache.BreaksStream: memcached's proxy drops a socket that
	// answered ERROR or CLIENT_ERROR).
	BreaksStream func(raw []byte) bool
	// NoJoin writes every call as it came: a codec.Joiner dialect's
	// joinable calls in a batch are not joined into one request
	// (join.go), as memcached's proxy sends each get it routes alone.
	NoJoin bool
	// OnEvent, if set, is told of each socket failure while the backend
	// is not bad and of its being marked bad (reconnect.go), on the
	// goroutine that found it; it must not block.
	OnEvent func(b *Backend, e Event)
	// Replay, if set, is run on every new socket once its handshake
	// passed and before it carries a call (replay.go): a pool's spooled
	// deletes are sent there, so that no request reaches the server
	// before them. Its failure drops the socket with CauseReplay, as a
	// failed validation does. Nil (the default): nothing is sent.
	Replay Replayer
	// Logger receives state changes; default slog.Default().
	Logger *slog.Logger
}

// Call is one request on its way to a backend.
type Call struct {
	// Req is the request; its Wire is written to the server.
	Req *codec.Request
	// Reply is filled in before Done runs.
	Reply codec.Reply
	// Done is called exactly once when Reply is set. It must not block.
	Done func(*Call)
	// Timeout, when not zero, replaces Config.Timeout for this call:
	// negative means none (a blocking command waiting for data).
	Timeout time.Duration
	// MetaRewrite lets Config.MetaRewrite rewrite Req on a socket whose
	// server speaks meta: set it for a call whose reply is read alone,
	// never for one part of a fan-out, whose replies a merge reads as
	// the request's own form.
	MetaRewrite bool
	// Splice lets the socket splice a long value in the reply instead of
	// reading it (splice.go): set it for a call whose reply goes to a
	// client's socket as it came (or as codec.BigReplier rewrites it),
	// which then writes Reply.Raw, the value in Spliced, and its After.
	Splice bool
	// Pipes, when not nil, counts the pipes the replies of the call's
	// client hold (shared by its calls): past MaxClientPipes, its replies
	// are read as usual, so that a client that does not read cannot hold
	// every pipe of the process.
	Pipes *atomic.Int32
	// Over, when set, is asked as each reply to the call is framed, on
	// the socket's reader: true fails the socket with CauseOutOfMemory,
	// the call and every call behind it, as memcached's proxy drops a
	// backend connection that reads a reply while its worker's buffers
	// are over buffer_memory_limit. It must not block.
	Over func() bool
	// Gate, on a dedicated socket, holds the call's write until it is
	// closed (or gateWait has passed), and Written is called once the
	// call is written, or has failed unwritten: a chain of them keeps the
	// blocking commands of several clients in the order they came
	// (kind.DedicatedPool.Order).
	Gate    <-chan struct{}
	Written func()

	probe    bool      // an idle socket's health check (health.go), not a client's
	joined   bool      // written joined with the calls after it, which end the joined reply (join.go)
	deadline time.Time // zero: none
	start    time.Time // queued (Send, Stage)
	sent     time.Time // handed to the socket's write
	replied  time.Time // its reply framed by the socket's reader
	owned    []byte    // the recycled buffer Reply.Raw lives in, if any
	arena    *arena    // the chunk a small Reply.Raw was carved from, if any
	body     Spliced
}

// Times returns when c was queued for its backend, written to the
// server's socket and answered, each zero when c did not get that far (a
// marked-bad backend answers at once; a failed socket answers with an
// error). Read them once Done has run.
func (c *Call) Times() (queued, sent, replied time.Time) {
	return c.start, c.sent, c.replied
}

// Spliced returns the part of c's reply that waits in a pipe, or nil
// when the whole reply is in Reply.Raw. See Call.Splice.
func (c *Call) Spliced() *Spliced {
	if c.body.p == nil {
		return nil
	}
	return &c.body
}

// Release recycles the buffer a reply lives in once its owner is done with
// it; afterwards c.Reply.Raw, and every slice of it, must not be used, and
// neither may a copy of c be released. Calling it is optional (an
// unreleased buffer is left to the garbage collector).
func (c *Call) Release() {
	if c.body.p != nil {
		c.body.release()
	}
	switch {
	case c.owned != nil:
		PutBuffer(c.owned)
		c.owned = nil
		c.Reply.Raw = nil
	case c.arena != nil:
		c.arena.release()
		c.arena = nil
		c.Reply.Raw = nil
	}
}

// MoveReply moves c's reply, the buffers it lives in (a spliced value's
// pipe among them) and its times to dst, a call for the same request that
// was not sent: dst then owns them, and its Release recycles them. c holds
// no reply afterwards.
func (c *Call) MoveReply(dst *Call) {
	dst.Reply, dst.owned, dst.arena, dst.body = c.Reply, c.owned, c.arena, c.body
	dst.start, dst.sent, dst.replied = c.start, c.sent, c.replied
	c.Reply, c.owned, c.arena, c.body = codec.Reply{}, nil, nil, Spliced{}
}

// Backend is one server with its sockets and health state.
type Backend struct {
	cfg    Config
	conns  []*conn
	conns3 atomic.Pointer[[]*conn] // the slots for requests of Proto 3, made on first use
	log    *slog.Logger

	badUntil atomic.Int64 // unix nanos; 0 when not bad
	version  atomic.Pointer[string]
	meta     atomic.Int32 // what the newest socket's handshake told: metaUnknown, metaNo, metaYes

	mu        sync.Mutex
	dedicated map[*conn]struct{} // open dedicated sockets (Dedicate), closed with b
	failures  int
	failing   atomic.Bool // failures != 0, read without the lock
	lastCause Cause
	bad       bool
	probing   bool      // bad, and its retry time passed: a probe brings it back (health.go)
	nextProbe time.Time // while probing: when the next probe starts
	closed    bool
	timer     *time.Timer

	// checks are the idle-socket checks by what the socket's handshake
	// told (health.go): [0] for a text socket, [1] for a meta one; nil
	// without HealthInterval.
	checks [2]*codec.Request
	// joiner is the dialect's codec.Joiner, if it is one: a socket joins
	// the calls of a batch it may join (join.go).
	joiner codec.Joiner
	// splicer is the dialect's codec.Splicer, if it is one (splice.go).
	splicer codec.Splicer

	stats Stats
}

// New returns a Backend for cfg. Sockets are dialled at first use unless
// cfg.Preconnect is set.
func New(cfg Config) *Backend {
	if cfg.Name == "" {
		cfg.Name = cfg.Addr
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 1
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = DefaultRetryTimeout
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = DefaultHealthTimeout
	}
	if cfg.HealthInterval < 0 || cfg.Reconnect {
		cfg.HealthInterval = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Backend{cfg: cfg, log: cfg.Logger.With("backend", cfg.Name, "addr", cfg.Addr)}
	b.checks = idleChecks(cfg)
	if !cfg.NoJoin {
		b.joiner, _ = cfg.Dialect.(codec.Joiner)
	}
	b.splicer, _ = cfg.Dialect.(codec.Splicer)
	b.conns = make([]*conn, cfg.Conns)
	for i := range b.conns {
		b.conns[i] = newConn(b)
	}
	if cfg.Preconnect && cfg.FirstIdle {
		for i := 1; i < len(b.conns); i++ {
			b.conns[i-1].then.Store(b.conns[i]) // kicked once its predecessor's connect returns
		}
		b.conns[0].kick()
	} else if cfg.Preconnect {
		for _, c := range b.conns {
			c.kick()
		}
	}
	return b
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.cfg.Name }

// Addr returns the backend's address.
func (b *Backend) Addr() string { return b.cfg.Addr }

// Version returns the server's version as the handshake of its most
// recently validated socket told it (see codec.VersionReader), or "" while
// none has told it. Safe for concurrent use.
func (b *Backend) Version() string {
	if v := b.version.Load(); v != nil {
		return *v
	}
	return ""
}

// learnVersion records the version a new socket's handshake told, unless
// it is empty or known already.
func (b *Backend) learnVersion(v string) {
	if v == "" {
		return
	}
	if old := b.version.Load(); old == nil || *old != v {
		b.version.Store(&v)
	}
}

// Values of Backend.meta.
const (
	metaUnknown int32 = iota
	metaNo
	metaYes
)

// Meta reports whether the server answered the meta probe (true) or not
// (false) when its most recently validated socket was; known is false
// while no socket has been validated. Safe for concurrent use.
func (b *Backend) Meta() (meta, known bool) {
	switch b.meta.Load() {
	case metaYes:
		return true, true
	case metaNo:
		return false, true
	}
	return false, false
}

// learnMeta records what a new socket's handshake told of the meta
// protocol, and tells Config.OnMeta when it changed.
func (b *Backend) learnMeta(meta bool) {
	v := metaNo
	if meta {
		v = metaYes
	}
	if old := b.meta.Swap(v); old != v && b.cfg.OnMeta != nil {
		b.cfg.OnMeta(b, meta, old == metaUnknown)
	}
}

// Config returns the configuration the backend was built with (defaults filled in).
func (b *Backend) Config() Config { return b.cfg }

// Send queues c for the backend. hint picks the socket (hint % Conns), so
// one client's requests keep their order on one socket. If the backend is
// marked bad or closed, c completes at once, on the caller's goroutine.
//
// A request of another protocol version (codec.Request.Proto not 0: a
// RESP3 client's) goes on a second set of Conns slots whose handshake
// asks the server for that version (HandshakeOptions.Proto), made on the
// first such request; a backend holds one such set, for the first
// version asked (RESP has one other than its first).
func (b *Backend) Send(c *Call, hint uint32) {
	if b.prepare(c, time.Now()) {
		b.slot(c, hint).enqueue(c)
	}
}

// slot returns the socket slot for c: hint % Conns among the slots of
// c's protocol version.
func (b *Backend) slot(c *Call, hint uint32) *conn {
	slots := b.conns
	if c.Req != nil && c.Req.Proto != 0 {
		slots = b.protoSlots(c.Req.Proto)
	}
	if b.cfg.FirstIdle && len(slots) > 1 {
		return firstIdle(slots)
	}
	return slots[int(hint%uint32(len(slots)))]
}

// firstIdle is Config.FirstIdle's choice among slots.
func firstIdle(slots []*conn) *conn {
	best, least := slots[0], int64(math.MaxInt64)
	for _, c := range slots {
		n := c.depth()
		if n == 0 {
			return c
		}
		if n < least {
			best, least = c, n
		}
	}
	return best
}

// protoSlots returns the slots for requests of protocol version proto
// (not 0), made on first use. Once b is closed it returns the closed
// first slots, which fail every call.
func (b *Backend) protoSlots(proto uint8) []*conn {
	if p := b.conns3.Load(); p != nil {
		return *p
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.conns3.Load(); p != nil {
		return *p
	}
	if b.closed {
		return b.conns
	}
	slots := make([]*conn, len(b.conns))
	for i := range slots {
		slots[i] = newConn(b)
		slots[i].proto = proto
	}
	b.conns3.Store(&slots)
	return slots
}

// prepare stamps c for sending at now, or completes it at once when the
// backend is marked bad.
func (b *Backend) prepare(c *Call, now time.Time) bool {
	if until := b.badUntil.Load(); until != 0 && now.UnixNano() < until {
		b.finish(c, CauseMarkedBad)
		return false
	}
	c.start = now
	timeout := b.cfg.Timeout
	if c.Timeout != 0 {
		timeout = c.Timeout
	}
	if timeout > 0 {
		c.deadline = now.Add(timeout)
	} else {
		c.deadline = time.Time{}
	}
	return true
}

// Batch gathers calls to several backends and sends them together: one
// lock and one writer wake-up per socket for all the calls of a client's
// read, rather than one per call. The zero Batch is ready; it belongs to
// one goroutine.
type Batch struct {
	now   time.Time // of the first Stage since the last Flush
	calls []staged
	conns []*conn // distinct, in order of first appearance
}

type staged struct {
	conn *conn
	call *Call
}

// Start stamps the calls staged from now to the next Flush with t, the
// time their requests were read, unless one was staged already: a caller
// that reads the clock anyway saves Stage its own reading.
func (bt *Batch) Start(t time.Time) {
	if bt.now.IsZero() {
		bt.now = t
	}
}

// Stage queues c for b in the batch, as Send would queue it for b at once.
// Nothing is written before Flush; the caller must Flush before it waits
// for any staged call.
func (b *Backend) Stage(c *Call, hint uint32, bt *Batch) {
	if bt.now.IsZero() {
		bt.now = time.Now() // the calls of one read share their start
	}
	if !b.prepare(c, bt.now) {
		return
	}
	bt.add(b.slot(c, hint), c)
}

// add stages c for socket slot cn.
func (bt *Batch) add(cn *conn, c *Call) {
	if !slices.Contains(bt.conns, cn) {
		bt.conns = append(bt.conns, cn)
	}
	bt.calls = append(bt.calls, staged{cn, c})
}

// Flush sends every staged call, in order for each socket.
func (bt *Batch) Flush() {
	for _, cn := range bt.conns {
		cn.enqueueStaged(bt.calls)
	}
	clear(bt.calls)
	clear(bt.conns)
	bt.calls, bt.conns, bt.now = bt.calls[:0], bt.conns[:0], time.Time{}
}

// Bad reports whether the backend is marked bad now.
func (b *Backend) Bad() bool {
	until := b.badUntil.Load()
	return until != 0 && time.Now().UnixNano() < until
}

// Close fails every queued and in-flight request with CauseClosed and closes
// the sockets. Later Sends fail at once. When it returns, every call sent
// before it has completed: it waits for each socket's writer and reader,
// so it must not be called from a Done function.
func (b *Backend) Close() {
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	dedicated := b.dedicated
	b.dedicated = nil
	var conns3 []*conn
	if p := b.conns3.Load(); p != nil {
		conns3 = *p
	}
	b.mu.Unlock()
	for _, c := range b.conns {
		c.close()
	}
	for _, c := range conns3 {
		c.close()
	}
	for c := range dedicated {
		c.close()
	}
}

// finish completes a call that got no reply.
func (b *Backend) finish(c *Call, cause Cause) {
	if cause == CauseTimeout && !c.probe {
		b.stats.Timeouts.Add(1)
	}
	c.Gate = nil
	if w := c.Written; w != nil { // failed unwritten: the calls ordered after it go on
		c.Written = nil
		w()
	}
	c.Reply = codec.Reply{Err: errs[cause]}
	c.Done(c)
}

// gateWait bounds how long a call waits for its Gate: a call before it
// whose socket is slow to open does not hold it longer.
const gateWait = 2 * time.Second

// passGates waits for the gates of a dedicated socket's batch and takes
// their calls' Written, which the writer calls once the batch is written
// (or its socket found dead). A shared socket's calls have neither.
func passGates(batch []*Call, wrote []func()) []func() {
	for _, call := range batch {
		if g := call.Gate; g != nil {
			call.Gate = nil
			t := time.NewTimer(gateWait)
			select {
			case <-g:
			case <-t.C:
			}
			t.Stop()
		}
		if w := call.Written; w != nil {
			call.Written = nil
			wrote = append(wrote, w)
		}
	}
	return wrote
}

// succeeded resets the failure count after a good reply.
func (b *Backend) succeeded() {
	if !b.failing.Load() || b.cfg.Reconnect {
		return // the common case, without the lock; under memcached's rule only validation resets
	}
	b.mu.Lock()
	b.failing.Store(false)
	if b.failures != 0 {
		if b.failures >= b.cfg.FailureLimit && b.cfg.FailureLimit > 0 {
			b.log.Info("backend recovered", "after", b.lastCause.String())
		}
		b.failures = 0
	}
	b.mu.Unlock()
}

// countFailure counts one failure in the stats.
func (b *Backend) countFailure(cause Cause) {
	b.stats.Failures.Add(1)
	if cause == CauseDisconnected {
		b.stats.EOF.Add(1)
	} else {
		b.stats.Errors.Add(1)
	}
}

// sockFailed counts the failure of one of c's sockets, or of a dial (c
// nil), by the backend's rule, and tells Config.OnEvent of it. It
// reports whether the backend is bad now.
func (b *Backend) sockFailed(c *conn, cause Cause, f sockFailure) bool {
	if b.cfg.Reconnect {
		return b.reconnectFailed(c, cause, f)
	}
	if b.cfg.OnEvent != nil && !b.Bad() {
		b.event(Event{Cause: cause, Depth: max(f.depth, 0), Rbuf: f.rbuf})
	}
	b.failed(cause)
	return b.Bad()
}

// failed counts one failure and marks the backend bad at the limit
// (twemproxy's rule).
func (b *Backend) failed(cause Cause) {
	b.countFailure(cause)
	b.mu.Lock()
	b.failures++
	b.failing.Store(true)
	b.lastCause = cause
	markBad := b.cfg.FailureLimit > 0 && b.failures >= b.cfg.FailureLimit && !b.bad && !b.closed
	if markBad {
		b.bad = true
		until := time.Now().Add(b.cfg.RetryTimeout)
		if b.cfg.HealthInterval > 0 {
			// Bad until a probe succeeds: the retry time starts the
			// probes (health.go), it does not let requests through.
			b.badUntil.Store(math.MaxInt64)
			b.nextProbe = until
		} else {
			b.badUntil.Store(until.UnixNano())
		}
		b.stats.Ejects.Add(1)
		b.stats.EjectedAt.Store(time.Now().UnixMicro())
		b.timer = time.AfterFunc(b.cfg.RetryTimeout, b.retry)
	}
	b.mu.Unlock()
	if markBad {
		b.log.Warn("backend marked bad", "cause", cause.String(), "retry_in", b.cfg.RetryTimeout)
		if b.cfg.OnStateChange != nil {
			b.cfg.OnStateChange(b, true)
		}
	}
}

// retry ends a bad period: the next request may dial again. With
// health checks on, it probes instead (health.go).
func (b *Backend) retry() {
	b.mu.Lock()
	if b.closed || !b.bad {
		b.mu.Unlock()
		return
	}
	if b.cfg.HealthInterval > 0 {
		b.mu.Unlock()
		b.probe()
		return
	}
	b.bad = false
	b.badUntil.Store(0)
	last := b.lastCause
	b.mu.Unlock()
	b.log.Info("backend retry", "last_cause", last.String())
	if b.cfg.OnStateChange != nil {
		b.cfg.OnStateChange(b, false)
	}
}
