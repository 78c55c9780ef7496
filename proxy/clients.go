package proxy

import (
	"net"
	"sync/atomic"
	"time"

	"shardproxy/codec"
	"shardproxy/resp"
)

// What a session shows of itself to Redis's CLIENT LIST, CLIENT INFO and
// CLIENT KILL (codec.ClientsEnv), kept where any goroutine may read it:
// the parser's identity is the dialect's (resp's published identity).

// sessionView is the part of a session other sessions read.
type sessionView struct {
	born    time.Time                           // accepted (or adopted)
	lastAt  atomic.Int64                        // the last read's time, UnixNano
	lastCmd atomic.Int32                        // the last request read's codec.Request.Cmd
	parser  atomic.Pointer[codec.RequestParser] // the session's parser, set when it changes
	multi   atomic.Int32                        // 0: not inside MULTI; else 1 + the commands queued since (pin.go)
	inBuf   atomic.Int32                        // the bytes of the last read left unparsed: a request not whole yet
	subbed  atomic.Bool                         // holds subscriptions
	sub     atomic.Pointer[subState]            // its subscriptions, for other clients' invalidations (tracking.go)
	trk     atomic.Pointer[trackState]          // its tracking, while on (tracking.go)
	gone    atomic.Bool                         // the session ended
}

// localEnv is the Env a session passes with a command the proxy answers
// itself: its pool, and the session for codec.ClientsEnv.
type localEnv struct {
	*pool
	s *session
	p *pending // the asking request
}

var _ codec.ClientsEnv = (*localEnv)(nil)

// appendLocal answers p, a command the proxy answers itself, with pl's
// dialect: the session is its env (localEnv), which the reader alone uses.
func (s *session) appendLocal(p *pending, pl *pool) {
	if resp.IsTrackingCommand(p.Req.Name) {
		s.trackCommand(p, pl)
		return
	}
	markReply(p)
	s.env = localEnv{pool: pl, s: s, p: p}
	p.Answer(pl.dialect.AppendLocal(p.Out(), &p.Req, &s.env))
	s.env = localEnv{}
}

// setParser makes parser the session's, for its reader and for others'
// CLIENT LIST.
func (s *session) setParser(parser codec.RequestParser) {
	s.parser = parser
	s.parts, _ = parser.(codec.PartParser)
	s.view.parser.Store(&parser)
}

// Clients implements codec.ClientsEnv: the sessions whose listener serves
// the pool now. They are described after the server's lock is released:
// a description takes the sessions' own locks, and a session turning
// tracking on takes the server's under one of them (sessionOf).
func (e *localEnv) Clients() []codec.Client {
	srv := e.pool.srv
	now := time.Now()
	srv.mu.Lock()
	sessions := make([]*session, 0, len(srv.sessions))
	for sess := range srv.sessions {
		if cur := sess.l.pool.Load(); cur != nil && cur.stats == e.pool.stats {
			sessions = append(sessions, sess)
		}
	}
	srv.mu.Unlock()
	out := make([]codec.Client, 0, len(sessions))
	for _, sess := range sessions {
		c := sess.client(now)
		if sess == e.s {
			e.s.self(&c, e.p)
		}
		out = append(out, c)
	}
	return out
}

// client describes the session for CLIENT LIST.
func (s *session) client(now time.Time) codec.Client {
	v := &s.view
	c := codec.Client{
		FD:         fdOf(s.nc),
		Age:        now.Sub(v.born),
		Cmd:        int(v.lastCmd.Load()),
		Subscribed: v.subbed.Load(),
		InBuf:      int(v.inBuf.Load()),
		OutHeld:    s.held.Load(),
		Kill:       s.stop,
	}
	if q := v.multi.Load(); q > 0 {
		c.Multi, c.Queued = true, int(q-1)
	}
	if p := v.parser.Load(); p != nil {
		c.Parser = *p
	}
	if at := v.lastAt.Load(); at != 0 {
		c.Idle = now.Sub(time.Unix(0, at))
	} else {
		c.Idle = c.Age
	}
	c.Addr, c.LAddr = addrOf(s.nc.RemoteAddr()), addrOf(s.nc.LocalAddr())
	_, c.Unix = s.nc.LocalAddr().(*net.UnixAddr)
	if c.Addr == "" { // a unix socket's client: Redis names the socket
		c.Addr = c.LAddr
	}
	s.w.mu.Lock()
	c.OutWait = len(s.w.pending) > 0
	s.w.mu.Unlock()
	s.blocked.mu.Lock()
	c.Blocked = len(s.blocked.conns) > 0
	s.blocked.mu.Unlock()
	if sub := v.sub.Load(); sub != nil {
		sub.mu.Lock()
		c.Subs = [3]int{len(sub.channels), len(sub.patterns), len(sub.shards)}
		sub.mu.Unlock()
	}
	if ts := v.trk.Load(); ts != nil {
		ts.describe(&c)
	}
	return c
}

// self adds to c, the asking session's description, what its reader alone
// knows: the request being answered (p), and the read that brought it,
// which the reader holds whole until its requests are routed (as
// redis-server holds its query buffer until the commands in it ran).
func (s *session) self(c *codec.Client, p *pending) {
	c.Self, c.Idle, c.Cmd = true, 0, p.Req.Cmd
	c.InBuf, c.InFree = s.inLen, s.inFree
}

// addrOf is a as CLIENT LIST writes it: host:port, or a unix socket's
// path and ":0".
func addrOf(a net.Addr) string {
	switch a := a.(type) {
	case nil:
		return ""
	case *net.UnixAddr:
		if a.Name == "" || a.Name == "@" {
			return ""
		}
		return a.Name + ":0"
	}
	return a.String()
}

// fdOf returns the descriptor of nc's socket, or -1.
func fdOf(nc net.Conn) int {
	fd := -1
	if rc := socketOf(nc); rc != nil {
		rc.Control(func(f uintptr) { fd = int(f) })
	}
	return fd
}

// viewRead notes a read for CLIENT LIST: its time (readAt), the bytes it
// left unparsed, and the command of the last request it held (*cmd; -1:
// none whole).
func (s *session) viewRead(cmd *int, unparsed int) {
	s.view.lastAt.Store(s.readAt.UnixNano())
	if int(s.view.inBuf.Load()) != unparsed { // a load, not a store, for the usual 0
		s.view.inBuf.Store(int32(unparsed))
	}
	if *cmd >= 0 {
		s.view.lastCmd.Store(int32(*cmd))
	}
}

// describe adds the client's tracking to c: on, BCAST, the client its
// invalidations go to, and whether that one has gone. Any goroutine.
func (ts *trackState) describe(c *codec.Client) {
	c.Tracking = true
	ts.mu.Lock()
	c.Redirect, c.TrackBroken = ts.redirect, ts.broken
	ts.mu.Unlock()
	ts.t.mu.Lock()
	c.TrackBcast = ts.bcast
	ts.t.mu.Unlock()
}
