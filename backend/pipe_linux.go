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
// through RawSyscall (see RawRead).
func splice(in, out, n int) (int, error) {
	m, _, e := syscall.RawSyscall6(syscall.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(n),
		spliceMove|spliceNonblock)
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
