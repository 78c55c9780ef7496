package backend

import (
	"syscall"
	"unsafe"
)

// StampRecv asks the kernel to note when each segment of the socket fd
// arrived (SO_TIMESTAMPNS), for RawReadStamped.
func StampRecv(fd int) error {
	return syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
}

// StampSpace is the control buffer RawReadStamped needs: one
// SCM_TIMESTAMPNS message.
const StampSpace = 32

// RawReadStamped is RawRead through recvmsg(2) on a socket StampRecv set
// up: it also returns when the kernel received the last bytes read, in
// nanoseconds since the Unix epoch (0 when the kernel gave no time).
// oob is its scratch, at least StampSpace bytes.
func RawReadStamped(fd int, p, oob []byte) (n int, at int64, err error) {
	if len(p) == 0 {
		return 0, 0, nil
	}
	iov := syscall.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	msg := syscall.Msghdr{Iov: &iov, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	r, _, e := syscall.RawSyscall(syscall.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), 0)
	if e != 0 {
		return 0, 0, e
	}
	return int(r), stampOf(oob[:msg.Controllen]), nil
}

// stampOf reads the SCM_TIMESTAMPNS message of a control buffer: the
// time in nanoseconds, 0 when there is none.
func stampOf(oob []byte) int64 {
	const hdr = syscall.SizeofCmsghdr
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		size := int(h.Len)
		if size < hdr || size > len(oob) {
			return 0
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && size >= hdr+int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[hdr]))
			return ts.Nano()
		}
		step := (size + 7) &^ 7
		if step >= len(oob) {
			return 0
		}
		oob = oob[step:]
	}
	return 0
}
