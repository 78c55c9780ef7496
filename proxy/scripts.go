package proxy

import (
	"sync"

	"shardproxy/backend"
	"shardproxy/kind"
)

// scriptConns are a client's connections running its scripts under
// redis_scripts: dedicated, one per server while it has scripts in
// flight there: a client that pipelines scripts has them run one after
// the other on one connection, in its order, as Redis runs them, and
// takes one of blocking_connections, not one per script.
type scriptConns struct {
	mu    sync.Mutex
	conns map[*backend.Backend]*scriptConn
}

// scriptConn is one server's: its connection and the scripts in flight.
type scriptConn struct {
	d        *backend.Dedicated
	inFlight int
}

// routeScript sends a script (codec.ScriptRun) on the client's script
// connection to the server of its keys, taken from the pool's dedicated
// connections if it has none there, and given back with the reply of its
// last script in flight. While it runs, PING goes to its server
// (kind.DedicatedPool.RunScript).
func (s *session) routeScript(p *pending, dd kind.Dedicator) {
	b, _, refusal := dd.Place(&p.Req, s.id)
	if refusal != nil {
		s.answerRaw(p, string(refusal))
		return
	}
	if !s.admit(p, len(p.Req.Keys)) {
		return
	}
	dp := dd.Dedicated()
	sc := s.scripts.take(b)
	if sc == nil {
		d, refusal := dp.Take(b, p.Req.Proto, s.p.dialect)
		if refusal != nil {
			s.answerRaw(p, string(refusal))
			return
		}
		sc = s.scripts.put(b, d)
	}
	d := sc.d
	s.blocked.add(d)
	dp.Blocked.Add(1)
	ended := dp.RunScript(b)
	p.SendOn(d, s.blockTimeout(p.Req.Block), func(c *backend.Call) {
		ended()
		dp.Blocked.Add(-1)
		s.blocked.remove(d)
		if s.scripts.done(b, sc) {
			dp.Give(d, c.Reply.Err == nil)
		}
	})
}

// take returns the client's connection to b with scripts in flight,
// counting one more; nil when it has none.
func (sc *scriptConns) take(b *backend.Backend) *scriptConn {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	c := sc.conns[b]
	if c != nil {
		c.inFlight++
	}
	return c
}

// put makes d the client's connection to b, with one script in flight.
func (sc *scriptConns) put(b *backend.Backend, d *backend.Dedicated) *scriptConn {
	c := &scriptConn{d: d, inFlight: 1}
	sc.mu.Lock()
	if sc.conns == nil {
		sc.conns = map[*backend.Backend]*scriptConn{}
	}
	sc.conns[b] = c
	sc.mu.Unlock()
	return c
}

// done counts a script of c answered and reports whether it was the last
// in flight: c is then no longer the client's, to be given back.
func (sc *scriptConns) done(b *backend.Backend, c *scriptConn) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if c.inFlight--; c.inFlight > 0 {
		return false
	}
	if sc.conns[b] == c {
		delete(sc.conns, b)
	}
	return true
}
