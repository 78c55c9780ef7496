package proxy

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"shardproxy/backend"
)

// finCheck bounds how long a session may miss its client's FIN (see
// readLoop's skipped reads).
const finCheck = time.Second

// readLoop reads requests until the client leaves, a fatal protocol error,
// or the session stops.
//
// On a TCP or unix socket it reads through the socket's RawConn and takes a
// short read to mean the socket is drained: it waits for the poller's next
// readiness edge instead of reading again only to see EAGAIN, as
// net.Conn's Read does. That saves a system call per burst: one per request
// for an unpipelined client. Data that arrives after the short read is not
// missed: the runtime polls edge-triggered and, within one RawConn.Read,
// keeps an edge that arrives while the callback runs.
//
// A FIN can be: when it arrives with the last request, the read returns the
// request and the poller has no later edge to report. So the first skipped
// read arms a read deadline finCheck ahead; when it fires, the loop reads
// once more (EAGAIN, or the EOF it missed) and waits with no deadline, or
// for another finCheck while replies are still due. A client that sent its
// last request and closed is so noticed within finCheck; a busy client
// costs one deadline per finCheck. The check also gives back the pendings
// the session keeps (see newPending). TLS sessions read through net.Conn.
//
// It reports whether a draining session stopped at a request boundary
// (drainEnds).
func (s *session) readLoop() (boundary bool) {
	r := sessionReader{s: s, buf: make([]byte, 0, idleChunk), limit: s.maxBuffer()}
	defer func() {
		boundary = r.drainEnds()
		backend.PutBuffer(r.buf)
	}()
	var rc syscall.RawConn
	if sc, ok := s.nc.(syscall.Conn); ok {
		rc, _ = sc.SyscallConn()
	}
	if rc == nil {
		r.readConn()
		return
	}
	r.raw = true
	if r.stampDue() {
		rc.Control(r.stampOn) // from the first byte: the kernel starts stamping a moment after
	}
	r.readRaw(rc)
	return
}

// readConn reads through net.Conn, for a socket with no file descriptor
// (TLS).
func (r *sessionReader) readConn() {
	for {
		n, err := r.s.nc.Read(r.buffer())
		if !r.got(n, err) {
			return
		}
	}
}

// readRaw reads through rc, the socket's RawConn, until the session ends
// (see readLoop).
func (r *sessionReader) readRaw(rc syscall.RawConn) {
	s := r.s
	read := r.readFD // made once: RawConn.Read takes a func
	for !r.stop {
		err := rc.Read(read)
		if r.stop {
			return
		}
		if r.armed && errors.Is(err, os.ErrDeadlineExceeded) && !s.closing.Load() && r.checkFIN() {
			continue
		}
		if err != nil && !r.got(0, err) {
			return
		}
	}
}

// readFD is readRaw's RawConn.Read callback: it reads until the socket is
// drained (true stops the wait, with r.stop set when reading ends).
func (r *sessionReader) readFD(fd uintptr) bool {
	if r.stampDue() {
		r.stampOn(fd)
	}
	for {
		b := r.buffer()
		var n int
		var err error
		if r.oob == nil {
			n, err = backend.RawRead(int(fd), b)
		} else {
			n, r.s.arrived, err = backend.RawReadStamped(int(fd), b, r.oob)
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if r.drainEnds() {
				r.s.lastRead(true) // now: a request sent after this read is not read
				r.stop = true
				return true
			}
			return false // wait for readiness
		case err != nil:
			n, err = 0, os.NewSyscallError("read", err)
		case n == 0:
			err = io.EOF
		}
		if !r.got(n, err) { // always false on an error
			r.stop = true
			return true
		}
		if n == len(b) {
			continue // more may be waiting
		}
		if r.armed {
			return false // drained: wait for the next edge
		}
		return r.armFIN()
	}
}

// stampOn has the kernel note when the client's bytes arrive, once a
// blocking command was ordered on the session's pool (HasBlocked): the
// blocking commands of two clients are put back in the order they
// arrived (kind's Order), which their reader goroutines may not have run
// in. It costs recvmsg(2) for read(2) on each read, and the kernel a
// timestamp per packet it receives, so the pools whose clients never
// block do not turn it on; until it is on (a pool's first blocking
// command), a read's time is when the session read it.
func (r *sessionReader) stampOn(fd uintptr) {
	if backend.StampRecv(int(fd)) != nil {
		r.noStamps = true // not again
		return
	}
	r.oob = make([]byte, backend.StampSpace)
}

// stampDue reports whether the reads are to be stamped from now on and
// are not yet: the session's pool has ordered a blocking command. The
// pool is the session's current one, which a reload changes (switchPool,
// on this goroutine): each pool has its own order, and a session that
// started on a pool that never blocked must stamp once the reload's pool
// does.
func (r *sessionReader) stampDue() bool {
	if r.oob != nil || r.noStamps {
		return false
	}
	dp := r.s.p.order
	return dp != nil && dp.HasBlocked()
}

// armFIN arms the FIN check, when a read found the socket drained and the
// check was not armed. It returns readFD's answer: false waits for the
// next edge.
func (r *sessionReader) armFIN() bool {
	r.armed = true
	r.s.nc.SetReadDeadline(time.Now().Add(finCheck))
	if r.s.closing.Load() || r.drainEnds() { // stop's or drain's deadline may be the one replaced
		r.stop = true
		return true
	}
	return false
}

// checkFIN runs when the FIN check's deadline fired: the loop reads
// again, to EAGAIN (or the EOF it missed). The session's kept pendings go
// back to the pool: a busy session refills its stock at once, a quiet one
// keeps none. While replies are still due (their pendings would refill
// it) the check stays armed for another round; else the loop waits with
// no deadline. It returns false when the session is stopping.
func (r *sessionReader) checkFIN() bool {
	s := r.s
	s.dropStock()
	if s.outstanding.Load() > 0 {
		s.nc.SetReadDeadline(time.Now().Add(finCheck))
	} else {
		r.armed = false
		s.nc.SetReadDeadline(time.Time{})
	}
	return !s.closing.Load()
}

// sessionReader is the session's read buffer and what it does with each
// read.
type sessionReader struct {
	s        *session
	buf      []byte
	limit    int    // the largest buffer: one whole request
	free     int    // the room the last read had
	discard  int64  // bytes still to drop (the rest of a refused request)
	small    int    // reads in a row that would have fit the idle buffer
	armed    bool   // the FIN check's deadline is set (readRaw)
	raw      bool   // reading through the socket's RawConn (readRaw)
	oob      []byte // recvmsg's control buffer, when the kernel notes arrival times (stampOn); nil: none
	noStamps bool   // the socket cannot stamp (stampOn failed)
	stop     bool   // readFD saw the end of reading (readRaw)
}

// buffer is where the next read goes: never empty.
func (r *sessionReader) buffer() []byte {
	if need := r.s.need; need > cap(r.buf) && need <= r.limit {
		// A big request announced its length: grow once, to it.
		nb := append(backend.GetBuffer(need), r.buf...)
		backend.PutBuffer(r.buf)
		r.buf = nb
	}
	if len(r.buf) == cap(r.buf) { // got stops at the limit
		nb := make([]byte, len(r.buf), min(max(2*cap(r.buf), readChunk), r.limit))
		copy(nb, r.buf)
		r.buf = nb
	}
	r.free = cap(r.buf) - len(r.buf)
	return r.buf[len(r.buf):cap(r.buf)]
}

// got handles a read of n bytes into buffer's slice and its error; false
// ends the session's reading.
func (r *sessionReader) got(n int, err error) bool {
	s := r.s
	r.add(n)
	if r.discard == 0 && n > 0 {
		var ok bool
		r.buf, r.discard, ok = s.parse(r.buf)
		if !ok {
			return false
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && s.draining.Load() && !s.closing.Load() {
			return r.drainRead()
		}
		if errors.Is(err, io.EOF) {
			s.p.stats.ClientEOF.Add(1)
		} else if !s.closing.Load() {
			s.p.stats.ClientErr.Add(1)
		}
		return false
	}
	if len(r.buf) == cap(r.buf) && cap(r.buf) >= r.limit {
		s.p.stats.ClientErr.Add(1)
		return false // the parser should have refused this request already
	}
	// Back to the small buffer once the client is quiet: idle
	// connections stay cheap, and a client mixing small and large
	// requests does not reallocate on every large one.
	if buf := r.buf; len(buf) == 0 && (cap(buf) > 4*readChunk || cap(buf) > idleChunk && r.small >= quietReads) {
		backend.PutBuffer(buf)
		r.buf = make([]byte, 0, idleChunk)
	}
	return !s.closing.Load() && !r.drainEnds()
}

// A draining session (Server.Drain) stops reading at its next request
// boundary: the requests it has read are answered, a request partly read
// is read to its end (and a transaction to its EXEC or DISCARD), and what
// the client sends after that is not read
// (a pipelining client sees its connection close after the replies to
// what the proxy received; an idle client sees it close at once). The
// drain's deadline wakes the reader; on a socket it then reads once more
// what has arrived, and stops at the first boundary it finds.

// drainEnds reports whether the session drains and its reader is at a
// request boundary: nothing partly read, nothing left to drop, and no
// Redis transaction open (its EXEC or DISCARD is awaited like the rest of
// a request; a subscribed client has nothing to finish).
func (r *sessionReader) drainEnds() bool {
	return r.s.draining.Load() && len(r.buf) == 0 && r.discard == 0 && !r.s.inPart() && r.s.pin == nil
}

// drainRead takes the drain's wake-up: reading goes on without a
// deadline (the drain's own deadline cuts the connection) while a request
// is partly read; on a socket, readFD reads what has arrived and stops at
// the boundary. A TLS session at a boundary reads on only when its socket
// holds input (inputWaiting), so the records the client sent before the
// drain are read; records the TLS layer has taken from the socket but
// not yet handed over are not looked for. It returns false when reading
// ends.
func (r *sessionReader) drainRead() bool {
	if !r.raw && r.drainEnds() && !inputWaiting(r.s.nc) {
		return false
	}
	r.armed = false
	r.s.nc.SetReadDeadline(time.Time{})
	return true
}

// add takes a read of n bytes into the buffer: a read that filled a small
// buffer moves it to a bigger one, and what is left of a refused request
// is dropped.
func (r *sessionReader) add(n int) {
	buf := r.buf
	if n == r.free && cap(buf) < readChunk {
		// The read filled the buffer: the client is busy; read more
		// per system call from now on (a recycled buffer: clients
		// that alternate small and large requests switch often).
		nb := append(backend.GetBuffer(readChunk), buf[:len(buf)+n]...)
		buf = nb[:len(buf)]
	}
	buf = buf[:len(buf)+n]
	if n < idleChunk {
		r.small++
	} else {
		r.small = 0
	}
	if r.discard > 0 {
		d := min(r.discard, int64(len(buf)))
		buf = buf[:copy(buf, buf[d:])]
		r.discard -= d
	}
	r.buf = buf
}
