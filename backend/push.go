package backend

import (
	"errors"
	"net"
	"time"

	"shardproxy/codec"
)

// PushFunc receives what the server sends on a push-mode Dedicated
// (DedicatePush): each whole reply frame, in the order read, with err nil;
// frame is valid only until PushFunc returns. Once the socket has failed
// or closed (or could not be opened), it is called one last time with
// frame nil and err the *Error naming the cause. It runs on the socket's
// reader goroutine and must not block, nor close the Dedicated.
type PushFunc func(frame []byte, err error)

// DedicatePush returns a new dedicated socket slot of b in push mode, or
// nil when b is closed: a Redis connection in subscribed mode, where the
// server sends frames no request asked for and a request may be answered
// by many frames (SUBSCRIBE a b c by three) or none the proxy can match.
// Calls sent on it complete once written, with an empty Reply, or with
// the error that kept them from the server; every frame the server sends
// goes to fn. There is no read timeout: a subscribed connection may stay
// silent for as long as it lives. Otherwise it is a Dedicated like
// Dedicate's: dialled once, closed with Close.
//
// Its handshake is RESP2's whatever the protocol of the client it
// serves: a subscribed connection carries only the (un)subscribe
// commands, whose frames a RESP3 client gets as push frames made from
// RESP2's (the proxy's resp dialect), so one kind of socket and one
// reading of its frames serve both, and a client that switches protocol
// while subscribed keeps its connections.
func (b *Backend) DedicatePush(fn PushFunc) *Dedicated {
	d := b.Dedicate(0)
	if d != nil {
		d.c.push = fn
	}
	return d
}

// writePush writes batch on a push-mode socket and completes its calls:
// nothing is handed to the reader, whose frames go to the PushFunc. false
// when the socket died first, as write.
func (s *sock) writePush(batch []*Call, bufs net.Buffers) (net.Buffers, bool) {
	b := s.c.b
	s.mu.Lock()
	if s.dead.Load() {
		s.mu.Unlock()
		return bufs[:0], false
	}
	s.writing = true
	s.mu.Unlock()
	for _, call := range batch {
		bufs = append(bufs, call.Req.Wire)
	}
	err := s.writeOut(bufs, time.Time{})
	b.stats.InQueue.Add(-int64(len(batch)))
	cause := Cause(0)
	if err != nil {
		cause = s.kill(CauseWriting, true)
	}
	for _, call := range batch {
		if cause != 0 {
			b.finish(call, cause)
			continue
		}
		call.Reply = codec.Reply{}
		call.Done(call)
	}
	clear(bufs)
	return bufs[:0], true
}

// deliverPush frames every whole reply in r.buf and hands it to the
// PushFunc. It returns false when the socket is dead.
func (s *sock) deliverPush(r *reader) bool {
	if s.dead.Load() {
		return false
	}
	push := s.c.push
	d := s.c.b.cfg.Dialect
	buf := r.buf
	start := 0
	r.need = 0
	for start < len(buf) {
		n, _, err := d.ResumeReply(buf[start:], nil, &s.st)
		if err != nil {
			if !errors.Is(err, codec.ErrIncomplete) {
				s.kill(CauseParsing, true)
				return false
			}
			r.need = codec.Needed(err)
			break
		}
		s.st = codec.ReplyState{}
		s.c.b.stats.Responses.Add(1)
		s.c.b.stats.ResponseBytes.Add(int64(n))
		push(buf[start:start+n], nil)
		start += n
	}
	// The unfinished frame moves to the front; its ReplyState holds.
	r.buf = buf[:copy(buf, buf[start:])]
	return true
}

// pushGone tells a push-mode socket's PushFunc that the socket is gone.
func (s *sock) pushGone() {
	s.mu.Lock()
	cause := s.cause
	s.mu.Unlock()
	s.c.push(nil, errs[cause])
}
