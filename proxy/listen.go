package proxy

import (
	"context"
	"net"
	"os"
	"syscall"

	"shardproxy/config"
)

// listen binds a pool's listener: TCP (with SO_REUSEPORT when asked) or a
// unix socket (with its permissions). The listen backlog is the kernel's
// (net.core.somaxconn): Go does not expose listen(2)'s argument.
func listen(pc *config.Pool) (net.Listener, error) {
	if pc.Listen.Network == "unix" {
		// A stale socket file from an earlier run would make bind fail.
		if fi, err := os.Lstat(pc.Listen.Addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(pc.Listen.Addr)
		}
		ln, err := net.Listen("unix", pc.Listen.Addr)
		if err != nil {
			return nil, err
		}
		if pc.Listen.Perm != 0 {
			if err := os.Chmod(pc.Listen.Addr, pc.Listen.Perm); err != nil {
				ln.Close()
				return nil, err
			}
		}
		return ln, nil
	}
	lc := net.ListenConfig{}
	if pc.Reuseport {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	return lc.Listen(context.Background(), "tcp", pc.Listen.Addr)
}
