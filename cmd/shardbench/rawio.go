package main

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// The generator's socket calls go through RawSyscall, as the proxy's do
// (see shardproxy's backend.RawRead; this tool imports none of the
// proxy's packages). A non-blocking socket call never blocks, and through
// syscall.Read each one marked its P as in a system call, which kept the
// runtime's monitor thread waking every 20 µs and handing Ps between
// threads: CPU the generator took from the servers it measures.

// rawRead is read(2) without the scheduler's system-call accounting.
func rawRead(fd int, p []byte) (int, syscall.Errno) { return rawIO(syscall.SYS_READ, fd, p) }

// rawWrite is write(2) without the scheduler's system-call accounting.
func rawWrite(fd int, p []byte) (int, syscall.Errno) { return rawIO(syscall.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) (trap) of p through RawSyscall.
func rawIO(trap uintptr, fd int, p []byte) (int, syscall.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}

// rawReader reads a socket through its RawConn: it waits for readiness
// (and the deadline) in the runtime's poller and reads with rawRead.
type rawReader struct {
	rc     syscall.RawConn
	p      []byte
	n      int
	err    error
	readFn func(fd uintptr) bool // made once: a closure per Read would allocate
}

// newReader returns a reader of conn through rc, its raw socket, that
// skips the scheduler's system-call accounting; conn itself when rc is nil.
func newReader(conn net.Conn, rc syscall.RawConn) io.Reader {
	if rc == nil {
		return conn
	}
	r := &rawReader{rc: rc}
	r.readFn = r.doRead
	return r
}

func (r *rawReader) Read(p []byte) (int, error) {
	r.p = p
	err := r.rc.Read(r.readFn)
	n, rerr := r.n, r.err
	r.p, r.err = nil, nil
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawReader) doRead(fd uintptr) bool {
	for {
		n, e := rawRead(int(fd), r.p)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			r.n, r.err = n, nil
		default:
			r.n, r.err = 0, os.NewSyscallError("read", e)
		}
		return true
	}
}
