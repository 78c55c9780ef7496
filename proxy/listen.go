package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"syscall"

	"shardproxy/config"
)

// listen binds a pool's listener at addr (the pool's listen, or one of its
// listen_tags) with bind (Options.Listen, or Bind): TCP or a unix socket
// (with its permissions). A pool with reuseport binds its own TCP socket
// with SO_REUSEPORT instead: such a port is shared by design, so a new
// process binds beside the old one rather than taking its socket over. The
// listen backlog is the kernel's (net.core.somaxconn): Go does not expose
// listen(2)'s argument.
func listen(pc *config.Pool, addr config.Listen, bind func(network, addr string) (net.Listener, error)) (net.Listener, error) {
	if addr.Network == "unix" {
		ln, err := bind("unix", addr.Addr)
		if err != nil {
			return nil, err
		}
		if addr.Perm != 0 {
			if err := os.Chmod(addr.Addr, addr.Perm); err != nil {
				ln.Close()
				return nil, err
			}
		}
		return ln, nil
	}
	if !pc.Reuseport {
		return bind("tcp", addr.Addr)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr.Addr)
}

// Bind is what binds a listener when Options.Listen is nil: net.Listen,
// after removing a stale unix socket file left by an earlier run (it would
// make bind fail). A hook that hands sockets over calls it for the
// addresses it has no socket for.
func Bind(network, addr string) (net.Listener, error) {
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(addr)
		}
	}
	return net.Listen(network, addr)
}

// withTLS wraps ln so that each accepted connection is served over TLS when
// config returns a configuration, and plain when it returns nil. config is
// asked per connection, so a reload that keeps the listener but adds,
// removes or rotates the pool's certificate takes effect for new clients.
// The TLS handshake runs on the session's first read or write, not in the
// accept loop.
func withTLS(ln net.Listener, config func() *tls.Config) net.Listener {
	return tlsListener{Listener: ln, config: config}
}

type tlsListener struct {
	net.Listener
	config func() *tls.Config
}

// Accept implements net.Listener.
func (l tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if c := l.config(); c != nil {
		return tls.Server(nc, c), nil
	}
	return nc, nil
}

// tlsConfig returns the TLS configuration of the pool l serves now.
func (l *listener) tlsConfig() *tls.Config {
	if p := l.pool.Load(); p != nil {
		return p.tls
	}
	return nil
}
