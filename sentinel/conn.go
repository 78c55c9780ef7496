package sentinel

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Auth is what a connection sends AUTH with; a zero Auth sends nothing.
type Auth struct {
	// Username is the ACL user; "" is the default user (AUTH password).
	Username string
	// Password is sent with AUTH when not "".
	Password string
}

// conn is one connection to a Sentinel or a server, used by one goroutine
// at a time (the subscriber's pinger only writes).
type conn struct {
	addr string
	nc   net.Conn
	r    *bufio.Reader
	wbuf []byte
}

// dial connects to addr within timeout (TLS when tc is set: a copy of tc
// naming addr's host when it names no server) and authenticates. An addr
// starting with '/' is a unix socket (a replica's, as a pool lists it).
func dial(addr string, auth Auth, tc *tls.Config, timeout time.Duration) (*conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tc = clientTLS(tc, addr)
		t := tls.Client(nc, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("sentinel: tls handshake: %w", err)
		}
		nc = t
	}
	c := &conn{addr: addr, nc: nc, r: bufio.NewReaderSize(nc, maxLine+64)}
	if auth.Password != "" {
		args := []string{"AUTH", auth.Password}
		if auth.Username != "" {
			args = []string{"AUTH", auth.Username, auth.Password}
		}
		v, err := c.do(timeout, args...)
		if err == nil {
			err = v.err()
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// clientTLS returns tc, or a copy naming addr's host as the server when tc
// names none and verifies.
func clientTLS(tc *tls.Config, addr string) *tls.Config {
	if tc.ServerName != "" || tc.InsecureSkipVerify {
		return tc
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return tc
	}
	c := tc.Clone()
	c.ServerName = host
	return c
}

// do sends one command and reads its reply within timeout. An error reply
// is a value, not an error: callers decide.
func (c *conn) do(timeout time.Duration, args ...string) (value, error) {
	if err := c.send(timeout, args...); err != nil {
		return value{}, err
	}
	return c.read(time.Now().Add(timeout))
}

// send writes one command within timeout.
func (c *conn) send(timeout time.Duration, args ...string) error {
	c.wbuf = appendCommand(c.wbuf[:0], args...)
	if err := c.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := c.nc.Write(c.wbuf)
	return err
}

// read reads one reply by deadline (zero: none).
func (c *conn) read(deadline time.Time) (value, error) {
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return value{}, err
	}
	return readValue(c.r)
}

func (c *conn) close() { c.nc.Close() }

// masterAddr asks a Sentinel for name's master: "ip:port", or ErrNoMaster
// for a null reply (the Sentinel does not monitor it).
func (c *conn) masterAddr(name string, timeout time.Duration) (string, error) {
	v, err := c.do(timeout, "SENTINEL", "get-master-addr-by-name", name)
	if err != nil {
		return "", err
	}
	if err := v.err(); err != nil {
		return "", err
	}
	if v.null {
		return "", ErrNoMaster
	}
	f, ok := v.strings()
	if !ok || len(f) != 2 {
		return "", badReply("get-master-addr-by-name: want [ip, port]")
	}
	return joinAddr(f[0], f[1])
}

// role asks a server for ROLE's first element: "master", "slave",
// "sentinel".
func (c *conn) role(timeout time.Duration) (string, error) {
	v, err := c.do(timeout, "ROLE")
	if err != nil {
		return "", err
	}
	if err := v.err(); err != nil {
		return "", err
	}
	role, ok := v.arrayHead()
	if !ok {
		return "", badReply("ROLE: want an array starting with the role")
	}
	return role, nil
}

// joinAddr checks ip and port as a Sentinel gives them and joins them.
func joinAddr(ip, port string) (string, error) {
	if ip == "" || len(ip) > 255 {
		return "", badReply("address %q", ip)
	}
	for i := 0; i < len(ip); i++ {
		// A host as Sentinel names it: no brackets (JoinHostPort adds
		// them to an IPv6 address; "[" alone would make "[:1").
		if c := ip[i]; c <= ' ' || c >= 0x7f || c == '/' || c == '[' || c == ']' {
			return "", badReply("address %q", ip)
		}
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return "", badReply("port %q", port)
	}
	return net.JoinHostPort(ip, port), nil
}
