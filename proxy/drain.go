package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultReadyWait is how long after Start Ready waits at most for every
// pool's servers to be tried (Options.ReadyWait).
const DefaultReadyWait = 10 * time.Second

// DrainReport says what a drain did.
type DrainReport struct {
	// Connections is how many client connections were open when the
	// drain began.
	Connections int
	// Drained counts those closed once everything read from them was
	// answered: idle ones at once, busy ones after their last reply.
	Drained int
	// Handed counts those passed to another process (SetHandOff) once
	// everything read from them was answered.
	Handed int
	// Cut counts those still open when the drain's context ended,
	// closed with requests unanswered or one partly read.
	Cut int
	// Requests counts the requests answered while draining: in flight
	// when it began, or read afterwards (the rest of a request partly
	// read, a pipeline's rest already received).
	Requests int64
	// RequestsCut counts the requests read and not answered on the
	// connections cut.
	RequestsCut int64
	// Took is how long the drain took.
	Took time.Duration
}

// drainState is a Server's drain: whether one began, its outcome, and
// the totals /metrics shows.
type drainState struct {
	draining atomic.Bool
	done     chan struct{} // closed when the drain ended; nil before it began (s.mu)
	report   DrainReport   // set before done closes
	err      error         // likewise

	late         atomic.Int64           // connections accepted as the drain began (Server.accept)
	handOff      func(HandedConn) error // SetHandOff's, counting; nil: none (s.mu)
	handed       atomic.Int64           // connections handOff passed on
	connsDrained atomic.Int64
	connsHanded  atomic.Int64
	connsCut     atomic.Int64
	requests     atomic.Int64
	requestsCut  atomic.Int64

	startedAt atomic.Int64 // Start's time (UnixNano); 0 before Start
	ready     atomic.Bool  // every pool's servers were tried, or ReadyWait passed
	readyWait time.Duration
}

// DrainStats are a Server's drain state and the totals of its
// DrainReport (Stats.Drain).
type DrainStats struct {
	Draining           bool // Drain has begun
	ConnectionsDrained int64
	ConnectionsHanded  int64 // passed to another process (SetHandOff)
	ConnectionsCut     int64
	Requests           int64 // answered while draining
	RequestsCut        int64
}

// Draining reports whether the server has begun to drain (Drain or
// Shutdown). Safe for concurrent use.
func (s *Server) Draining() bool { return s.drainer.draining.Load() }

// Ready reports whether the server should be sent clients: it has started,
// every server a pool dials at start (preconnect) has been tried (it
// answered its handshake on a socket, or failed: a pool that lost a
// server serves the others), or Options.ReadyWait has passed since Start,
// and it is not draining. A pool that dials its servers at first use
// has none to wait for. Once
// true it stays true until the drain: a server lost later is the pool's
// business, not the listener's. When false, reason says why in a word:
// "starting" or "draining". Safe for concurrent use.
func (s *Server) Ready() (ok bool, reason string) {
	d := &s.drainer
	switch {
	case d.draining.Load():
		return false, "draining"
	case d.ready.Load():
		return true, ""
	}
	started := d.startedAt.Load()
	if started == 0 {
		return false, "starting"
	}
	if time.Since(time.Unix(0, started)) < d.readyWait && !s.serversTried() {
		return false, "starting"
	}
	d.ready.Store(true)
	return true, ""
}

// serversTried reports whether every backend of the running pools that
// dials at start has a validated socket or has failed.
func (s *Server) serversTried() bool {
	for _, p := range s.currentPools() {
		for _, b := range p.router.Backends() {
			if !b.Config().Preconnect {
				continue
			}
			if b.Stats().Connections.Load() == 0 && b.State().Failures == 0 && !b.Bad() {
				return false
			}
		}
	}
	return true
}

// drainStats returns the drain's state and totals now.
func (s *Server) drainStats() DrainStats {
	d := &s.drainer
	return DrainStats{
		Draining:           d.draining.Load(),
		ConnectionsDrained: d.connsDrained.Load(),
		ConnectionsHanded:  d.connsHanded.Load(),
		ConnectionsCut:     d.connsCut.Load(),
		Requests:           d.requests.Load(),
		RequestsCut:        d.requestsCut.Load(),
	}
}

// Drain stops accepting and lets every client connection finish: each
// stops reading at its next request boundary (what it has sent and the
// proxy has received is answered; a request partly read is read to its
// end), and closes once its replies are written; an idle one closes at
// once. Listeners close (their sockets stay open in a process they were
// handed to). When ctx ends first, the connections left are cut: closed
// with what they have in flight unanswered, and ctx's error is returned.
// Backends stay open (Shutdown closes them) and no reload is taken after.
// A second call waits for the first drain's outcome. It logs and counts
// what it did (Stats.Drain).
func (s *Server) Drain(ctx context.Context) (DrainReport, error) {
	d := &s.drainer
	s.mu.Lock()
	if d.done != nil {
		done := d.done
		s.mu.Unlock()
		select {
		case <-done:
			return d.report, d.err
		case <-ctx.Done():
			return DrainReport{}, ctx.Err()
		}
	}
	start := time.Now()
	d.done = make(chan struct{})
	d.draining.Store(true)
	s.closed = true
	for _, l := range s.listeners {
		l.ln.Close()
	}
	rep := DrainReport{Connections: len(s.sessions)}
	read := s.requestsRead()
	handed := d.handed.Load()
	var inflight int64
	for sess := range s.sessions {
		inflight += sess.outstanding.Load()
		sess.drain(d.handOff)
	}
	s.mu.Unlock()
	s.log.Info("draining", "connections", rep.Connections, "requests_in_flight", inflight)

	sessions := make(chan struct{})
	go func() {
		s.wg.Wait() // the accept loops end with their listeners
		close(sessions)
	}()
	var err error
	select {
	case <-sessions:
	case <-ctx.Done():
		err = ctx.Err()
		rep.Cut, rep.RequestsCut = s.cut()
	}
	rep.Connections += int(d.late.Load())
	rep.Handed = int(d.handed.Load() - handed)
	rep.Drained = rep.Connections - rep.Cut - rep.Handed
	rep.Requests = max(0, s.requestsRead()-read+inflight-rep.RequestsCut)
	rep.Took = time.Since(start)
	d.connsDrained.Add(int64(rep.Drained))
	d.connsHanded.Add(int64(rep.Handed))
	d.connsCut.Add(int64(rep.Cut))
	d.requests.Add(rep.Requests)
	d.requestsCut.Add(rep.RequestsCut)
	s.log.Info("drained", "connections", rep.Connections, "drained", rep.Drained, "handed", rep.Handed, "cut", rep.Cut,
		"requests", rep.Requests, "requests_cut", rep.RequestsCut, "took", rep.Took)
	d.report, d.err = rep, err
	close(d.done)
	return rep, err
}

// cut closes the client connections a drain left open and returns how
// many of them were still busy and the requests they had in flight; one
// that lingers has answered everything and counts as drained.
func (s *Server) cut() (conns int, requests int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sess := range s.sessions {
		if !sess.lingering.Load() {
			conns++
			requests += sess.outstanding.Load()
		}
		sess.nc.Close()
	}
	return conns, requests
}

// requestsRead returns the requests the running pools have read.
func (s *Server) requestsRead() int64 {
	var n int64
	for _, p := range s.currentPools() {
		n += p.stats.Requests.Load()
	}
	return n
}

// drain makes the session stop reading at its next request boundary
// (see the reader's drain steps in readloop.go) and close once what it
// read is answered, or pass its connection to passTo (nil: none).
func (s *session) drain(passTo func(HandedConn) error) {
	s.passTo = passTo
	s.draining.Store(true)
	s.nc.SetReadDeadline(time.Now()) // wakes a reader waiting for its client
}

// lingerTime bounds how long a drained connection, its write side
// closed, waits for its client to close.
const lingerTime = time.Second

// linger ends a drained session's connection without a reset: its
// client may have sent more than the reader took (a pipeline), and
// closing a socket with unread input resets it, which can lose the
// replies not yet delivered. It half-closes, so the client reads its
// replies and then the end, and discards what arrives until the client
// closes too, lingerTime at most (a cut closes it at once).
func (s *session) linger() {
	s.lingering.Store(true)
	s.w.mu.Lock()
	halfClosed := s.finishWrite() // done already when the last reply's writer did it (lastReply)
	s.w.mu.Unlock()
	if !halfClosed {
		return
	}
	s.nc.SetReadDeadline(time.Now().Add(lingerTime))
	io.Copy(io.Discard, s.nc)
}

// inputWaiting reports whether nc's socket (under TLS, the connection
// beneath) holds input not read yet: a peek that does not wait.
func inputWaiting(nc net.Conn) bool {
	rc := socketOf(nc)
	if rc == nil {
		return false
	}
	var n int
	rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}

// socketOf returns the RawConn of nc's socket (under TLS, of the
// connection beneath), or nil when it has none.
func socketOf(nc net.Conn) syscall.RawConn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
