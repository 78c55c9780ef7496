package proxy

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/resp"
)

// This file is the pool's half of client-side caching (CLIENT TRACKING);
// tracking.go is the client's.
//
// A tracker serves one Redis pool (by name, so that a reload that keeps
// the pool keeps it) while any of its clients has tracking on, and
// lingerTracking after the last one. It holds
// one connection of the proxy's own per server (invConn): a push-mode
// connection that said HELLO 3 and CLIENT TRACKING ON BCAST, so that the
// server pushes an invalidation for every key written on it, by anyone:
// a client of this proxy, of another proxy of the fleet, or one
// connected to the server directly. The shared request sockets are left
// as they are: BCAST without a prefix needs no read to be tracked on the
// connection that read, so nothing about the clients' reads has to reach
// the server, and a request of a client without tracking pays one branch.
// (Turning tracking on the shared sockets instead, redirected to such a
// connection, would deliver the same invalidations, but every socket of
// the pool, and each one a reconnect opens, would have to be switched.)
// The cost is on the server and this connection: every write to the
// server becomes a push frame, while tracking is on in the pool.
//
// The tracker keeps, per server, which tracking clients read which key
// (the clients' default mode, OPTIN and OPTOUT), at most maxTrackedKeys
// keys over the pool: past it, keys are dropped at random and their
// readers get their invalidation, as Redis's tracking-table-max-keys
// evicts. A BCAST client reads nothing into the table: it gets every
// invalidation whose key matches one of its prefixes.
//
// A connection lost (the server restarted, the network cut, a reload
// removed the server) means writes were missed: its clients (those that
// read a key there, and every BCAST client) get a null invalidation, as
// Redis sends after FLUSHALL: forget everything. The tracker opens a new
// connection a second later (retryTracking); reads of that server until
// it is confirmed are invalidated again once it is (they might have
// missed a write), and the BCAST clients get a second null then.
//
// Locks: tracker.mu guards the tables; a delivery is collected under it
// and made after it is released, under the receiving session's
// trackState.mu or subState.mu, so no goroutine holds two of them.

// Why a tracking connection ended, when its socket did not say.
var (
	errServerClosed    = errors.New("proxy: server removed")
	errTrackingRefused = errors.New("proxy: server refused client tracking")
)

// maxTrackedKeys bounds a pool's tracked keys (Redis's
// tracking-table-max-keys default).
const maxTrackedKeys = 1_000_000

// retryTracking is how long after a connection failed the tracker opens
// a new one.
const retryTracking = time.Second

// trackHub holds the server's trackers by pool name.
type trackHub struct {
	mu   sync.Mutex
	pool map[string]*tracker
}

// of returns the tracker of pl's name, made on first use.
func (h *trackHub) of(pl *pool) *tracker {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pool == nil {
		h.pool = map[string]*tracker{}
	}
	t := h.pool[pl.cfg.Name]
	if t == nil {
		t = &tracker{srv: pl.srv, log: pl.log, conns: map[*backend.Backend]*invConn{},
			clients: map[*trackState]struct{}{}, bcast: map[*trackState]struct{}{}, max: maxTrackedKeys}
		h.pool[pl.cfg.Name] = t
	}
	return t
}

// tracker is one pool's tracking: its invalidation connections and its
// tracking clients.
type tracker struct {
	srv *Server
	log *slog.Logger

	mu      sync.Mutex
	pool    *pool         // the latest pool of the name (join, sync)
	stop    chan struct{} // ends follow; nil while no client tracks
	max     int           // maxTrackedKeys, or what CONFIG SET tracking-table-max-keys set; 0: no limit
	conns   map[*backend.Backend]*invConn
	clients map[*trackState]struct{}
	// bcast holds the clients in BCAST mode: every write on a server is
	// matched against their prefixes, and against no other client's, so
	// a write costs nothing per client in the default mode.
	bcast map[*trackState]struct{}
	keys  int    // entries of every conn's table
	idle  uint64 // leaves that left no client: the latest one's closeIdle closes
}

// invConn is the tracker's connection to one server.
type invConn struct {
	t     *tracker
	b     *backend.Backend
	d     *backend.Dedicated
	ready bool // the server confirmed CLIENT TRACKING
	gone  bool // failed or closed: a newer invConn may have taken b
	// again is set for a connection that replaces a lost one: once it is
	// confirmed, what was read meanwhile is invalidated.
	again bool
	waits []*trackWait
	// barriers are the PINGs sent (barrier), in order: each retires
	// its client's own writes up to seq when its PONG arrives.
	barriers []barrier
	// table is which clients read which key of this server.
	table map[string][]*trackState
}

// trackWait is a CLIENT TRACKING ON waiting for the servers' connections
// to be confirmed; done runs once every one is (or failed).
type trackWait struct {
	left int
	done func()
}

// Wires of the connection's commands.
var (
	invHello = resp.EncodeCommand("hello", [][]byte{[]byte("3")})
	invOn    = resp.EncodeCommand("client", [][]byte{[]byte("tracking"), []byte("on"), []byte("bcast")})
)

// join adds ts to the tracker and opens a connection to each of servers
// that has none; done runs once all are confirmed or failed.
func (t *tracker) join(ts *trackState, pl *pool, servers []*backend.Backend, done func()) {
	t.mu.Lock()
	t.clients[ts] = struct{}{}
	t.pool = pl
	if t.stop == nil {
		t.stop = make(chan struct{})
		go t.follow(t.stop)
	}
	w := &trackWait{done: done}
	var opened []*invConn
	for _, b := range servers {
		c := t.conns[b]
		if c == nil {
			c = t.open(b, false)
			opened = append(opened, c)
		}
		if !c.ready {
			w.left++
			c.waits = append(c.waits, w)
		}
	}
	ready := w.left == 0 // else the last confirmation runs done
	t.mu.Unlock()
	t.start(opened)
	if ready {
		done()
	}
}

// open makes b's invConn. Under mu; start sends its commands after.
func (t *tracker) open(b *backend.Backend, again bool) *invConn {
	c := &invConn{t: t, b: b, again: again, table: map[string][]*trackState{}}
	t.conns[b] = c
	return c
}

// start dials what open made. Not under mu: a connection that fails at
// once calls its PushFunc, which takes mu.
func (t *tracker) start(cs []*invConn) {
	for _, c := range cs {
		d := c.b.DedicatePush(c.push)
		if d == nil { // b is closed (a reload removed its server): no retry
			c.lost(errServerClosed, false)
			continue
		}
		t.mu.Lock()
		c.d = d
		gone := c.gone
		t.mu.Unlock()
		if gone {
			d.Close()
			continue
		}
		for _, wire := range [][]byte{invHello, invOn} {
			d.Send(&backend.Call{Req: &codec.Request{Name: "client|tracking", Route: codec.RouteSubscribe,
				Wire: wire, Buf: wire}, Timeout: -1, Done: c.sent})
		}
	}
}

// sent is the Done of a command sent on c.
func (c *invConn) sent(call *backend.Call) {
	if err := call.Reply.Err; err != nil {
		c.lost(err, true)
	}
}

// leave takes ts out of the tracker (tracking off, or the client left);
// lingerTracking after the last client, if none came meanwhile, the
// connections close.
func (t *tracker) leave(ts *trackState) {
	t.mu.Lock()
	delete(t.clients, ts)
	delete(t.bcast, ts)
	t.dropKeys(ts)
	if len(t.clients) == 0 {
		t.idle++
		idle := t.idle
		time.AfterFunc(lingerTracking, func() { t.closeIdle(idle) })
	}
	t.mu.Unlock()
}

// lingerTracking is how long a tracker keeps its connections once its
// last client turned tracking off or left: a client that turns it on
// again meanwhile (one that switches modes does, OFF then ON) is
// answered at once, over servers that track already, as redis-server
// answers it, where new connections would answer once confirmed, a
// round trip later, and writes by others in between would be missed.
var lingerTracking = 5 * time.Second // a variable for the tests

// closeIdle closes the connections, unless a client has tracking on or
// a later leave is to close them (idle is the leave's count).
func (t *tracker) closeIdle(idle uint64) {
	t.mu.Lock()
	var closing []*backend.Dedicated
	if len(t.clients) == 0 && idle == t.idle {
		if t.stop != nil {
			close(t.stop)
			t.stop = nil
		}
		for b, c := range t.conns {
			c.gone = true
			delete(t.conns, b)
			if c.d != nil {
				closing = append(closing, c.d)
			}
			c.release()
		}
	}
	t.mu.Unlock()
	for _, d := range closing {
		d.Close()
	}
}

// release ends c's waits. Under mu.
func (c *invConn) release() {
	waits := c.waits
	c.waits = nil
	for _, w := range waits {
		if w.left--; w.left == 0 {
			go w.done() // not under mu: it queues on the session
		}
	}
}

// dropKeys forgets every key ts read. Under mu.
func (t *tracker) dropKeys(ts *trackState) {
	for c, keys := range ts.keys {
		for k := range keys {
			c.unlink(k, ts)
			t.keys--
		}
	}
	clear(ts.keys)
}

// unlink takes ts out of key's readers. Under mu.
func (c *invConn) unlink(key string, ts *trackState) {
	readers := c.table[key]
	for i, r := range readers {
		if r == ts {
			readers = append(readers[:i], readers[i+1:]...)
			break
		}
	}
	if len(readers) == 0 {
		delete(c.table, key)
	} else {
		c.table[key] = readers
	}
}

// evictOne drops one tracked key, at random, and adds its invalidation
// for its readers to ds. Under mu.
func (t *tracker) evictOne(ds []delivery) []delivery {
	for _, c := range t.conns {
		for k := range c.table {
			return t.dropKey(c, k, ds)
		}
	}
	t.keys = 0 // nothing left to evict
	return ds
}

// push is c's backend.PushFunc: the server's frames, or its loss.
func (c *invConn) push(frame []byte, err error) {
	if err != nil {
		c.lost(err, true)
		return
	}
	keys, all, ok := resp.ReadInvalidate(frame)
	switch {
	case ok && all:
		c.invalidateAll(true)
	case ok:
		c.invalidate(keys)
	case string(frame) == "+PONG\r\n":
		c.ponged()
	case len(frame) > 0 && frame[0] == '+': // CLIENT TRACKING's +OK
		c.confirmed()
	case len(frame) > 0 && frame[0] == '-':
		c.t.log.Warn("client tracking refused by server", "server", c.b.Name(),
			"err", strings.TrimSpace(string(frame[1:])))
		c.lost(errTrackingRefused, false)
	}
	// HELLO's map, and anything else, says nothing of keys.
}

// confirmed marks c ready: the server tracks every key for it now.
func (c *invConn) confirmed() {
	t := c.t
	t.mu.Lock()
	if c.gone || c.ready {
		t.mu.Unlock()
		return
	}
	c.ready = true
	c.release()
	var ds []delivery
	if c.again {
		ds = t.flushConn(c, ds)
	} else {
		ds = t.flushTable(c, ds) // reads sent behind CLIENT TRACKING ON, before this
	}
	t.mu.Unlock()
	deliverAll(ds)
}

// invalidate delivers the invalidation of keys, written on c's server:
// to each client that read one (its table entry dropped, one message a
// key, as Redis's default mode sends) and to each BCAST client whose
// prefixes match (one message a prefix).
func (c *invConn) invalidate(keys [][]byte) {
	t := c.t
	var ds []delivery
	t.mu.Lock()
	if c.gone {
		t.mu.Unlock()
		return
	}
	for _, k := range keys {
		if _, ok := c.table[string(k)]; ok {
			ds = t.dropKey(c, string(k), ds)
		}
	}
	for ts := range t.bcast {
		ds = ts.matchPrefixes(ds, c, keys)
	}
	t.mu.Unlock()
	deliverAll(ds)
}

// invalidateAll is the server's null (a FLUSHALL or FLUSHDB), or the
// proxy's own when c is lost: every client that read a key there, and
// every BCAST client, forgets everything; the server's goes to every
// tracking client (flushServer). Every key ts read anywhere is dropped:
// the client flushes its whole cache on a null.
func (c *invConn) invalidateAll(fromServer bool) {
	t := c.t
	t.mu.Lock()
	if fromServer && c.gone {
		t.mu.Unlock()
		return
	}
	var ds []delivery
	if fromServer {
		ds = t.flushServer(nil)
	} else {
		ds = t.flushConn(c, nil)
	}
	t.mu.Unlock()
	deliverAll(ds)
}

// flushServer adds, for a server's null, a null for every tracking
// client, as redis-server sends one to each of its tracking clients on
// a flush, whether they read a key or not (a read sent just before the
// flush ran, whose key the tracker has not yet, is forgotten too). A
// client in the default modes told a null and that read nothing since
// is not told again: the same flush's null from the pool's other
// servers is one message, as Redis sends it. Under mu.
func (t *tracker) flushServer(ds []delivery) []delivery {
	for ts := range t.clients {
		if !ts.bcast && ts.nulled {
			continue
		}
		t.dropKeys(ts)
		ts.nulled = !ts.bcast
		ds = append(ds, delivery{ts: ts, all: true})
	}
	return ds
}

// flushTable adds an invalidation of each key read on c's server before c
// was confirmed: a write then went unseen. Under mu.
func (t *tracker) flushTable(c *invConn, ds []delivery) []delivery {
	for k := range c.table {
		ds = t.dropKey(c, k, ds)
	}
	return ds
}

// dropKey takes key out of c's table and adds its invalidation for each
// client that read it. Under mu.
func (t *tracker) dropKey(c *invConn, key string, ds []delivery) []delivery {
	readers := c.table[key]
	delete(c.table, key)
	for _, ts := range readers {
		ts.remove(c, key)
		t.keys--
		ds = append(ds, delivery{ts: ts, keys: []string{key}})
	}
	return ds
}

// flushConn adds a null invalidation for every client that read a key on
// c's server and every BCAST client, and drops their keys. Under mu.
func (t *tracker) flushConn(c *invConn, ds []delivery) []delivery {
	told := map[*trackState]bool{}
	for _, readers := range c.table {
		for _, ts := range readers {
			told[ts] = true
		}
	}
	for ts := range t.bcast {
		told[ts] = true
	}
	for ts := range told {
		t.dropKeys(ts)
		ds = append(ds, delivery{ts: ts, all: true})
	}
	return ds
}

// lost handles the end of c's connection: its clients get a null
// invalidation, and with retry a new connection is opened after
// retryTracking.
func (c *invConn) lost(err error, retry bool) {
	t := c.t
	t.mu.Lock()
	if c.gone {
		t.mu.Unlock()
		return
	}
	c.gone = true
	if t.conns[c.b] == c {
		delete(t.conns, c.b)
	}
	for ts := range t.clients {
		delete(ts.own, c) // no PONG will retire them
	}
	c.release()
	var ds []delivery
	if c.ready || !retry {
		t.log.Warn("client tracking connection lost", "server", c.b.Name(), "err", err)
		ds = t.flushConn(c, nil)
	} else {
		t.flushReads(c) // never confirmed: its reads wait for the next one
	}
	d := c.d
	t.mu.Unlock()
	if d != nil {
		go d.Close() // not on its reader, which may be the caller
	}
	deliverAll(ds)
	if retry {
		time.AfterFunc(retryTracking, func() { t.retry(c.b) })
	}
}

// flushReads moves what was read on c, which is gone before it was
// confirmed, to its successor's table (made now), which invalidates them
// once confirmed: nothing is delivered now. Under mu.
func (t *tracker) flushReads(c *invConn) {
	if len(c.table) == 0 || len(t.clients) == 0 {
		return
	}
	next := t.conns[c.b]
	if next == nil {
		next = t.open(c.b, true) // started by retry
	}
	for k, readers := range c.table {
		for _, ts := range readers {
			ts.remove(c, k)
			if ts.add(next, k) {
				next.table[k] = append(next.table[k], ts)
			} else {
				t.keys--
			}
		}
	}
	clear(c.table)
}

// retry opens b's connection again if clients still track and none was
// opened meanwhile.
func (t *tracker) retry(b *backend.Backend) {
	t.mu.Lock()
	c := t.conns[b]
	switch {
	case len(t.clients) == 0:
		t.mu.Unlock()
		return
	case c == nil:
		c = t.open(b, true)
	case c.d != nil: // opened already
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.start([]*invConn{c})
}

// delivery is one invalidation for one client: keys, or all (a null).
type delivery struct {
	ts   *trackState
	keys []string
	all  bool
}

// deliverAll delivers ds, in order. Not under mu.
func deliverAll(ds []delivery) {
	for _, d := range ds {
		d.ts.deliver(d.keys, d.all)
	}
}

// barrier is a PING sent on a tracking connection for a BCAST NOLOOP
// client's own writes (trackState.ownWrite).
type barrier struct {
	ts  *trackState
	seq uint64
}

var invPing = resp.EncodeCommand("ping", nil)

// barrier sends a PING on each connection where ts has own writes
// pending; its PONG retires them. Any goroutine.
func (t *tracker) barrier(ts *trackState) {
	var sends []*backend.Dedicated
	t.mu.Lock()
	for c, own := range ts.own {
		if len(own) > 0 && c.ready && !c.gone && c.d != nil {
			c.barriers = append(c.barriers, barrier{ts: ts, seq: own[len(own)-1].seq})
			sends = append(sends, c.d)
		}
	}
	t.mu.Unlock()
	for _, d := range sends {
		d.Send(&backend.Call{Req: &codec.Request{Name: "ping", Route: codec.RouteSubscribe,
			Wire: invPing, Buf: invPing}, Timeout: -1, Done: func(*backend.Call) {}})
	}
}

// ponged retires the own writes of the oldest barrier of c.
func (c *invConn) ponged() {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(c.barriers) == 0 {
		return
	}
	b := c.barriers[0]
	c.barriers = c.barriers[1:]
	own := b.ts.own[c]
	i := 0
	for i < len(own) && own[i].seq <= b.seq {
		i++
	}
	b.ts.own[c] = own[i:]
}

// reloaded opens a tracking connection to each server of pools that a
// tracker with clients has none to: a server a reload added, or whose
// backend it replaced (new options). Such a connection invalidates, once
// confirmed, what was read of its server before (a null to BCAST
// clients), as a connection that replaces a lost one does. The old
// backends' connections end with them, a null to their clients.
func (h *trackHub) reloaded(pools []*pool) {
	for _, pl := range pools {
		h.mu.Lock()
		t := h.pool[pl.cfg.Name]
		h.mu.Unlock()
		if t != nil {
			t.sync(pl)
		}
	}
}

// sync opens a connection to each of pl's servers that has none, while
// the tracker has clients; it makes pl the pool the tracker follows.
func (t *tracker) sync(pl *pool) {
	servers, refusal, ok := trackServers(pl)
	if !ok || refusal != nil {
		return
	}
	t.mu.Lock()
	t.pool = pl
	var opened []*invConn
	for _, b := range servers {
		if len(t.clients) > 0 && t.conns[b] == nil {
			opened = append(opened, t.open(b, true))
		}
	}
	t.mu.Unlock()
	t.start(opened)
}

// follow runs while the tracker has clients: every followEvery it syncs
// with its pool's servers, so that a Sentinel pool's new master (a
// backend table swapped without a reload) is tracked too.
func (t *tracker) follow(stop <-chan struct{}) {
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.mu.Lock()
			pl := t.pool
			t.mu.Unlock()
			if pl != nil {
				t.sync(pl)
			}
		}
	}
}

// followEvery is how often a tracker looks for servers it has no
// connection to.
const followEvery = time.Second

// setMax bounds the tracked keys at n (0: no limit), as CONFIG SET
// tracking-table-max-keys bounds a server's table; keys past it are
// evicted at once, their readers told.
func (t *tracker) setMax(n int64) {
	t.mu.Lock()
	t.max = int(min(n, maxTrackedKeys*1000))
	ds := t.evict(nil)
	t.mu.Unlock()
	deliverAll(ds)
}

// evict drops keys past the bound, adding their invalidations to ds.
// Under mu.
func (t *tracker) evict(ds []delivery) []delivery {
	for t.max > 0 && t.keys > t.max {
		ds = t.evictOne(ds)
	}
	return ds
}
