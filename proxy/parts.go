package proxy

import (
	"errors"

	"shardproxy/codec"
)

// This file is the session's side of a client request its parser cuts
// into parts as it streams in (codec.PartParser: a memcache get line of
// any length). Each part is a request of its own, routed and written in
// order; the writer shows the client each PartMore's reply without its
// terminator (codec.PartReplier) and, once a part's reply is an error,
// nothing more of that request. The session's limits hold per part:
// maxHeld reply bytes waiting for the client (the reader cuts no part
// while more wait, unless its buffer is full),
// buffer_memory_limit and active_req_limit per part, max_keys over the
// parts so far; and at most partsAhead parts are in flight.

// partLine is the reader's state of the request being cut into parts.
type partLine struct {
	keys int  // the keys of its parts so far
	dead bool // a part was refused: its reply has ended, later parts go nowhere
}

// add counts p's keys in its request's, and returns the number the
// pool's max_keys applies to; false when p is a part of a request whose
// reply has ended: p is answered with nothing.
func (l *partLine) add(p *pending) (int, bool) {
	if p.Req.Part == codec.PartWhole {
		return len(p.Req.Keys), true
	}
	if l.dead {
		p.Answer(p.Out())
		return 0, false
	}
	l.keys += len(p.Req.Keys)
	return l.keys, true
}

// done ends the request when its last part is queued.
func (l *partLine) done(part codec.Part) {
	if part == codec.PartLast {
		*l = partLine{}
	}
}

// inPart reports whether the parser is cutting a request into parts: the
// next bytes are its next part.
func (s *session) inPart() bool { return s.parts != nil && s.parts.InPart() }

// partsAhead bounds the parts of a client's request in flight and not
// yet written: the replies of a part are as big as its keys' values, and
// the parts of one request would otherwise be cut as fast as the client
// sends them (maxPending of them), before their replies count in held.
const partsAhead = 4

// partRoom reports whether another part may go: the client reads its
// replies, and few parts are ahead of it.
func (s *session) partRoom() bool {
	return s.held.Load() <= maxHeld && s.partsOut.Load() < partsAhead
}

// partWait blocks the reader until another part may go (or nothing is in
// flight), before it routes a part.
func (s *session) partWait() {
	if !s.partRoom() {
		s.waitFor(func() bool { return s.partRoom() || s.outstanding.Load() == 0 })
	}
}

// cutPart is called when ParseRequest found buf[start:] incomplete (err):
// it cuts a part of a long request there if the parser can, unless the
// client is behind (partRoom) and the read buffer has room: then the
// reader reads more of the request first (a client may well send a whole
// get line before it reads a byte of the reply, and memcached reads the
// whole line first). Once the buffer is full the part is cut and the
// reader waits for the client to read (parse's partWait), as for any
// request.
//
// When nothing is cut, err itself is returned: it may announce the
// request's length (a storage request's value on its way), which
// ParsePart's plain ErrIncomplete does not. Without it the reader would
// grow its buffer by doubling, and the parser could not copy the request
// into a recycled buffer.
func (s *session) cutPart(buf []byte, start int, p *pending, err error) (int, error) {
	full := start == 0 && len(buf) == cap(buf) && cap(buf) >= s.maxBuffer()
	if !full && !s.partRoom() {
		return 0, err
	}
	n, perr := s.parts.ParsePart(buf[start:], &p.Req)
	if errors.Is(perr, codec.ErrIncomplete) && codec.Needed(perr) == 0 {
		return 0, err
	}
	return n, perr
}

// errorPart is the Part of a rejected request: inside a request being cut
// into parts (inPart: the parser was in one before), or starting one (it
// is in one now: the rejection drops the rest of it), the error ends that
// request's reply.
func (s *session) errorPart(inPart bool) codec.Part {
	switch {
	case s.inPart():
		return codec.PartMore
	case inPart:
		return codec.PartLast
	}
	return codec.PartWhole
}

// appendPart appends what the client sees of the reply to p, a part of
// a longer request: nothing once an earlier part's reply ended it, a
// PartMore's reply without its terminator. Writer only (w.partEnded).
func (s *session) appendPart(out []byte, p *pending) []byte {
	w := &s.w
	if w.partEnded {
		w.partEnded = p.Req.Part != codec.PartLast
		return out
	}
	mark := len(out)
	out = s.appendReply(out, p)
	if p.Req.Part == codec.PartLast {
		return out
	}
	if pr, ok := p.pool.dialect.(codec.PartReplier); ok {
		n, ended := pr.TrimPart(out[mark:])
		out = out[:mark+n]
		w.partEnded = ended
	}
	return out
}
