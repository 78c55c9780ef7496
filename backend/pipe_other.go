//go:build !linux

package backend

import "syscall"

// Without splice(2), no reply is spliced: newPipe makes none.
func newPipe() *pipe { return nil }

func (p *pipe) close() {}

func splice(in, out, n int, more bool) (int, error) { return 0, syscall.ENOSYS }

func unread(fd int) int { return 0 }

// msgMore is 0: RawWritevMore is RawWritev.
const msgMore = 0

func sendmsgMore(fd int, v []syscall.Iovec) (uintptr, syscall.Errno) { return 0, syscall.ENOSYS }
