package proxy

import (
	"errors"
	"fmt"
	"net"

	"shardproxy/codec"
)

// HandedConn is a client connection a drain passes to another process
// instead of closing it (SetHandOff): every request the proxy read from it
// has been answered, and what its client sent since is still unread in the
// socket, for the process that takes it over (Adopt).
type HandedConn struct {
	// Network and Addr are the address of the listener that accepted
	// it, as the configuration gave it ("tcp", "127.0.0.1:22121"; "unix",
	// a path).
	Network, Addr string
	// Conn is the connection. The hand-off function sends a duplicate of
	// its socket; the session closes Conn once the function returns.
	Conn net.Conn
	// State is the session's state, for Adopt: its protocol, and what the
	// client set on its connection (codec.StateSaver).
	State []byte
}

// SetHandOff makes the drains that begin after it pass each client
// connection they can to fn rather than close it, so that its client sees
// no close at all: an upgrade in place hands them to the new process. A
// connection is passed once the session has stopped at a request boundary
// (a Redis transaction ended) and every reply is written. Connections over
// TLS (their keys cannot move), subscribed clients, watches, and
// connections stopped by an error end as any drain ends them. When fn
// returns an error the connection ends that way too: half-closed after
// its last reply. fn runs on the session's goroutine, once per connection.
func (s *Server) SetHandOff(fn func(HandedConn) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.drainer
	d.handOff = func(hc HandedConn) error {
		err := fn(hc)
		if err == nil {
			d.handed.Add(1)
		}
		return err
	}
}

// Adopt serves nc, a client connection another process's drain handed
// over (HandedConn), on this server's listener at network and addr, as if
// that listener had accepted it (its pool's limit on client connections
// does not apply: the client is connected already). It fails when no
// listener is at that address, when state is of another protocol than the
// listener's pool speaks or unreadable, or when the server no longer
// serves; the caller then closes nc.
func (s *Server) Adopt(network, addr string, nc net.Conn, state []byte) error {
	s.mu.Lock()
	l := s.listeners[listenKey{network: network, addr: addr}]
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("proxy: no listener at %s %s", network, addr)
	}
	p := l.pool.Load()
	sess := newSession(l, p, nc)
	if err := sess.restore(state); err != nil {
		return err
	}
	if !s.serveSession(l, p, sess) {
		return errors.New("proxy: the server is closed")
	}
	return nil
}

// canHandOff reports whether the drained session's connection may be
// handed over (SetHandOff) rather than ended: called by the reader once it
// has read its last request.
func (s *session) canHandOff() bool {
	return s.passTo != nil && s.w.raw != nil && s.pin == nil && s.sub == nil && s.watcher == nil
}

// passOn hands the connection to the drain's hand-off function; false when
// it could not (the session then ends as any drained one).
func (s *session) passOn() bool {
	network, addr := s.l.key.network, s.l.key.addr
	return s.passTo(HandedConn{Network: network, Addr: addr, Conn: s.nc, State: s.state()}) == nil
}

// state returns the session's state for Adopt: its pool's protocol and a
// 0 byte, then the parser's state (codec.StateSaver), if it keeps any.
func (s *session) state() []byte {
	b := append([]byte(s.p.dialect.Name()), 0)
	if ss, ok := s.parser.(codec.StateSaver); ok {
		b = ss.AppendState(b)
	}
	return b
}

// restore sets the state a session had in another process (state).
func (s *session) restore(state []byte) error {
	name := s.p.dialect.Name()
	if len(state) <= len(name) || string(state[:len(name)]) != name || state[len(name)] != 0 {
		return fmt.Errorf("proxy: a connection handed over for another protocol than %s", name)
	}
	rest := state[len(name)+1:]
	ss, ok := s.parser.(codec.StateSaver)
	switch {
	case ok:
		return ss.RestoreState(rest)
	case len(rest) > 0:
		return fmt.Errorf("proxy: a %s connection handed over with state it cannot keep", name)
	}
	return nil
}
