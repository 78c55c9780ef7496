package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/route"
)

// ReadFrom says which nodes serve read-only commands.
type ReadFrom uint8

const (
	// ReadMaster sends every command to the slot's master (the default).
	ReadMaster ReadFrom = iota
	// ReadPreferReplica sends read-only commands to a healthy replica of
	// the slot's master, or to the master when it has none.
	ReadPreferReplica
	// ReadReplica sends read-only commands to replicas only; a slot whose
	// master has no healthy replica answers them with an error.
	ReadReplica
)

// ParseReadFrom reads a read_from value: "master", "prefer_replica" or
// "replica"; "" means master.
func ParseReadFrom(s string) (ReadFrom, error) {
	switch s {
	case "", "master":
		return ReadMaster, nil
	case "prefer_replica":
		return ReadPreferReplica, nil
	case "replica":
		return ReadReplica, nil
	}
	return 0, fmt.Errorf("cluster: unknown read_from %q; want master, prefer_replica or replica", s)
}

// String returns the read_from name.
func (r ReadFrom) String() string {
	switch r {
	case ReadPreferReplica:
		return "prefer_replica"
	case ReadReplica:
		return "replica"
	}
	return "master"
}

// Defaults of Config's zero fields.
const (
	DefaultRefreshInterval = 5 * time.Second
	DefaultMaxRedirects    = 5
	DefaultTryAgain        = 16
)

const (
	// minRefreshGap spaces refreshes that MOVED replies and node failures
	// ask for; failRefreshGap does so while refreshes fail.
	minRefreshGap  = 100 * time.Millisecond
	failRefreshGap = time.Second
	// maxParked bounds the requests that wait for the first slot map.
	maxParked = 16384
	// closeDrain bounds how long Close and a retired node wait for
	// requests in flight.
	closeDrain = 10 * time.Second
	// maxTryAgainDelay caps the backoff between TRYAGAIN retries, which
	// starts at 5ms and doubles.
	maxTryAgainDelay = 100 * time.Millisecond
)

// Config configures a Cluster. Seeds is required; every other field has a
// documented default.
type Config struct {
	// Seeds are "host:port" addresses of cluster nodes to read the slot map
	// from. Any one live node is enough; seeds that are down are skipped.
	Seeds []string
	// ReadFrom says where read-only commands go; default ReadMaster.
	ReadFrom ReadFrom
	// RefreshInterval is how often the slot map is read again when nothing
	// asks for it sooner; default DefaultRefreshInterval (5s).
	RefreshInterval time.Duration
	// MaxRedirects bounds the MOVED and ASK replies one request follows;
	// default DefaultMaxRedirects (5).
	MaxRedirects int
	// TryAgain bounds the retries of a request answered -TRYAGAIN (a
	// multi-key request during a slot's migration), 5ms apart and doubling
	// up to 100ms (1.3s in all); default DefaultTryAgain (16). Negative
	// means none.
	TryAgain int
	// Node is the template of every node's backend: Handshake (AUTH; DB
	// must be 0), Conns, ConnectTimeout, Timeout, FailureLimit,
	// RetryTimeout, TCPKeepalive and Preconnect are used; Addr, Name,
	// Dialect, Logger and OnStateChange are set per node.
	Node backend.Config
	// Backends hands out the nodes' backends and takes them back when a
	// node leaves the map or the Cluster closes; default backend.Direct
	// (each node's own backend, closed when given back). A reload passes
	// a source shared with the next Cluster, so nodes both use keep their
	// sockets.
	Backends backend.Source
	// Start, if set, is the slot map to serve until the first refresh (a
	// reload passes the running pool's map, so no request waits).
	Start *SlotMap
	// StartRead is when Start was read from a node, for Stats.LastRefresh
	// until the first refresh; the zero time means now.
	StartRead time.Time
	// Logger receives topology changes and refresh failures; default
	// slog.Default().
	Logger *slog.Logger
}

// Completer receives the reply to a routed request: route's one
// completion contract.
type Completer = route.Completion

// Cluster routes Redis requests over a Redis Cluster by its slot map. All
// methods are safe for concurrent use.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	dialect codec.Dialect // words errors and merges fan-out replies

	tab      atomic.Pointer[table] // nil until the first slot map
	closed   atomic.Bool
	inflight atomic.Int64 // client requests routed and not answered
	stats    counters
	ops      sync.Pool

	mu         sync.Mutex
	nodes      map[nodeKey]*node // every node the current table may use
	retiring   []*node           // nodes that left the map, to close once idle
	parked     []*op             // requests waiting for the first map
	refreshing bool
	moves      []move // MOVED updates seen while a refresh runs
	lastErr    string
	lastOK     time.Time

	trigger chan struct{} // cap 1: a refresh is wanted
	stop    chan struct{}
	done    chan struct{} // closed when the refresher has stopped

	// The refresher goroutine's own state.
	probe    *probeConn
	useSlots bool   // a node did not know CLUSTER SHARDS: use CLUSTER SLOTS
	lastGood string // the node the last map came from
}

// move is a MOVED reply's lesson: slot is served by the master at addr.
type move struct {
	slot int
	addr string
}

// New returns a Cluster for cfg and starts reading its slot map in the
// background. Requests routed before the first map arrives wait for it
// (or for the first refresh to fail).
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.TryAgain == 0 {
		cfg.TryAgain = DefaultTryAgain
	}
	if cfg.Node.ConnectTimeout <= 0 {
		cfg.Node.ConnectTimeout = backend.DefaultConnectTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backends == nil {
		cfg.Backends = backend.Direct{}
	}
	c := &Cluster{
		cfg:     cfg,
		log:     cfg.Logger,
		dialect: masterDialect,
		nodes:   map[nodeKey]*node{},
		trigger: make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.ops.New = func() any {
		o := &op{c: c}
		o.call.Done = o.onDone
		return o
	}
	if cfg.Start != nil && cfg.Start.Covered() > 0 {
		c.install(cfg.Start, "start")
		if !cfg.StartRead.IsZero() {
			c.mu.Lock()
			c.lastOK = cfg.StartRead
			c.mu.Unlock()
		}
	}
	c.Refresh()
	go c.run()
	return c, nil
}

// Validate reports what New refuses in cfg (no seeds, a seed that is not
// host:port, a database other than 0), without starting anything: a
// configuration test (shardproxy -t) runs it in place of New.
func (cfg Config) Validate() error {
	if len(cfg.Seeds) == 0 {
		return errors.New("cluster: no seed nodes")
	}
	for _, s := range cfg.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("cluster: seed %q is not host:port", s)
		}
	}
	if cfg.Node.Handshake.DB != 0 {
		return errors.New("cluster: a Redis Cluster has database 0 only")
	}
	return nil
}

// Refresh asks for the slot map to be read again soon. It never blocks;
// refreshes are single-flight and spaced at least 100ms apart.
func (c *Cluster) Refresh() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Map returns the slot map the cluster routes by now, or nil before the
// first one. MOVED replies change the routing of single slots between
// refreshes; Map shows the last map read.
func (c *Cluster) Map() *SlotMap {
	if t := c.tab.Load(); t != nil {
		return t.m
	}
	return nil
}

// Backends returns the backends of the nodes the cluster uses now, for
// stats.
func (c *Cluster) Backends() []*backend.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	bs := make([]*backend.Backend, 0, len(c.nodes))
	for _, n := range c.nodes {
		bs = append(bs, n.b)
	}
	return bs
}

// Close stops refreshing, fails requests still waiting for a map, waits (up
// to 10s) for requests in flight, and gives every node's backend back to
// Config.Backends.
func (c *Cluster) Close() {
	if c.closed.Swap(true) {
		return
	}
	close(c.stop)
	<-c.done
	c.mu.Lock()
	parked := c.parked
	c.parked = nil
	c.mu.Unlock()
	for _, o := range parked {
		o.finishError(ErrClosed.Error())
	}
	deadline := time.Now().Add(closeDrain)
	for c.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	nodes := c.retiring
	for _, n := range c.nodes {
		nodes = append(nodes, n)
	}
	c.nodes, c.retiring = map[nodeKey]*node{}, nil
	c.mu.Unlock()
	for _, n := range nodes {
		c.cfg.Backends.Put(n.b)
	}
}

// Route sends req to the node(s) serving its keys' slots and calls
// done.Complete exactly once with the client's reply. It never blocks: the
// reply comes on a backend's goroutine (or, for a request refused at once,
// on the caller's). req must stay valid until then.
//
// RouteKey goes to the slot of Keys[0]; RouteSame to the one slot of all
// keys (else -CROSSSLOT); RouteMulti (MGET, MSET, DEL, UNLINK, EXISTS,
// TOUCH) is split per slot and merged; RouteAny goes to one master;
// RouteAll to every master; RouteServer (SCAN) to the master that
// req.Target numbers in the order of the first slot each serves.
func (c *Cluster) Route(req *codec.Request, hint uint32, done Completer) {
	if c.closed.Load() {
		done.Complete(c.dialect.AppendError(nil, codec.ErrServer, ErrClosed.Error()))
		return
	}
	read := c.cfg.ReadFrom != ReadMaster && readOnly[req.Name]
	switch req.Route {
	case codec.RouteKey, codec.RouteSame, codec.RouteAny:
		slot, ok := sameSlot(req)
		if !ok {
			c.stats.crossSlot.Add(1)
			done.Complete(c.dialect.AppendError(nil, codec.ErrCrossServer, "Keys in request don't hash to the same slot"))
			return
		}
		c.inflight.Add(1)
		o := c.newOp(req, slot, hint, read)
		o.done = done
		o.send()
	case codec.RouteMulti:
		c.routeMulti(req, hint, read, done)
	case codec.RouteAll:
		c.routeAll(req, hint, done)
	case codec.RouteServer:
		c.routeServer(req, hint, done)
	default:
		done.Complete(c.dialect.AppendError(nil, codec.ErrServer, "unroutable request "+req.Name))
	}
}

// sameSlot returns the slot of all of req's keys; -1 when it has none (or
// is RouteAny); false when they hash to different slots.
func sameSlot(req *codec.Request) (int, bool) {
	if req.Route == codec.RouteAny || len(req.Keys) == 0 {
		return -1, true
	}
	slot := Slot(req.Keys[0])
	for _, k := range req.Keys[1:] {
		if Slot(k) != slot {
			return 0, false
		}
	}
	return slot, true
}

// downReason is what a request that finds no slot map is told.
func (c *Cluster) downReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr != "" {
		return "shardproxy has no cluster slot map: " + c.lastErr
	}
	return "shardproxy has no cluster slot map yet"
}

// appendClusterDown appends "-CLUSTERDOWN <msg>\r\n", line breaks in msg
// made spaces.
func appendClusterDown(dst []byte, msg string) []byte {
	dst = append(dst, "-CLUSTERDOWN "...)
	for i := range len(msg) {
		ch := msg[i]
		if ch == '\r' || ch == '\n' {
			ch = ' '
		}
		dst = append(dst, ch)
	}
	return append(dst, "\r\n"...)
}

// slotText names a slot in messages.
func slotText(slot int) string { return strconv.Itoa(slot) }

// Place returns the master serving the slot of every key of req, for a
// connection of a client's own (a blocking command, a transaction), and
// that slot; -1 and the master hint picks for a request without keys. A
// request it cannot place gets refusal, the reply the client sees:
// -CROSSSLOT for keys in different slots, -CLUSTERDOWN when the slot has
// no master or there is no slot map yet. It never blocks and follows no
// redirect: the node answers MOVED or ASK itself if the slot moves.
func (c *Cluster) Place(req *codec.Request, hint uint32) (b *backend.Backend, slot int, refusal []byte) {
	if c.closed.Load() {
		return nil, 0, c.dialect.AppendError(nil, codec.ErrServer, ErrClosed.Error())
	}
	slot, ok := sameSlot(req)
	if !ok {
		c.stats.crossSlot.Add(1)
		return nil, 0, c.dialect.AppendError(nil, codec.ErrCrossServer, "Keys in request don't hash to the same slot")
	}
	t := c.tab.Load()
	if t == nil {
		c.Refresh()
		return nil, 0, appendClusterDown(nil, c.downReason())
	}
	o := op{slot: slot, hint: hint}
	n, _, msg := t.pick(&o, ReadMaster)
	if n == nil {
		return nil, 0, appendClusterDown(nil, msg)
	}
	return n.b, slot, nil
}
