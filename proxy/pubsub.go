package proxy

import (
	"maps"
	"slices"
	"sync"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/kind"
	"shardproxy/resp"
)

// This file serves Redis pub/sub (codec.RouteSubscribe) on the session's
// reader goroutine; subconn.go handles what the servers send back.
//
// A client's subscriptions live on server connections of its own (a
// kind.DedicatedPool's push-mode connections, one per server it subscribed
// on, counted against blocking_connections). A channel (SUBSCRIBE) and a
// shard channel (SSUBSCRIBE) go to the server the pool places a key of
// that name on, which is where PUBLISH and SPUBLISH, routed as key
// commands, send its messages. A pattern (PSUBSCRIBE) goes to every
// server of a sharded pool, and to one node of a cluster, whose nodes
// all see every PUBLISH (kind.Dedicator.PatternServers).
//
// The proxy keeps the client's view: which channels, patterns and shard
// channels it holds and on which connection, and it makes every
// confirmation itself, with the client's own counts, as one Redis server
// would. The confirmations of a command are answered once every server
// it was sent to has confirmed its part: messages on a new subscription
// never reach the client before the confirmation. A message is passed on
// only while the client holds its channel (pattern, shard channel), so
// none arrives after the client was told it unsubscribed. Messages are
// queued behind the client's earlier replies, each whole, in the order
// its server sent them.
//
// A RESP2 client is in subscribed mode while it holds anything: then,
// as redis-server 7.0 does, only the (un)subscribe commands, PING
// (answered ["pong", arg]), QUIT and RESET are served, the others
// refused with redis-server's error, and a refused command (HELLO, AUTH)
// changes nothing (codec.StateUndoer). A RESP3 client has no such mode:
// its confirmations and messages are push frames, and its other
// commands are routed as ever, their replies in order with the pushes
// between them. What the client sees is in the protocol it speaks when
// it is queued: a HELLO 2 of a RESP3 subscriber puts it in subscribed
// mode, and the messages behind the HELLO's reply are RESP2's
// (subState.proto). The server connections speak RESP2 whatever the
// client's protocol (see backend.DedicatePush); resp/pubsub.go makes a
// RESP3 client's push frames from their frames.
//
// A connection whose last subscription ended is closed: it carries no
// state worth keeping. A server may end a subscription by itself: a
// cluster node that loses a shard channel's slot sends a sunsubscribe
// for it; the proxy drops the channel and passes the sunsubscribe on,
// with the client's count. A server that refuses a subscribe command
// (an error reply, such as -NOPERM for a channel the ACL user may not
// use, or -MOVED) refuses all of it: the client gets the error and holds
// none of the command's new channels, as redis-server refuses a whole
// command; the parts other servers accepted are unsubscribed again.

// subState is a session's subscriptions: which channels, patterns and
// shard channels the client holds, on which of its connections. The
// reader changes them; the connections' readers (subconn.go) read them,
// under mu.
type subState struct {
	s    *session
	pool *pool // the pool the client subscribed through: its dialect words the replies
	dd   kind.Dedicator
	dp   *kind.DedicatedPool

	mu       sync.Mutex
	conns    map[*backend.Backend]*subConn
	channels map[string]*subConn   // SUBSCRIBE
	patterns map[string][]*subConn // PSUBSCRIBE
	shards   map[string]*subConn   // SSUBSCRIBE
	closing  bool                  // the proxy closes the connections (the client left, RESET)
	lost     bool                  // a connection failed: the client is being disconnected
	// proto is the protocol of what the client sees next from the
	// connections' readers: that of its latest request handed to the
	// writer (handOver), so that a message queued behind a HELLO's reply
	// is in the protocol the HELLO chose.
	proto uint8
	// spoke is the protocol of the client's latest request routed
	// (reader only), which decides whether the next is in subscribed
	// mode.
	spoke uint8
}

// count is what a confirmation of kind reports (as redis-server 7.0):
// channels and patterns for the (P)SUBSCRIBE family, shard channels for
// the S ones. Under mu.
func (sub *subState) count(kind string) int {
	if kind == resp.PushSsubscribe || kind == resp.PushSunsubscribe {
		return len(sub.shards)
	}
	return len(sub.channels) + len(sub.patterns)
}

// total is every subscription of the client; subscribed mode while it is
// not 0. Under mu.
func (sub *subState) total() int { return len(sub.channels) + len(sub.patterns) + len(sub.shards) }

// subscribed reports whether the session is in subscribed mode (reader
// only).
func (s *session) subscribed() bool {
	if s.sub == nil {
		return false
	}
	s.sub.mu.Lock()
	defer s.sub.mu.Unlock()
	return s.sub.total() > 0
}

// routeSubscribed serves p for a client that holds subscriptions and
// reports whether it did. RESP3: RESET is served, the rest routed as
// ever (false). RESP2 (subscribed mode): PING, QUIT and RESET are
// answered, (un)subscribe commands passed on (false), the rest refused.
func (s *session) routeSubscribed(p *pending) bool {
	// The mode is the protocol's before p: a HELLO 3 is parsed (and
	// switches the parser) before it is refused here.
	was := s.sub.spoke
	s.sub.spoke = p.Req.Proto
	if !s.subscribed() {
		if s.sub.idle() {
			s.sub = nil // nothing held, nothing under way: the pool may change again
			s.view.subbed.Store(false)
			s.view.sub.Store(nil)
		}
		return false
	}
	if p.Req.Name == "reset" { // in either protocol
		s.endSub()
		s.answerLocal(p)
		return true
	}
	if !resp.HasSubscribedMode(was) {
		return false
	}
	switch {
	case p.Req.Route == codec.RouteSubscribe:
		return false
	case p.Req.Name == "ping":
		s.answerRaw(p, string(resp.AppendPong(nil, &p.Req)))
	case p.Req.Close: // QUIT
		s.answerLocal(p)
	default:
		if u, ok := s.parser.(codec.StateUndoer); ok {
			u.UndoState() // a refused HELLO 3 leaves the client in RESP2
			s.sub.spoke = was
		}
		s.answerRaw(p, string(resp.AppendSubscribedOnly(nil, p.Req.Name)))
	}
	return true
}

// handOver hands the staged requests ps to the writer, as push does,
// and takes the protocol of the latest of them as the one the client
// sees messages in: both under mu, so that a message queued by a
// connection's reader (queueMessage) finds its place and its protocol
// agree. Reader only.
func (sub *subState) handOver(ps []*pending) {
	sub.mu.Lock()
	for _, p := range ps {
		if p.Req.Name != "" { // a request the parser read (a refused frame has none)
			sub.proto = p.Req.Proto
		}
	}
	ready := sub.s.queue(ps)
	sub.mu.Unlock()
	if ready {
		sub.s.flush()
	}
}

// idle reports whether the client holds nothing and no connection is
// left (reader only).
func (sub *subState) idle() bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.total() == 0 && len(sub.conns) == 0
}

// routeSub serves a (un)subscribe command.
func (s *session) routeSub(p *pending) {
	dd, ok := s.p.router.(kind.Dedicator)
	if !ok || dd.Dedicated() == nil {
		s.answerRaw(p, string(s.p.dialect.AppendError(nil, codec.ErrServer,
			commandName(p)+" is not supported by this pool")))
		return
	}
	if s.pin != nil {
		s.refuseInPin(p, commandName(p)+" inside a transaction is not supported by shardproxy")
		return
	}
	if s.sub == nil {
		s.sub = &subState{s: s, pool: s.p, dd: dd, dp: dd.Dedicated(), proto: p.Req.Proto, spoke: p.Req.Proto,
			conns: map[*backend.Backend]*subConn{}, channels: map[string]*subConn{},
			patterns: map[string][]*subConn{}, shards: map[string]*subConn{}}
		s.view.subbed.Store(true)
		s.view.sub.Store(s.sub)
	}
	sub := s.sub
	sub.mu.Lock()
	w, sends, refusal := sub.route(p)
	answer := refusal == nil && w.left == 0
	sub.mu.Unlock()
	switch {
	case refusal != nil:
		s.answerRaw(p, string(refusal))
	case answer:
		p.Answer(append(p.Out(), w.out...))
	}
	// Staged outside mu: a call to a server marked bad fails at once,
	// here, and its Done (lose) takes mu.
	for _, sd := range sends {
		sd.c.stage(p.Req.Name, sd.args, &s.batch)
	}
}

// subWait is one (un)subscribe command of the client: its confirmations,
// answered once every server it was sent to has confirmed its part.
type subWait struct {
	p     *pending
	kind  string // the command: PushSubscribe ... (as its confirmations name it)
	proto uint8  // the client's protocol, of out
	sends []subSend
	out   []byte // the confirmations, with the client's counts
	left  int    // server confirmations still to come
	err   []byte // an error reply in place of out (a server refused, or was lost)
}

// subSend is what one command sends on one connection.
type subSend struct {
	c    *subConn
	cmd  string // the proxy's own command (undo's); "" for the client's
	args [][]byte
}

// route changes the client's subscriptions as p says and returns the
// commands the servers need, for the caller to stage; w.left counts
// their confirmations. A refusal (a channel that cannot be placed, no
// connection free) changes nothing. Under mu.
func (sub *subState) route(p *pending) (*subWait, []subSend, []byte) {
	if sub.lost {
		return nil, nil, sub.pool.dialect.AppendError(nil, codec.ErrServer, "pub/sub connection lost")
	}
	before := sub.total()
	w := &subWait{p: p, kind: p.Req.Name, proto: p.Req.Proto}
	var sends []subSend
	var refusal []byte
	switch p.Req.Sub {
	case codec.SubSubscribe:
		sends, refusal = sub.subscribe(w, p.Req.Keys)
	case codec.SubSsubscribe:
		sends, refusal = sub.ssubscribe(w, &p.Req)
	case codec.SubPsubscribe:
		sends, refusal = sub.psubscribe(w, p.Req.Keys)
	case codec.SubUnsubscribe:
		sends = sub.unsubscribe(w, p.Req.Keys, sub.channels)
	case codec.SubSunsubscribe:
		sends = sub.unsubscribe(w, p.Req.Keys, sub.shards)
	case codec.SubPunsubscribe:
		sends = sub.punsubscribe(w, p.Req.Keys)
	}
	if refusal != nil {
		sub.dropUnused()
		return nil, nil, refusal
	}
	w.sends = sends
	for _, sd := range sends {
		sd.c.expect(w, sd.args)
	}
	sub.counted(before)
	return w, sends, nil
}

// counted brings the gauges to the client's subscriptions, which were
// before before a change. Under mu.
func (sub *subState) counted(before int) {
	after := sub.total()
	sub.dp.Subscriptions.Add(int64(after - before))
	switch {
	case before == 0 && after > 0:
		sub.dp.Subscribed.Add(1)
	case before > 0 && after == 0:
		sub.dp.Subscribed.Add(-1)
	}
}

// conn returns the client's connection to b, taking one when it has none.
func (sub *subState) conn(b *backend.Backend) (*subConn, []byte) {
	if c := sub.conns[b]; c != nil {
		return c, nil
	}
	c := &subConn{sub: sub, b: b}
	d, refusal := sub.dp.TakePush(b, sub.pool.dialect, c.push)
	if refusal != nil {
		return nil, refusal
	}
	c.d = d
	sub.conns[b] = c
	return c, nil
}

// dropUnused gives back the connections a refused command took and left
// without a subscription. Under mu.
func (sub *subState) dropUnused() {
	for _, c := range sub.conns {
		if c.unused() {
			c.release()
		}
	}
}

// place returns the connection to the server of keys, all on one.
func (sub *subState) place(keys ...[]byte) (*subConn, []byte) {
	b, _, refusal := sub.dd.Place(&codec.Request{Keys: keys}, sub.s.id)
	if refusal != nil {
		return nil, refusal
	}
	return sub.conn(b)
}

// confirm appends to w's confirmations the one for name (nil: there was
// none to unsubscribe), with the client's count after it. Under mu.
func (sub *subState) confirm(w *subWait, name []byte) {
	w.out = resp.AppendSubscription(w.out, w.kind, name, sub.count(w.kind), w.proto)
}

// addSend adds arg to what goes on c.
func addSend(sends []subSend, c *subConn, arg []byte) []subSend {
	for i := range sends {
		if sends[i].c == c {
			sends[i].args = append(sends[i].args, arg)
			return sends
		}
	}
	return append(sends, subSend{c: c, args: [][]byte{arg}})
}

// subscribe subscribes channels, each on its own server.
func (sub *subState) subscribe(w *subWait, channels [][]byte) ([]subSend, []byte) {
	// Every connection first, so that a refusal changes nothing.
	conns := make([]*subConn, len(channels))
	for i, ch := range channels {
		if sub.channels[string(ch)] != nil {
			continue
		}
		c, refusal := sub.place(ch)
		if refusal != nil {
			return nil, refusal
		}
		conns[i] = c
	}
	var sends []subSend
	for i, ch := range channels {
		if c := conns[i]; c != nil && sub.channels[string(ch)] == nil {
			sub.channels[string(ch)] = c
			c.subs++
			sends = addSend(sends, c, ch)
		}
		sub.confirm(w, ch)
	}
	return sends, nil
}

// ssubscribe subscribes shard channels, all on one server (in a cluster,
// of one slot) as Redis Cluster requires.
func (sub *subState) ssubscribe(w *subWait, req *codec.Request) ([]subSend, []byte) {
	c, refusal := sub.place(req.Keys...)
	if refusal != nil {
		return nil, refusal
	}
	var sends []subSend
	for _, ch := range req.Keys {
		if sub.shards[string(ch)] == nil {
			sub.shards[string(ch)] = c
			c.subs++
			sends = addSend(sends, c, ch)
		}
		sub.confirm(w, ch)
	}
	return sends, nil
}

// psubscribe subscribes patterns on the pool's pattern servers.
func (sub *subState) psubscribe(w *subWait, patterns [][]byte) ([]subSend, []byte) {
	// The servers' connections once, and only for a pattern not yet held.
	var conns []*subConn
	if slices.ContainsFunc(patterns, func(pat []byte) bool { return sub.patterns[string(pat)] == nil }) {
		bs, refusal := sub.dd.PatternServers()
		if refusal != nil {
			return nil, refusal
		}
		for _, b := range bs {
			c, refusal := sub.conn(b)
			if refusal != nil {
				return nil, refusal
			}
			conns = append(conns, c)
		}
	}
	var sends []subSend
	for _, pat := range patterns {
		if sub.patterns[string(pat)] == nil {
			sub.patterns[string(pat)] = conns
			for _, c := range conns {
				c.subs++
				sends = addSend(sends, c, pat)
			}
		}
		sub.confirm(w, pat)
	}
	return sends, nil
}

// unsubscribe unsubscribes channels (shard channels) of held, every one
// when names is empty. A name the client does not hold is confirmed by
// the proxy alone, as a server confirms it.
func (sub *subState) unsubscribe(w *subWait, names [][]byte, held map[string]*subConn) []subSend {
	if len(names) == 0 {
		names = sortedNames(held)
		if len(names) == 0 {
			sub.confirm(w, nil)
			return nil
		}
	}
	var sends []subSend
	for _, ch := range names {
		if c := held[string(ch)]; c != nil {
			delete(held, string(ch))
			c.subs--
			sends = addSend(sends, c, ch)
		}
		sub.confirm(w, ch)
	}
	return sends
}

// punsubscribe unsubscribes patterns, every one when names is empty.
func (sub *subState) punsubscribe(w *subWait, names [][]byte) []subSend {
	if len(names) == 0 {
		names = sortedNames(sub.patterns)
		if len(names) == 0 {
			sub.confirm(w, nil)
			return nil
		}
	}
	var sends []subSend
	for _, pat := range names {
		for _, c := range sub.patterns[string(pat)] {
			c.subs--
			sends = addSend(sends, c, pat)
		}
		delete(sub.patterns, string(pat))
		sub.confirm(w, pat)
	}
	return sends
}

// sortedNames returns m's keys in order, as arguments.
func sortedNames[V any](m map[string]V) [][]byte {
	keys := slices.Sorted(maps.Keys(m))
	names := make([][]byte, len(keys))
	for i, k := range keys {
		names[i] = []byte(k)
	}
	return names
}

// endSub ends the client's subscriptions (it left, or sent RESET): every
// connection is closed, and the commands still waiting for servers are
// answered with their confirmations (reader only).
func (s *session) endSub() {
	sub := s.sub
	if sub == nil {
		return
	}
	s.sub = nil
	s.view.subbed.Store(false)
	s.view.sub.Store(nil)
	sub.mu.Lock()
	sub.closing = true
	before := sub.total()
	clear(sub.channels)
	clear(sub.patterns)
	clear(sub.shards)
	sub.counted(before)
	var ready []*subWait
	for _, c := range sub.conns {
		ready = c.drop(ready, nil)
		c.release()
	}
	sub.mu.Unlock()
	answerWaits(ready)
}
