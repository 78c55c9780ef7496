package backend

import (
	"syscall"
	"unsafe"
)

// Linux's splice(2) flags and fcntl and ioctl numbers, which package
// syscall does not name.
const (
	spliceMove     = 0x1
	spliceNonblock = 0x2
	spliceMore     = 0x4
	fSetPipeSize   = 1031
	fionread       = 0x541b
)

// newPipe makes a non-blocking pipe that holds pipeSize bytes, or half as
// many, and so on down to 64 KiB (a system whose fs.pipe-max-size is
// smaller), or returns nil (no splicing for that reply) when the system
// refuses them all: a pipe left at the size a user over its pipe quota
// gets (two pages) would fill before nearly every value.
func newPipe() *pipe {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil
	}
	for size := pipeSize; ; size /= 2 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fds[0]), fSetPipeSize, uintptr(size)); e == 0 {
			return &pipe{r: fds[0], w: fds[1]}
		}
		if size <= 64<<10 {
			break
		}
	}
	syscall.Close(fds[0])
	syscall.Close(fds[1])
	return nil
}

func (p *pipe) close() {
	syscall.Close(p.r)
	syscall.Close(p.w)
}

// splice is splice(2) of at most n bytes from in to out, never waiting,
// through RawSyscall (see RawRead). more tells a socket out that more
// bytes follow at once (SPLICE_F_MORE): it holds a last part-filled
// segment for them instead of sending it alone.
func splice(in, out, n int, more bool) (int, error) {
	flags := uintptr(spliceMove | spliceNonblock)
	if more {
		flags |= spliceMore
	}
	m, _, e := syscall.RawSyscall6(syscall.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(n), flags)
	if e != 0 {
		return 0, e
	}
	return int(m), nil
}

// unread returns how many bytes the socket fd holds unread.
func unread(fd int) int {
	var n int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, uintptr(fd), fionread, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0
	}
	return int(n)
}

// msgMore is sendmsg(2)'s MSG_MORE (RawWritevMore).
const msgMore = syscall.MSG_MORE

// sendmsgMore is sendmsg(2) of v with MSG_MORE, through RawSyscall.
func sendmsgMore(fd int, v []syscall.Iovec) (uintptr, syscall.Errno) {
	h := syscall.Msghdr{Iov: &v[0]}
	setLen(&h.Iovlen, len(v)) // its type is the word's size
	n, _, e := syscall.RawSyscall(syscall.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&h)), msgMore)
	return n, e
}

func setLen[T uint32 | uint64](p *T, n int) { *p = T(n) }
