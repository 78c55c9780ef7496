package backend

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// dial opens a socket to cfg.Addr by deadline: TCP, or a unix socket for an
// address with a '/'; with cfg.TLS set, the TLS handshake is done by
// deadline too.
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
	nc, err := d.DialContext(ctx, network, cfg.Addr)
	if err != nil || cfg.TLS == nil {
		return nc, err
	}
	tc := tls.Client(nc, clientTLS(cfg.TLS, network, cfg.Addr))
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		err = fmt.Errorf("backend: tls handshake: %w", err)
		tlsFailures.report(cfg, err)
		return nil, err
	}
	tlsFailures.report(cfg, nil)
	return tc, nil
}

// tlsFailures remembers each backend's last TLS handshake error so that a
// failure is logged when it starts or changes, not on every dial.
var tlsFailures = failureLog{last: map[string]string{}}

type failureLog struct {
	mu   sync.Mutex
	last map[string]string // backend name and address -> last error text
}

// report logs err (at Warn) when it differs from the backend's previous
// handshake result, and a recovery (at Info) when err is nil after a failure.
func (f *failureLog) report(cfg Config, err error) {
	key := cfg.Name + " " + cfg.Addr
	text := ""
	if err != nil {
		text = err.Error()
	}
	f.mu.Lock()
	prev := f.last[key]
	if text == "" {
		delete(f.last, key)
	} else {
		f.last[key] = text
	}
	f.mu.Unlock()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	switch {
	case text != "" && text != prev:
		log.Warn("backend tls handshake failed", "backend", cfg.Name, "addr", cfg.Addr, "err", err)
	case text == "" && prev != "":
		log.Info("backend tls handshake succeeded", "backend", cfg.Name, "addr", cfg.Addr)
	}
}

// clientTLS returns c, or a copy of it naming addr's host as the server
// when c names none, as crypto/tls.Dial does.
func clientTLS(c *tls.Config, network, addr string) *tls.Config {
	if c.ServerName != "" || c.InsecureSkipVerify || network != "tcp" {
		return c
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return c
	}
	c = c.Clone()
	c.ServerName = host
	return c
}
