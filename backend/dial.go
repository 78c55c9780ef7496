package backend

import (
	"context"
	"net"
	"strings"
	"time"
)

// dial opens a socket to cfg.Addr by deadline: TCP, or a unix socket for an
// address with a '/'.
func dial(cfg Config, deadline time.Time) (net.Conn, error) {
	network := "tcp"
	if strings.Contains(cfg.Addr, "/") {
		network = "unix"
	}
	d := net.Dialer{Deadline: deadline, KeepAlive: -1}
	if cfg.TCPKeepalive {
		d.KeepAlive = 0 // Go's default keepalive period
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return d.DialContext(ctx, network, cfg.Addr)
}
