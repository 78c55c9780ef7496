package proxy

import "syscall"

// corkFD sets TCP_CORK on a TCP socket: the kernel holds partial segments
// until the cork is pulled or the socket is shut down for writing.
func corkFD(fd uintptr) {
	syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
}
