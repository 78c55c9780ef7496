package backend

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"shardproxy/codec"
)

const (
	readChunk   = 16 << 10
	shrinkAbove = 1 << 20
	exactUpTo   = 4 << 20 // largest announced reply given its buffer at once
)

// readLoop reads replies and hands each to the oldest in-flight call. It
// is the only goroutine that completes calls handed to the socket: when
// the socket dies, whoever found it broken, it fails the rest in order.
func (s *sock) readLoop() {
	r := reader{buf: GetBuffer(readChunk), pooled: true}
	defer s.readerDone(&r)
	for {
		n, err := s.readSome(&r)
		r.buf = r.buf[:len(r.buf)+n]
		if n > 0 && !s.deliver(&r) {
			return
		}
		if err != nil && !s.readFailed(err, &r) {
			return
		}
		if len(r.buf) == 0 && cap(r.buf) > shrinkAbove {
			r.replace(0, 0)
		}
	}
}

// errUnspliced stops the reader: a spliced value could not be read back
// (readSome has killed the socket).
var errUnspliced = errors.New("backend: unsplice failed")

// readSome reads what the server sent next: into the read buffer, or,
// while the head's value is spliced, from the socket into its pipe.
func (s *sock) readSome(r *reader) (int, error) {
	switch {
	case s.spl.left > 0:
		// The head's value, from the socket to its pipe.
		err := s.spliceIn()
		if errors.Is(err, errCannotSplice) {
			if err = s.unsplice(r); err != nil {
				s.kill(CauseReading, true)
				return 0, errUnspliced
			}
		}
		return 0, err
	case s.raw != nil:
		r.grow()
		return s.raw.read(r.buf[len(r.buf):cap(r.buf)])
	default:
		r.grow()
		return s.nc.Read(r.buf[len(r.buf):cap(r.buf)])
	}
}

// readFailed handles a failed read: it reports whether reading goes on
// (a read deadline with nothing late), or kills the socket with the
// cause the error names.
func (s *sock) readFailed(err error, r *reader) bool {
	if err == errUnspliced {
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if !s.expired() {
			return true
		}
		// An idle check's timeout is the path's, not the server's: it
		// does not count (health.go).
		s.killWith(CauseTimeout, !s.inflight[0].probe, sockFailure{depth: -1, rbuf: s.unframed(r.buf)})
		return false
	}
	cause := CauseReading
	if errors.Is(err, net.ErrClosed) {
		cause = CauseClosed // killed elsewhere, which set the cause
	} else if isEOF(err) {
		cause = CauseDisconnected
	}
	// A server closing an idle socket (an idle timeout, a restart between
	// requests) failed no request: it does not count towards marking the
	// backend bad; the next request redials. Whether it was idle is
	// decided as the socket dies (killWith, under mu): a call the writer
	// handed over after this read found the close fails with it, and
	// counts.
	// Under memcached's rule (Config.Reconnect) it counts, as any
	// failure: the slot dials again at once.
	idle := cause == CauseDisconnected && !s.c.b.cfg.Reconnect
	count := cause != CauseClosed && !idle
	if testHookDisconnected != nil && cause == CauseDisconnected {
		testHookDisconnected()
	}
	s.killWith(cause, count, sockFailure{depth: -1, rbuf: s.unframed(r.buf), countBusy: idle})
	return false
}

// testHookDisconnected, set by tests only, runs in readFailed when a read
// found the server's close, before the socket dies.
var testHookDisconnected func()

// readerDone is the reader's end: it recycles what it holds, fails what
// is in flight, and lets the slot forget the socket.
func (s *sock) readerDone(r *reader) {
	if r.pooled {
		PutBuffer(r.buf)
	}
	s.dropArena()
	s.dropSplice()
	s.failInFlight()
	if s.c.push != nil {
		s.pushGone()
	}
	s.c.forget(s)
	s.c.readers.Done()
}

// failInFlight answers every call handed to the dead socket with the
// cause it died of, in order. It first waits for the writer to leave its
// system call: until then the calls' request bytes may still be read.
func (s *sock) failInFlight() {
	s.mu.Lock()
	for s.writing {
		s.wrote.Wait()
	}
	cause := s.cause
	h := s.swap() // the last: the writer hands nothing to a dead socket
	s.mu.Unlock()
	s.adopt(h)
	calls := s.inflight
	b := s.c.b
	b.stats.Connections.Add(-1)
	b.stats.OutQueue.Add(-int64(len(calls)))
	s.pending.Add(-int64(len(calls)))
	if cause != CauseClosed {
		b.log.Debug("backend socket failed", "cause", cause.String(), "in_flight", len(calls))
	}
	for i, call := range calls {
		b.finish(call, cause)
		calls[i] = nil
	}
	s.inflight, s.fifo, s.other = nil, nil, nil
}

// reader is a socket's read buffer. Nothing outside the reader points into
// buf: a reply that keeps a slice of it (see deliver) takes the buffer,
// and the reader moves on to a new one.
type reader struct {
	buf    []byte
	need   int  // the length the unfinished reply at buf's start announced
	pooled bool // buf came from GetBuffer
}

// grow makes room before a read.
func (r *reader) grow() {
	room := cap(r.buf) - len(r.buf)
	switch {
	case r.need > cap(r.buf) && (r.need <= exactUpTo || room < readChunk/4):
		// A big reply: one buffer of its length, read into directly
		// and handed over whole (see deliver). Past exactUpTo the
		// buffer grows as the bytes arrive: a reply's header alone
		// does not commit a gigabyte.
		n := r.need
		if n > exactUpTo {
			n = min(n, 2*cap(r.buf))
		}
		r.replace(n, len(r.buf))
	case r.need <= len(r.buf) && room < readChunk/4:
		r.replace(2*cap(r.buf), len(r.buf))
	}
}

// replace moves the last keep bytes of buf to a new buffer of at least size
// bytes (readChunk at least). The old one is recycled unless a reply took it.
// The unfinished reply moves with its bytes: offsets from its start, as
// the socket's ReplyState keeps them, stay valid.
func (r *reader) replace(size, keep int) {
	old, oldPooled := r.buf, r.pooled
	// Room for what is kept too: a buffer append grew would be a second
	// allocation, of a size the pools do not take back.
	r.buf, r.pooled = GetBuffer(max(size, keep, readChunk)), true
	r.buf = append(r.buf, old[len(old)-keep:]...)
	if oldPooled {
		PutBuffer(old)
	}
}

// deliver frames every complete reply in r.buf and completes its call. It
// returns false when the socket is dead.
//
// Framing holds no lock: the in-flight list is the reader's own, and the
// lock it shares with the writer is taken only to take over calls handed
// to it. The reply at the head is framed from where the last read left
// it (Dialect.ResumeReply with the socket's ReplyState), so a reply that
// arrives in many reads costs its length once, not once per read.
//
// Small replies are copied out (see carve). The first reply over arenaMax
// is handed over as a slice of the buffer itself, which it then owns (and
// recycles, see Call.Release, when it starts the buffer): the bytes after
// it move to a new buffer. A reply whose value is spliced (splice.go)
// keeps the bytes it has here the same way (the whole buffer, when no
// reply before it kept a slice of it), and its call completes when a
// later read brings its tail.
func (s *sock) deliver(r *reader) bool {
	if s.c.push != nil {
		return s.deliverPush(r)
	}
	if s.dead.Load() {
		return false // killed elsewhere: what is in flight fails
	}
	r.need = 0
	d := delivery{buf: r.buf, done: s.done[:0]}
	for d.start < len(d.buf) {
		if len(s.inflight) == 0 && !s.take() {
			d.failed = CauseTrailingData
			break
		}
		if s.spl.call != nil {
			if !s.deliverSpliced(&d) {
				break
			}
		} else if !s.deliverReply(r, &d) {
			break
		}
	}
	if d.failed != 0 {
		// Dead before the replies go out: their clients may send the
		// next request at once, and it must not be written on this
		// socket. The calls behind are failed after them, in order.
		// The calls done are answered: the socket held the others.
		depth := int(s.pending.Load()) - len(d.done)
		s.killWith(d.failed, true, sockFailure{depth: depth, rbuf: d.buf[d.start:]})
	}
	s.complete(d.done, d.bytes)
	s.done = d.done[:0]
	if d.failed != 0 {
		return false
	}
	s.keepRest(r, &d)
	return true
}

// delivery is what deliver has done with one read's bytes so far.
type delivery struct {
	buf    []byte  // the read buffer, r.buf or a buffer a reply took
	start  int     // where the next reply starts in buf
	taken  bool    // a reply owns buf
	failed Cause   // why the socket must fail, if it must
	bytes  int64   // the reply bytes of the calls done, for the stats
	done   []*Call // completed by this read, in order
}

// deliverSpliced takes the tail of the head's reply, whose value is in
// the pipe (splice.go), and reports whether framing goes on.
func (s *sock) deliverSpliced(d *delivery) bool {
	call := s.inflight[0]
	n, ok := s.spliceDone(d.buf[d.start:])
	if !ok {
		d.failed = CauseParsing
		return false
	}
	if n == 0 {
		return false
	}
	d.start += n
	s.st = codec.ReplyState{}
	s.pop()
	if !call.probe {
		d.bytes += int64(len(call.Reply.Raw) + call.body.n + n)
	}
	d.done = append(d.done, call)
	return true
}

// deliverReply frames the reply to the head call at d.start and completes
// the call if it is whole; it reports whether framing goes on.
func (s *sock) deliverReply(r *reader, d *delivery) bool {
	call := s.inflight[0]
	var (
		n, part int    // the reply's bytes in buf; of them, the call's own
		tail    string // what the call's reply has after them
		kind    codec.ReplyKind
		err     error
	)
	if call.joined {
		n, part, tail, kind, err = s.parseJoined(d.buf[d.start:])
	} else {
		n, kind, err = s.c.b.cfg.Dialect.ResumeReply(d.buf[d.start:], call.Req, &s.st)
		part = n
	}
	if err != nil {
		if !errors.Is(err, codec.ErrIncomplete) {
			d.failed = CauseParsing
			return false
		}
		r.need = codec.Needed(err)
		if s.startSplice(d.buf[d.start:], call, r.need) {
			s.holdSpliced(r, d, call)
		}
		return false
	}
	if call.Over != nil && call.Over() {
		d.failed = CauseOutOfMemory // kill fails call, still the head
		return false
	}
	s.st = codec.ReplyState{} // the next reply starts at its first byte
	s.pop()
	// The read deadline is left as it is: it belongs to an older call,
	// so it is never later than the new head's. When it fires, expired
	// re-arms it for the head (or clears it) if nothing is late.
	var raw []byte
	switch {
	case call.joined:
		raw = s.joinedReply(d.buf[d.start:d.start+part], tail, call)
	case n <= arenaMax:
		// The usual reply: copied out of the read buffer into an arena.
		raw, call.arena = s.carve(n)
		copy(raw, d.buf[d.start:d.start+n])
	default:
		raw = s.bigReplyBytes(r, d, call, n)
	}
	d.start += n
	if !call.probe {
		d.bytes += int64(n)
	}
	call.Reply = codec.Reply{Raw: raw, Kind: kind}
	d.done = append(d.done, call)
	if kind == codec.ReplyFatal || kind == codec.ReplyError && s.breaks(raw) {
		// The server misread the stream: nothing behind this reply
		// can be trusted.
		d.failed = CauseParsing
		if s.c.b.cfg.BreaksStream != nil {
			d.failed = CauseInvalidProtocol
		}
		return false
	}
	return true
}

// bigReplyBytes returns the n bytes of a reply at d.start too big for an
// arena as the call keeps them: a slice of the buffer (the buffer whole
// when the reply starts a recycled one), and any later big one as a copy.
func (s *sock) bigReplyBytes(r *reader, d *delivery, call *Call, n int) (raw []byte) {
	buf, start := d.buf, d.start
	switch {
	case r.pooled && start == 0:
		// The reply starts a recycled buffer: it takes the buffer
		// whole, and recycles it once written (Call.Release). The
		// bytes after it move out now: once the call completes the
		// buffer may be reused at any time.
		raw = buf[:n:n]
		call.owned = buf
		r.pooled = false // replace must not recycle it
		r.replace(readChunk, len(buf)-n)
		d.buf, d.start = r.buf, -n
	case !d.taken:
		raw = buf[start : start+n : start+n]
		d.taken = true
	default:
		raw = make([]byte, n)
		copy(raw, buf[start:start+n])
	}
	return raw
}

// holdSpliced keeps the bytes of the head's reply that came before its
// spliced value as the call's Raw: the rest of the value goes to the
// pipe, and nothing after it is in this read.
func (s *sock) holdSpliced(r *reader, d *delivery, call *Call) {
	buf := d.buf
	raw := buf[d.start:len(buf):len(buf)]
	switch {
	case r.pooled && !d.taken:
		// No reply before it kept a slice of buf: the call can own it
		// whole.
		call.owned = buf
		r.pooled = false // replace must not recycle it
		r.replace(readChunk, 0)
		buf = r.buf
		d.buf = buf
	case !d.taken:
		d.taken = true
	default:
		raw = append([]byte(nil), raw...)
	}
	d.start = len(buf)
	call.Reply.Raw = raw
	r.need = 0
}

// keepRest leaves the bytes after the last whole reply, the start of an
// unfinished one, at the front of the reader's buffer.
func (s *sock) keepRest(r *reader, d *delivery) {
	buf, start := d.buf, d.start
	if d.taken {
		rest := buf[start:]
		r.pooled = false // the reply has it; replace must not recycle it
		r.replace(min(r.need, exactUpTo), len(rest))
		return
	}
	// The unfinished reply moves to the front; its ReplyState holds. A
	// big one that will not fit moves straight to a buffer of its
	// announced length: moving it to the front first, and then again
	// when grow makes room, copied it twice.
	if start > 0 && r.need > cap(buf) && r.need <= exactUpTo {
		r.replace(r.need, len(buf)-start)
		return
	}
	r.buf = buf[:copy(buf, buf[start:])]
}

// parseJoined frames the part of a joined reply at buf's start that
// answers the call at the head, a joined one (join.go): see
// codec.Joiner.ParseJoined. The requests of its run, up to the last, which
// was handed over with them, are in s.run while any of them is at the
// head but the last.
func (s *sock) parseJoined(buf []byte) (n, part int, tail string, kind codec.ReplyKind, err error) {
	if len(s.run) == 0 {
		run := s.runBuf[:0]
		for _, call := range s.inflight {
			run = append(run, call.Req)
			if !call.joined {
				break
			}
		}
		s.run, s.runBuf = run, run[:0]
	}
	if n, part, tail, kind, err = s.c.b.joiner.ParseJoined(buf, s.run); err == nil {
		if s.run = s.run[1:]; len(s.run) == 1 {
			s.run = s.run[:0] // the last call's part is framed as its own
		}
	}
	return n, part, tail, kind, err
}

// joinedReply returns a copy of part followed by tail: the reply of call,
// a joined one, which a copy lets outlive the read buffer.
func (s *sock) joinedReply(part []byte, tail string, call *Call) []byte {
	size := len(part) + len(tail)
	var raw []byte
	if size <= arenaMax {
		raw, call.arena = s.carve(size)
	} else {
		raw = make([]byte, size)
	}
	copy(raw[copy(raw, part):], tail)
	return raw
}

// complete counts the replies of one read and runs their calls' Done, in
// order.
func (s *sock) complete(done []*Call, bytes int64) {
	if len(done) == 0 {
		return
	}
	b := s.c.b
	now := time.Now() // the replies of one read arrived together
	n := int64(len(done))
	s.pending.Add(-n)
	b.stats.OutQueue.Add(-n)
	var lat observations
	for _, call := range done {
		if call.probe { // an idle check: its Done judges the reply
			n--
			continue
		}
		call.replied = now
		lat.observe(now.Sub(call.start))
		switch call.Reply.Kind {
		case codec.ReplyFailure:
			if !b.cfg.Reconnect { // memcached's rule counts the socket's failures only
				b.failed(CauseBadValidate)
			}
		case codec.ReplyFatal:
		default:
			b.succeeded()
		}
	}
	b.stats.Responses.Add(n)
	b.stats.ResponseBytes.Add(bytes)
	lat.addTo(&b.stats.Latency)
	for i, call := range done {
		call.Done(call)
		done[i] = nil
	}
}

// expired reports whether the oldest in-flight call is past its deadline; if
// not, it re-arms the read deadline for it, or clears it when nothing is
// in flight. Under mu, against the writer arming it (see write).
func (s *sock) expired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inflight) == 0 {
		s.adopt(s.swap())
	}
	if len(s.inflight) == 0 {
		s.setReadDeadline(time.Time{})
		return false
	}
	d := s.inflight[0].deadline
	if !d.IsZero() && !time.Now().Before(d) {
		return true
	}
	s.setReadDeadline(d)
	return false
}

// setReadDeadline sets the socket's read deadline and notes it (readDL).
// Under mu.
func (s *sock) setReadDeadline(d time.Time) {
	s.readDL = d
	s.nc.SetReadDeadline(d)
}

// breaks reports whether raw, an error reply, breaks the stream
// (Config.BreaksStream).
func (s *sock) breaks(raw []byte) bool {
	f := s.c.b.cfg.BreaksStream
	return f != nil && f(raw)
}

// unframed returns what buf, the read buffer, holds past the part of
// the head's reply already framed (all of it when nothing is in flight).
// Reader only.
func (s *sock) unframed(buf []byte) []byte {
	if len(s.inflight) > 0 && s.st.Off <= len(buf) {
		return buf[s.st.Off:]
	}
	return buf
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
