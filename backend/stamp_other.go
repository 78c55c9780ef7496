//go:build !linux

package backend

import "syscall"

// StampRecv is Linux's alone (SO_TIMESTAMPNS): elsewhere it fails, and
// the reader reads without arrival times.
func StampRecv(fd int) error { return syscall.ENOSYS }

// StampSpace is the control buffer RawReadStamped needs.
const StampSpace = 32

// RawReadStamped is RawRead, with no time (StampRecv never succeeds).
func RawReadStamped(fd int, p, oob []byte) (n int, at int64, err error) {
	n, err = RawRead(fd, p)
	return n, 0, err
}
