package proc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// probeTimeout bounds one probe's dial, write and read.
const probeTimeout = time.Second

// AcceptsTCP reports whether something accepts connections on addr: the
// readiness of a server that answers nothing unasked (nutcracker,
// shardproxy).
func AcceptsTCP(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// MemcachedReady wants memcached's answer to "version".
func MemcachedReady(addr string) error { return Expect(addr, "version\r\n", "VERSION ") }

// RedisReady wants redis-server's answer to PING: "+PONG", or "-NOAUTH"
// from a server started with --requirepass.
func RedisReady(addr string) error { return Expect(addr, "PING\r\n", "+PONG", "-NOAUTH") }

// Expect dials addr, sends request and wants a first reply line starting
// with one of prefixes. Each step is bounded by a second.
func Expect(addr, request string, prefixes ...string) error {
	line, err := firstLine(addr, request)
	if err != nil {
		return err
	}
	for _, p := range prefixes {
		if strings.HasPrefix(line, p) {
			return nil
		}
	}
	return fmt.Errorf("unexpected reply %q to %q", line, strings.TrimSpace(request))
}

// firstLine dials addr, sends request and returns the first reply line
// without its line ending.
func firstLine(addr, request string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := io.WriteString(conn, request); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
