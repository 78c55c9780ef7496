package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// probeLine dials addr, sends request and returns the first reply line
// without its line ending.
func probeLine(addr, request string) (string, error) {
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

// expectPrefix probes addr with request and wants a reply line starting with
// one of prefixes.
func expectPrefix(addr, request string, prefixes ...string) error {
	line, err := probeLine(addr, request)
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

// acceptsTCP reports whether something accepts connections on addr.
func acceptsTCP(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}
