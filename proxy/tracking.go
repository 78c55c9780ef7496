package proxy

import (
	"slices"
	"strings"
	"sync"

	"shardproxy/backend"
	"shardproxy/cluster"
	"shardproxy/codec"
	"shardproxy/kind"
	"shardproxy/resp"
	"shardproxy/route"
)

// This file is the client's half of client-side caching: CLIENT
// TRACKING, CACHING, TRACKINGINFO and GETREDIR answered from the
// session's resp.Tracking, the keys its reads name handed to the pool's
// tracker (tracker.go), and the invalidations delivered to it or to the
// client it redirects them to.
//
// A client's reads are noted as they are routed (note) and handed to the
// tracker only after the requests are with the writer and before their
// calls go out (pushStaged): an invalidation the tracker delivers for
// such a key is queued behind the read's reply, so a client never sees
// an invalidation before the value it invalidates; and one for a write
// the server ran before the read never finds the key, since the read
// was not sent yet.

// trackState is a session's tracking while it is on.
type trackState struct {
	s    *session
	t    *tracker
	pool *pool         // the pool the client turned tracking on with: its pendings count there
	st   resp.Tracking // reader only
	ops  []trackOp     // reads and NOLOOP writes since the last handOver (reader only)

	// Under t.mu: the keys read, per server; BCAST's prefixes; and with
	// BCAST and NOLOOP, the client's own writes whose invalidations are
	// still to come (ownWrite), per server.
	keys     map[*invConn]map[string]struct{}
	nulled   bool // told a server's null, and no key added since (flushServer)
	bcast    bool
	prefixes []string
	own      map[*invConn][]ownWrite
	ownSeq   uint64

	// Under mu: where deliveries go, and whether they may.
	mu       sync.Mutex
	redirect int64
	target   *session // the session redirect names, found when tracking was turned on
	closed   bool
	broken   bool // the client redirected to is gone
}

// trackOp is a key a request read (tracked) or wrote (NOLOOP: forgotten).
type trackOp struct {
	key   string
	write bool
}

// maxOwnWrites bounds a client's own writes waiting for their barrier,
// per server; past it, its own writes' invalidations reach it (more than
// NOLOOP asks, never less).
const maxOwnWrites = 1024

// ownWrite is a BCAST NOLOOP client's write of key, numbered: its
// invalidation, when the server sends one, is skipped. Once the write's
// reply has arrived, the proxy sends a PING on the server's tracking
// connection (barrier); the server queued the write's invalidation on
// that connection before it read the PING, so when the PONG arrives every
// own write numbered up to then has had its invalidation or has none,
// and is retired: no entry is left to swallow another client's write.
type ownWrite struct {
	key string
	seq uint64
}

// add records that ts read key on c's server; false when it had. Under
// t.mu.
func (ts *trackState) add(c *invConn, key string) bool {
	keys := ts.keys[c]
	if keys == nil {
		keys = map[string]struct{}{}
		ts.keys[c] = keys
	}
	if _, ok := keys[key]; ok {
		return false
	}
	keys[key] = struct{}{}
	ts.nulled = false
	return true
}

// remove forgets that ts read key on c's server; false when it had not.
// Under t.mu.
func (ts *trackState) remove(c *invConn, key string) bool {
	keys := ts.keys[c]
	if _, ok := keys[key]; !ok {
		return false
	}
	delete(keys, key)
	if len(keys) == 0 {
		delete(ts.keys, c)
	}
	return true
}

// matchPrefixes adds to ds, for a BCAST client (one of t.bcast), one
// invalidation per prefix of keys that match it. Under t.mu.
func (ts *trackState) matchPrefixes(ds []delivery, c *invConn, keys [][]byte) []delivery {
	for _, pre := range ts.prefixes {
		var hit []string
		for _, k := range keys {
			if strings.HasPrefix(string(k), pre) {
				hit = append(hit, string(k))
			}
		}
		if hit = ts.skipOwn(c, hit); hit != nil {
			ds = append(ds, delivery{ts: ts, keys: hit})
		}
	}
	return ds
}

// skipOwn drops from keys, invalidated on c's server, those the client
// wrote itself (NOLOOP), each once. Under t.mu.
func (ts *trackState) skipOwn(c *invConn, keys []string) []string {
	own := ts.own[c]
	if len(own) == 0 {
		return keys
	}
	kept := keys[:0]
	for _, k := range keys {
		i := slices.IndexFunc(own, func(w ownWrite) bool { return w.key == k })
		if i < 0 {
			kept = append(kept, k)
			continue
		}
		own = slices.Delete(own, i, i+1)
	}
	ts.own[c] = own
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// note notes what p, about to be routed, reads or writes for the
// client's tracking (reader only). Any command but CLIENT's ends a
// CLIENT CACHING, as in Redis (outside a transaction).
func (ts *trackState) note(p *pending) {
	req := &p.Req
	switch {
	case req.Name == "reset": // RESET turns tracking off, as in Redis
		ts.s.endTrack()
		return
	case strings.HasPrefix(req.Name, "client|"):
		return
	}
	if len(req.Keys) > 0 && req.Route != codec.RouteSubscribe && req.Route != codec.RouteLocal {
		readOnly := ts.reads(req)
		switch {
		case ts.st.Tracks(readOnly):
			for _, k := range req.Keys {
				ts.ops = append(ts.ops, trackOp{key: string(k)})
			}
		case !readOnly && ts.st.NoLoop:
			for _, k := range req.Keys {
				ts.ops = append(ts.ops, trackOp{key: string(k), write: true})
			}
			if ts.st.BCAST {
				p.Tap = ts.written // a Redis pool's router sets no Tap of its own
			}
		}
	}
	if ts.s.pin == nil || !ts.s.pin.multi {
		ts.st.Caching = false
	}
}

// reads reports whether req reads its keys, for tracking: a read-only
// command, or a script that may call one, unless NOLOOP takes the script
// for a write of the client's own. A script's text is scanned only when
// a read would be tracked (not in BCAST mode, nor OPTIN without CACHING).
func (ts *trackState) reads(req *codec.Request) bool {
	if isScript(req.Name) {
		return !ts.st.NoLoop && ts.st.Tracks(true) && scriptMayRead(req)
	}
	return cluster.ReadOnly(req.Name)
}

// isScript reports whether name runs a script or function: its declared
// keys are taken as read when it may call a read-only command
// (scriptMayRead: Redis tracks them then; where the proxy cannot tell,
// it tracks more, never less), and under NOLOOP as written (the
// client's own).
func isScript(name string) bool {
	return strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall")
}

// scriptMayRead reports whether the script req runs may call a
// read-only command, which makes Redis track its declared keys: true
// unless it is an EVAL whose text shows every command it calls
// (resp.ScriptCalls) and none of them reads.
func scriptMayRead(req *codec.Request) bool {
	script := resp.EvalScript(req)
	if script == nil {
		return true
	}
	names, ok := resp.ScriptCalls(script)
	if !ok {
		return true
	}
	for _, name := range names {
		if cluster.ReadOnly(name) || scriptReads[name] {
			return true
		}
	}
	return false
}

// scriptReads are the read-only commands (redis-server 7.0.15's flag)
// that cluster.ReadOnly, which lists those with keys, leaves out, and the
// containers of read-only subcommands: a script names a container and
// passes the subcommand as an argument.
var scriptReads = map[string]bool{
	"dbsize": true, "keys": true, "lolwut": true, "randomkey": true, "scan": true,
	"memory": true, "object": true, "xinfo": true,
}

// written is the Tap of a BCAST NOLOOP client's write: its reply has
// arrived, and every own write noted so far may retire once a PING on
// each server's tracking connection is answered. On the backend's reader.
func (ts *trackState) written(*route.Exchange, *backend.Call) {
	ts.t.barrier(ts)
}

// handOver gives the tracker the keys noted since the last call (reader
// only, from pushStaged: after the requests are with the writer, before
// their calls go out).
func (ts *trackState) handOver() {
	if len(ts.ops) == 0 {
		return
	}
	dd, ok := ts.s.p.router.(kind.Dedicator)
	if ok {
		hint := ts.s.id
		ts.t.apply(ts, ts.ops, func(key string) *backend.Backend {
			b, _, refusal := dd.Place(&codec.Request{Keys: [][]byte{[]byte(key)}}, hint)
			if refusal != nil {
				return nil
			}
			return b
		})
	}
	clear(ts.ops)
	ts.ops = ts.ops[:0]
}

// trackCommand answers a CLIENT TRACKING, CACHING, TRACKINGINFO or
// GETREDIR (reader only).
func (s *session) trackCommand(p *pending, pl *pool) {
	var st resp.Tracking
	if s.trk != nil {
		st = s.trk.st
		s.trk.mu.Lock()
		st.BrokenRedirect = s.trk.broken
		s.trk.mu.Unlock()
	}
	was := st
	out, changed := st.Do(p.Out(), &p.Req, pl.srv.clientExists)
	switch {
	case !changed:
		if s.trk != nil {
			s.trk.st = st
		}
		p.Answer(out)
	case !st.On:
		s.endTrack()
		p.Answer(out)
	default:
		s.trackOn(p, pl, st, was, out)
	}
}

// trackOn turns the client's tracking on (or changes its options) with
// st, and answers p with out once every server's tracking connection is
// confirmed.
func (s *session) trackOn(p *pending, pl *pool, st, was resp.Tracking, out []byte) {
	servers, refusal, ok := trackServers(pl)
	switch {
	case !ok:
		p.Answer(pl.dialect.AppendError(p.Out(), codec.ErrServer,
			"CLIENT TRACKING is not supported by this pool: it needs a sharded Redis pool"))
		return
	case refusal != nil:
		p.Answer(append(p.Out(), refusal...))
		return
	}
	ts := s.trk
	if ts == nil {
		ts = &trackState{s: s, t: pl.srv.tracking.of(pl), pool: pl, keys: map[*invConn]map[string]struct{}{},
			own: map[*invConn][]ownWrite{}}
		s.trk = ts
		s.view.trk.Store(ts)
	}
	ts.st = st
	ts.t.set(ts, st)
	ts.mu.Lock()
	ts.redirect, ts.broken, ts.target = st.Redirect, false, nil
	if st.Redirect != 0 {
		ts.target = pl.srv.sessionOf(st.Redirect)
	}
	ts.mu.Unlock()
	if was.On {
		p.Answer(out)
		return
	}
	ts.t.join(ts, pl, servers, func() { p.Answer(out) })
}

// trackServers returns the servers a tracker of pl holds a connection
// to (kind.Dedicator.PatternServers: a sharded pool's every server), or
// the router's refusal; ok is false for a pool that cannot track.
func trackServers(pl *pool) (servers []*backend.Backend, refusal []byte, ok bool) {
	dd, ok := pl.router.(kind.Dedicator)
	if !ok || pl.cfg.RedisCluster {
		return nil, nil, false
	}
	servers, refusal = dd.PatternServers()
	return servers, refusal, true
}

// endTrack turns the client's tracking off (CLIENT TRACKING OFF, RESET,
// or the client left): nothing more is delivered to it.
func (s *session) endTrack() {
	ts := s.trk
	if ts == nil {
		return
	}
	s.trk = nil
	s.view.trk.Store(nil)
	ts.mu.Lock()
	ts.closed = true
	ts.mu.Unlock()
	ts.t.leave(ts)
}

// deliver sends ts's client an invalidation of keys (all: every key),
// on its own connection or the one it redirects to. Not under t.mu.
func (ts *trackState) deliver(keys []string, all bool) {
	ts.mu.Lock()
	redirect, target, closed := ts.redirect, ts.target, ts.closed
	ts.mu.Unlock()
	if closed {
		return
	}
	if all {
		keys = nil
	}
	if redirect == 0 {
		ts.s.invalidated(keys)
		return
	}
	if target == nil || target.view.gone.Load() {
		ts.mu.Lock()
		first := !ts.broken
		ts.broken = true
		ts.mu.Unlock()
		if first {
			ts.s.pushRaw(resp.AppendRedirectBroken(nil, redirect))
		}
		return
	}
	target.invalidated(keys)
}

// invalidated queues an invalidation of keys (nil: every key) for the
// client, behind its replies so far, as Redis sends it: a push frame to
// a RESP3 client, a message on __redis__:invalidate to a RESP2 client
// in subscribed mode, nothing to a RESP2 client that is not. Any
// goroutine.
func (s *session) invalidated(keys []string) {
	if sub := s.view.sub.Load(); sub != nil {
		sub.mu.Lock()
		if sub.closing || sub.lost || (!resp.IsRESP3(sub.proto) && sub.total() == 0) {
			sub.mu.Unlock()
			return
		}
		proto := sub.proto
		msg := s.queueMessage(sub)
		sub.mu.Unlock()
		if msg != nil {
			msg.Complete(resp.AppendInvalidate(nil, keys, proto))
		}
		return
	}
	s.pushRaw(resp.AppendInvalidate(nil, keys, resp.Proto3))
}

// pushRaw queues out, a push frame, for a RESP3 client (dropped for any
// other): one with tracking on, until it turns it off, or one another
// client's invalidations are redirected to, tracking or not, until it
// leaves. Any goroutine.
func (s *session) pushRaw(out []byte) {
	if rp := s.view.parser.Load(); rp == nil {
		return
	} else if _, proto, _ := resp.ClientOf(*rp); !resp.IsRESP3(proto) {
		return
	}
	var p *pending
	if ts := s.view.trk.Load(); ts != nil {
		ts.mu.Lock()
		p = s.queueRaw(ts.pool, ts.closed)
		ts.mu.Unlock()
	} else {
		s.pushGate.Lock()
		p = s.queueRaw(s.l.pool.Load(), s.pushEnded)
		s.pushGate.Unlock()
	}
	if p != nil {
		p.Complete(out)
	}
}

// queueRaw queues a push of pool pl's for the client and returns its
// pending, unless closed, or the client does not read (then it is
// disconnected, as a slow subscriber is). Under the lock that guards
// closed.
func (s *session) queueRaw(pl *pool, closed bool) *pending {
	switch {
	case closed || pl == nil:
		return nil
	case s.held.Load() > maxHeld:
		s.dropSlow()
		return nil
	}
	return s.queuePush(pl)
}

// endPushes ends what pushRaw queues for a client without tracking: the
// client left. Before serve's quiesce, which then waits for any queued.
func (s *session) endPushes() {
	s.pushGate.Lock()
	s.pushEnded = true
	s.pushGate.Unlock()
}

// clientExists reports whether a client of the server has id (CLIENT
// TRACKING's REDIRECT).
func (srv *Server) clientExists(id int64) bool { return srv.sessionOf(id) != nil }

// sessionOf returns the session whose CLIENT ID is id, or nil.
func (srv *Server) sessionOf(id int64) *session {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for sess := range srv.sessions {
		if rp := sess.view.parser.Load(); rp != nil {
			if cid, _, ok := resp.ClientOf(*rp); ok && cid == id {
				return sess
			}
		}
	}
	return nil
}

// apply hands the tracker ts's reads (tracked) and NOLOOP writes
// (forgotten), in order, each key on the server place names.
func (t *tracker) apply(ts *trackState, ops []trackOp, place func(string) *backend.Backend) {
	var opened []*invConn
	var evicted []delivery
	t.mu.Lock()
	if _, on := t.clients[ts]; !on {
		t.mu.Unlock()
		return
	}
	for _, op := range ops {
		b := place(op.key)
		if b == nil {
			continue
		}
		c := t.conns[b]
		switch {
		case op.write && ts.bcast:
			if c != nil && len(ts.own[c]) < maxOwnWrites {
				ts.ownSeq++
				ts.own[c] = append(ts.own[c], ownWrite{key: op.key, seq: ts.ownSeq})
			}
			continue
		case op.write:
			if c != nil && ts.remove(c, op.key) {
				c.unlink(op.key, ts)
				t.keys--
			}
			continue
		case c == nil:
			c = t.open(b, true)
			opened = append(opened, c)
		}
		if ts.add(c, op.key) {
			c.table[op.key] = append(c.table[op.key], ts)
			t.keys++
		}
	}
	evicted = t.evict(evicted)
	t.mu.Unlock()
	t.start(opened)
	deliverAll(evicted)
}

// set makes ts's BCAST and prefixes st's.
func (t *tracker) set(ts *trackState, st resp.Tracking) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts.bcast = st.BCAST
	ts.prefixes = st.Prefixes
	if st.BCAST {
		t.bcast[ts] = struct{}{}
		t.dropKeys(ts)
	} else {
		delete(t.bcast, ts)
	}
}
