package backend

import (
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"shardproxy/codec"
)

// A long value in a reply a client reads as it is (a one-key get's; see
// Call.Splice) need not pass through the proxy's memory: the socket
// splices it from the server's socket into a pipe (splice(2)), and the
// client's writer splices it from the pipe into the client's socket
// (Spliced.SpliceTo). The kernel moves references to the pages it
// already holds; reading the value and writing it again copied it twice,
// which was most of what the proxy spent on a 100 KB get.
//
// The reader frames the reply as before, but in three parts: the header
// and the first bytes of the value, read as usual; the rest of the value,
// spliced; the trailer, read as usual and checked to be what the header
// announced (codec.Splicer). The call completes once the trailer is in,
// so a reply whose trailer is wrong fails the socket as before.
//
// Pipes are few and reused: at most maxPipes exist, each holding up to
// pipeSize bytes, however small the server's packets (a pipe holds a
// bounded number of page pieces). A reply that finds none free, or a
// value outside [spliceMin, spliceMax], is read as usual.
const (
	spliceMin = 32 << 10  // fewer value bytes still to come are read
	spliceMax = 256 << 10 // more are read: a pipe must hold them all
	maxPipes  = 32
	// MaxClientPipes is how many pipes one client's replies may hold
	// (Call.Pipes).
	MaxClientPipes = 8
)

// pipeSize is the size each new pipe is given (F_SETPIPE_SZ): a variable
// only for the test of a pipe too small for its value.
var pipeSize = 1 << 20

// pipe is a pipe's two ends.
type pipe struct{ r, w int }

// pipes is the pool of pipes not in use, and how many exist.
var pipes struct {
	mu   sync.Mutex
	free []*pipe
	open int
}

// splicedReplies counts the replies whose value was spliced (SplicedReplies).
var splicedReplies atomic.Int64

// SplicedReplies returns how many replies, since the process started,
// had their value spliced from a server's socket instead of read.
func SplicedReplies() int64 { return splicedReplies.Load() }

// getPipe returns an empty pipe, or nil when maxPipes are in use or the
// system refuses a new one.
func getPipe() *pipe {
	pipes.mu.Lock()
	defer pipes.mu.Unlock()
	if n := len(pipes.free); n > 0 {
		p := pipes.free[n-1]
		pipes.free = pipes.free[:n-1]
		return p
	}
	if pipes.open >= maxPipes {
		return nil
	}
	p := newPipe()
	if p != nil {
		pipes.open++
	}
	return p
}

// putPipe takes back p: empty, it is reused; with bytes left in it (its
// reply was never written), it is closed.
func putPipe(p *pipe, empty bool) {
	pipes.mu.Lock()
	defer pipes.mu.Unlock()
	if empty {
		pipes.free = append(pipes.free, p)
		return
	}
	p.close()
	pipes.open--
}

// Spliced is the part of a reply's value that waits in a pipe (see
// Call.Spliced). The reply is Reply.Raw, then the Len bytes in the pipe,
// then After.
type Spliced struct {
	p     *pipe
	n     int           // bytes in the pipe
	held  *atomic.Int32 // the client's count it is in (Call.Pipes), or nil
	After string        // the reply's last bytes, after the value
}

// Len is how many bytes of the value wait in the pipe.
func (sp *Spliced) Len() int { return sp.n }

// SpliceOut moves the bytes in the pipe to the socket fd, a non-blocking
// one, until it takes no more. It reports whether the pipe is empty;
// Len counts what is left. Call it inside the socket's RawConn.Write.
func (sp *Spliced) SpliceOut(fd int) (bool, error) {
	for sp.n > 0 {
		n, err := splice(sp.p.r, fd, sp.n, true) // the reply's After follows
		switch err {
		case nil:
			sp.n -= n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false, nil
		default:
			return false, os.NewSyscallError("splice", err)
		}
	}
	return true, nil
}

// AppendTo appends the bytes still in the pipe to dst, emptying it: the
// rest of a reply that waits in memory for a slow client.
func (sp *Spliced) AppendTo(dst []byte) ([]byte, error) {
	dst = slices.Grow(dst, sp.n)
	for sp.n > 0 {
		n, err := syscall.Read(sp.p.r, dst[len(dst):len(dst)+sp.n])
		switch {
		case err == syscall.EINTR:
			continue
		case err == nil && n == 0:
			err = io.ErrUnexpectedEOF // the pipe holds less than counted
		}
		if err != nil {
			return dst, os.NewSyscallError("read", err)
		}
		dst = dst[:len(dst)+n]
		sp.n -= n
	}
	return dst, nil
}

// release gives the pipe back.
func (sp *Spliced) release() {
	putPipe(sp.p, sp.n == 0)
	if sp.held != nil {
		sp.held.Add(-1)
	}
	*sp = Spliced{}
}

// splicing is the reply a socket is splicing, the head call's.
type splicing struct {
	call *Call // nil: none
	left int   // value bytes still to move from the socket
}

// errCannotSplice reports that the value must be read after all: the
// pipe is full, or the socket refuses to splice.
var errCannotSplice = errors.New("cannot splice")

// startSplice decides whether the reply to call, the head's, whose first
// bytes are reply and whose length is need, has its value spliced, and if
// so takes a pipe for it. The caller then gives reply to the call.
func (s *sock) startSplice(reply []byte, call *Call, need int) bool {
	if !call.Splice || call.joined || s.raw == nil || s.c.b.splicer == nil || len(s.run) > 0 {
		return false
	}
	data, size, tail, ok := s.c.b.splicer.SpliceSpan(reply, call.Req)
	if !ok || data+size+len(tail) != need {
		return false
	}
	left := size - (len(reply) - data)
	if left < spliceMin || left > spliceMax {
		return false
	}
	if call.Pipes != nil && call.Pipes.Add(1) > MaxClientPipes {
		call.Pipes.Add(-1)
		return false
	}
	p := getPipe()
	if p == nil {
		if call.Pipes != nil {
			call.Pipes.Add(-1)
		}
		return false
	}
	call.body = Spliced{p: p, held: call.Pipes, After: tail}
	s.spl = splicing{call: call, left: left}
	return true
}

// spliceIn moves the value's bytes from the socket to the pipe, waiting
// (under the read deadline) for them to arrive. errCannotSplice means
// they must be read instead (unsplice).
func (s *sock) spliceIn() error {
	r := s.raw
	r.spl = &s.spl
	err := r.rc.Read(r.spliceFn)
	rerr := r.rerr
	r.spl, r.rerr = nil, nil
	if err == nil {
		err = rerr
	}
	return err
}

// doSplice is rawConn's splice callback (spliceIn).
func (r *rawConn) doSplice(fd uintptr) bool {
	sp := r.spl
	body := &sp.call.body
	waiting := false // the socket held bytes at the last EAGAIN
	for sp.left > 0 {
		n, err := splice(int(fd), body.p.w, sp.left, false)
		switch err {
		case nil:
			if n == 0 {
				r.rerr = io.EOF
				return true
			}
			sp.left -= n
			body.n += n
			waiting = false
		case syscall.EINTR:
		case syscall.EAGAIN:
			// Nothing to move, or no room in the pipe: a full pipe with
			// bytes waiting would never be woken for. Bytes that arrive
			// just after the splice look the same, so only a second
			// EAGAIN with bytes waiting before it says the pipe is full.
			if unread(int(fd)) == 0 {
				return false
			}
			if waiting {
				r.rerr = errCannotSplice
				return true
			}
			waiting = true
		case syscall.EINVAL, syscall.ENOSYS:
			r.rerr = errCannotSplice
			return true
		default:
			r.rerr = os.NewSyscallError("splice", err)
			return true
		}
	}
	return true
}

// unsplice gives up splicing the head's reply: what reached the pipe and
// the bytes before it go back to the read buffer, as if read, and the
// reply is framed as usual from its start.
func (s *sock) unsplice(r *reader) error {
	call, left := s.spl.call, s.spl.left
	s.spl = splicing{}
	call.Splice = false
	buf := GetBuffer(len(call.Reply.Raw) + call.body.n + left + len(call.body.After))
	buf = append(buf, call.Reply.Raw...)
	buf, err := call.body.AppendTo(buf)
	call.body.release()
	call.Reply.Raw = nil
	if call.owned != nil {
		PutBuffer(call.owned)
		call.owned = nil
	}
	if r.pooled {
		PutBuffer(r.buf)
	}
	r.buf, r.pooled, r.need = buf, true, 0
	s.st = codec.ReplyState{}
	return err
}

// dropSplice ends a splice the socket's death interrupted: the call fails
// with the rest in flight.
func (s *sock) dropSplice() {
	if call := s.spl.call; call != nil {
		s.spl = splicing{}
		call.body.release()
	}
}

// spliceDone frames the tail of the spliced reply at buf's start. It
// returns how many bytes the tail takes (0: not all here yet) and whether
// they are the tail the header announced.
func (s *sock) spliceDone(buf []byte) (int, bool) {
	tail := s.spl.call.body.After
	if len(buf) < len(tail) {
		return 0, tail[:len(buf)] == string(buf)
	}
	if string(buf[:len(tail)]) != tail {
		return 0, false
	}
	call := s.spl.call
	s.spl = splicing{}
	call.Reply.Kind = codec.ReplyOK
	splicedReplies.Add(1)
	return len(tail), true
}
