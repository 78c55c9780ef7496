package backend

import (
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// RawRead and RawWrite are read(2) and write(2) on a non-blocking socket
// that do not tell the scheduler about the system call: such a call never
// blocks, so its P need not be handed over.
//
// Through syscall.Read, every call marks its P as in a system call. The
// runtime's monitor thread, when it finds a P so marked on two of its
// checks in a row, hands the P to another thread (waking one), and while
// it keeps finding such Ps it checks every 20 µs instead of backing off to
// 10 ms. A proxy spends most of its time in short socket calls, so it kept
// the monitor busy and threads trading Ps: on the rig, 0.06-0.08 monitor
// sleeps per request at pipeline 1 (none with these) and 16-45% more CPU
// per request.
//
// Use them only on non-blocking sockets (every net.Conn's), inside the
// socket's RawConn.Read or RawConn.Write.
func RawRead(fd int, p []byte) (int, error) { return rawIO(syscall.SYS_READ, fd, p) }

// RawWrite is write(2); see RawRead.
func RawWrite(fd int, p []byte) (int, error) { return rawIO(syscall.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) (trap) of p through RawSyscall.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawConn is a socket's RawConn with the callbacks its reader and writer
// pass to it, made once: a closure per call would be an allocation per
// call.
type rawConn struct {
	rc syscall.RawConn

	rbuf   []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool

	wbufs   [][]byte
	iov     []syscall.Iovec
	werr    error
	wtry    bool // doWrite returns at EAGAIN, setting wagain, instead of waiting
	wagain  bool
	writeFn func(fd uintptr) bool

	spl      *splicing
	spliceFn func(fd uintptr) bool
}

// newRawConn returns nc's raw socket, or nil when it has none (TLS).
func newRawConn(nc any) *rawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawConn{rc: rc}
	r.readFn = r.doRead
	r.writeFn = r.doWrite
	r.spliceFn = r.doSplice
	return r
}

// read is net.Conn's Read through RawRead: it waits for readiness (and
// honours the read deadline) when the socket has nothing.
func (r *rawConn) read(p []byte) (int, error) {
	r.rbuf = p
	err := r.rc.Read(r.readFn)
	n, rerr := r.rn, r.rerr
	r.rbuf, r.rerr = nil, nil
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawConn) doRead(fd uintptr) bool {
	for {
		n, err := RawRead(int(fd), r.rbuf)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case nil:
			r.rn, r.rerr = n, nil
		default:
			r.rn, r.rerr = 0, os.NewSyscallError("read", err)
		}
		return true
	}
}

// writeAll writes every buffer of bufs with writev(2) through RawSyscall,
// waiting for writability (and honouring the write deadline) when the
// socket is full.
//
// The first pass does not wait: when the socket takes everything (nearly
// always), no deadline is touched. When it fills up, setDeadline sets
// deadline (zero: none) for the wait and clears it after, so the socket
// never keeps a deadline that a later write could find passed.
func (r *rawConn) writeAll(bufs [][]byte, deadline time.Time, setDeadline func(time.Time) error) error {
	r.wbufs, r.wtry = bufs, true
	err := r.rc.Write(r.writeFn)
	r.wtry = false
	if err == nil && r.werr == nil && r.wagain {
		r.wagain = false
		setDeadline(deadline)
		err = r.rc.Write(r.writeFn)
		setDeadline(time.Time{})
	}
	werr := r.werr
	r.wbufs, r.werr, r.iov = nil, nil, r.iov[:0]
	if err == nil {
		err = werr
	}
	return err
}

// maxIovec is the most buffers one writev(2) takes (IOV_MAX).
const maxIovec = 1024

func (r *rawConn) doWrite(fd uintptr) bool {
	for len(r.wbufs) > 0 {
		n, err := RawWritev(int(fd), r.wbufs, &r.iov)
		switch err {
		case nil:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if r.wtry {
				r.wagain = true // writeAll sets the deadline, then waits
				return true
			}
			return false // wait until the socket takes more
		default:
			r.werr = os.NewSyscallError("writev", err)
			return true
		}
		// Drop what was written, and the empty buffers after it.
		for len(r.wbufs) > 0 && n >= len(r.wbufs[0]) {
			n -= len(r.wbufs[0])
			r.wbufs = r.wbufs[1:]
		}
		if len(r.wbufs) > 0 {
			r.wbufs[0] = r.wbufs[0][n:]
		}
	}
	return true
}

// RawWritev is one writev(2) of bufs (empty ones skipped, at most
// maxIovec of the others) on a non-blocking socket, through RawSyscall
// (see RawRead): it writes what the socket takes now and returns how much.
// iov is the caller's scratch, reused from call to call.
func RawWritev(fd int, bufs [][]byte, iov *[]syscall.Iovec) (int, error) {
	return rawWritev(fd, bufs, iov, false)
}

// RawWritevMore is RawWritev on a socket, telling it that more bytes
// follow at once (sendmsg(2) with MSG_MORE, where the system has it): it
// holds a last part-filled segment for them instead of sending it alone.
// A spliced reply's head goes so, and its value, so that the three parts
// leave in as few segments as their size needs.
func RawWritevMore(fd int, bufs [][]byte, iov *[]syscall.Iovec) (int, error) {
	return rawWritev(fd, bufs, iov, true)
}

func rawWritev(fd int, bufs [][]byte, iov *[]syscall.Iovec, more bool) (int, error) {
	v := (*iov)[:0]
	for _, b := range bufs {
		if len(v) == maxIovec {
			break
		}
		if len(b) > 0 {
			v = append(v, syscall.Iovec{Base: &b[0], Len: uint64(len(b))})
		}
	}
	*iov = v
	if len(v) == 0 {
		return 0, nil
	}
	var n uintptr
	var e syscall.Errno
	if more && msgMore != 0 {
		n, e = sendmsgMore(fd, v)
	} else {
		n, _, e = syscall.RawSyscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
	}
	clear(v) // the scratch must not keep the buffers alive
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
