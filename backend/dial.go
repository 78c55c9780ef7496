package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"shardproxy/codec"
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

// connect dials and validates a new socket, or reports why it could not.
// A socket it returns has its reader running. A server that breaks the
// socket on the meta probe (HandshakeOptions.MetaProbe) rather than
// answer it is dialled once more without the probe, as a text server.
func (c *conn) connect() (*sock, Cause) {
	b := c.b
	if b.Bad() && !b.cfg.Reconnect { // under memcached's rule only retries dial a bad backend
		c.kickNext()
		return nil, CauseMarkedBad
	}
	deadline := time.Now().Add(b.cfg.ConnectTimeout)
	o := b.cfg.Handshake
	if c.proto != 0 {
		o.Proto = c.proto
	}
	var (
		nc  net.Conn
		hs  shake
		err error
	)
	for {
		nc, err = dial(b.cfg, deadline)
		c.kickNext() // connected (or not): the next slot's turn
		if err != nil {
			return nil, CauseConnecting
		}
		hs = handshake(nc, b.cfg.Dialect, o, b.validateBy(deadline))
		if hs.ok {
			break
		}
		nc.Close()
		if !hs.probeBroke || !o.MetaProbe {
			return nil, hs.cause
		}
		o.MetaProbe = false
		deadline = time.Now().Add(b.cfg.ConnectTimeout) // the probe may have run out the first
	}
	if b.cfg.Replay != nil && !b.replay(nc) {
		nc.Close()
		return nil, CauseReplay
	}
	if b.cfg.Reconnect {
		b.validated()
	}
	b.learnVersion(hs.version)
	b.learnMeta(hs.meta)
	s := newSock(c, nc)
	s.meta = hs.meta
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, CauseClosed
	}
	c.cur.Store(s)
	c.readers.Add(1)
	c.mu.Unlock()
	b.stats.Connections.Add(1)
	go s.readLoop()
	return s, 0
}

// validateBy returns the deadline of a new socket's validation, dialled
// by dialBy: under memcached's rule (Config.Reconnect), the read timeout
// from now, when set.
func (b *Backend) validateBy(dialBy time.Time) time.Time {
	if b.cfg.Reconnect && b.cfg.Timeout > 0 {
		return time.Now().Add(b.cfg.Timeout)
	}
	return dialBy
}

// shake is what a handshake found.
type shake struct {
	version    string // the server's version, when a reply told it
	meta       bool   // the server speaks the meta protocol (answered mn)
	ok         bool
	cause      Cause // why not ok
	probeBroke bool  // not ok: every reply but the meta probe's was OK, and the probe's never came whole
}

// handshake sends the dialect's validation requests and checks every
// reply. The server's version comes from a codec.VersionReader dialect;
// with o.MetaProbe, a well-framed reply other than OK to the last request
// (the probe) says the server speaks text only.
func handshake(nc net.Conn, d codec.Dialect, o codec.HandshakeOptions, deadline time.Time) shake {
	reqs := d.Handshake(o)
	if len(reqs) == 0 {
		return shake{ok: true}
	}
	probe := o.MetaProbe && !o.Meta
	hs := shake{meta: o.Meta || probe}
	vr, _ := d.(codec.VersionReader)
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(joinWire(reqs)); err != nil {
		return shake{cause: CauseWriting}
	}
	buf := make([]byte, 0, 512)
	for i, r := range reqs {
		probing := probe && i == len(reqs)-1
		n, kind, cause, ok := readHandshakeReply(nc, d, r, &buf)
		if !ok {
			return shake{cause: cause, probeBroke: probing}
		}
		switch {
		case kind == codec.ReplyOK:
		case probing:
			hs.meta = false
		case i == len(reqs)-1 && busy(d, buf[:n]): // up, running a long script
		default:
			return shake{cause: CauseBadValidate}
		}
		if vr != nil {
			if v, ok := vr.ReadVersion(r, buf[:n]); ok {
				hs.version = v
			}
		}
		buf = buf[:copy(buf, buf[n:])]
	}
	if len(buf) != 0 {
		return shake{cause: CauseBadValidate}
	}
	hs.ok = true
	return hs
}

// busy reports whether reply is d's busy reply (codec.BusyReader).
func busy(d codec.Dialect, reply []byte) bool {
	br, ok := d.(codec.BusyReader)
	return ok && br.Busy(reply)
}

// joinWire returns the requests' bytes, one after the other.
func joinWire(reqs []*codec.Request) []byte {
	var out []byte
	for _, r := range reqs {
		out = append(out, r.Wire...)
	}
	return out
}

// readHandshakeReply reads from nc into *buf until it holds the whole
// reply to r at its start, and returns the reply's length and kind; or,
// not ok, the cause: a reply that cannot be framed or passes 64 KB, or a
// failed read.
func readHandshakeReply(nc net.Conn, d codec.Dialect, r *codec.Request, buf *[]byte) (n int, kind codec.ReplyKind, cause Cause, ok bool) {
	b := *buf
	defer func() { *buf = b }()
	for {
		n, kind, err := d.ParseReply(b, r)
		if err == nil {
			return n, kind, 0, true
		}
		if !errors.Is(err, codec.ErrIncomplete) || len(b) >= 64<<10 {
			return 0, 0, CauseBadValidate, false
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := nc.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil && m == 0 {
			return 0, 0, CauseReadValidate, false
		}
	}
}
