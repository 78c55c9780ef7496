package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ketamaPort is the port that twemproxy, for libmemcached compatibility,
// leaves out of a server's node name.
const ketamaPort = 11211

const (
	listenForms = `want "host:port" or "/path/to/socket [perm]"`
	serverForms = `want "host:port:weight [name]" or "/path/to/socket:weight [name]"`
)

// parseListen reads a listen value: "host:port", split at the last ':', or an
// absolute unix socket path optionally followed by a space and octal
// permission bits ("/tmp/gamma 0666"). It returns a message on failure.
func parseListen(s string) (Listen, string) {
	if s == "" {
		return Listen{}, "is empty; " + listenForms
	}
	if s[0] == '/' {
		path, perm, hasPerm := cutLast(s, ' ')
		if !hasPerm {
			return Listen{Network: "unix", Addr: s}, ""
		}
		m, ok := parsePerm(perm)
		if !ok {
			return Listen{}, fmt.Sprintf("invalid permission %q in %q; want octal digits, at most 0777", perm, s)
		}
		return Listen{Network: "unix", Addr: path, Perm: m}, ""
	}
	host, port, ok := cutLast(s, ':')
	if !ok {
		return Listen{}, fmt.Sprintf("%q has no port; %s", s, listenForms)
	}
	// Port 0 (a shardproxy extension; twemproxy rejects it) asks the kernel
	// for a free port, which tests and ad-hoc runs use.
	n, ok := parseDecimal(port, 0, 65535)
	if !ok {
		return Listen{}, fmt.Sprintf("invalid port %q in %q; want 0 to 65535", port, s)
	}
	h, ok := parseHost(host, true)
	if !ok {
		return Listen{}, fmt.Sprintf("invalid host %q in %q", host, s)
	}
	return Listen{Network: "tcp", Addr: net.JoinHostPort(h, strconv.Itoa(n))}, ""
}

// parseServer reads one servers line the way twemproxy's conf_add_server
// does, from the end: the name after the last space (optional), the weight
// after the last ':', then, unless the line starts with '/', the port after
// the ':' before it. It returns a message on failure.
func parseServer(s string) (Server, string) {
	addrPart, name, hasName := cutLast(s, ' ')
	if !hasName {
		addrPart = s
	} else if name == "" {
		return Server{}, fmt.Sprintf("empty name after the space in %q", s)
	}
	rest, weight, ok := cutLast(addrPart, ':')
	if !ok {
		return Server{}, fmt.Sprintf("%q has no weight; %s", s, serverForms)
	}
	unix := strings.HasPrefix(s, "/")
	addr, port := rest, ""
	if !unix {
		if addr, port, ok = cutLast(rest, ':'); !ok {
			return Server{}, fmt.Sprintf("%q has no port; %s", s, serverForms)
		}
	} else if strings.Contains(rest, ":") {
		// twemproxy would take the text after a second ':' as a port and
		// then refuse the line.
		return Server{}, fmt.Sprintf("unix socket path in %q contains ':'; %s", s, serverForms)
	}
	w, ok := parseDecimal(weight, 0, maxInt32)
	if !ok {
		return Server{}, fmt.Sprintf("invalid weight %q in %q; want an integer > 0", weight, s)
	}
	if w == 0 {
		return Server{}, fmt.Sprintf("zero weight in %q; want an integer > 0", s)
	}
	srv := Server{Network: "unix", Addr: addr, Host: addr, Weight: w, Name: name}
	if !unix {
		n, ok := parsePort(port)
		if !ok {
			return Server{}, fmt.Sprintf("invalid port %q in %q; want 1 to 65535", port, s)
		}
		h, ok := parseHost(addr, false)
		if !ok {
			return Server{}, fmt.Sprintf("invalid host %q in %q", addr, s)
		}
		srv.Network, srv.Host, srv.Port = "tcp", h, n
		srv.Addr = net.JoinHostPort(h, strconv.Itoa(n))
	}
	if !hasName {
		srv.Name = nodeName(addr, port, srv.Port)
	}
	return srv, ""
}

// nodeName is twemproxy's name for a server line without an explicit name:
// the address as written, followed by ':' and the port as written unless the
// port is 11211. A unix socket has an empty port, hence "path:".
func nodeName(addr, port string, n int) string {
	if n == ketamaPort {
		return addr
	}
	return addr + ":" + port
}

// cutLast splits s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// parsePort accepts the decimal digits of a port from 1 to 65535.
func parsePort(s string) (int, bool) {
	n, ok := parseDecimal(s, 1, 65535)
	return n, ok
}

// parsePerm accepts octal digits up to 0777.
func parsePerm(s string) (os.FileMode, bool) {
	if s == "" || len(s) > 4 {
		return 0, false
	}
	var m uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '7' {
			return 0, false
		}
		m = m<<3 | uint32(c-'0')
	}
	if m > 0o777 {
		return 0, false
	}
	return os.FileMode(m), true
}

// parseHost checks a host name or address and removes IPv6 brackets. An empty
// host is allowed where it means "every address" (listen).
func parseHost(h string, emptyOK bool) (string, bool) {
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") && len(h) >= 2 {
		h = h[1 : len(h)-1]
	}
	if h == "" {
		return "", emptyOK
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c == 0x7f || c == '[' || c == ']' || c == '/' {
			return "", false
		}
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return "", false
		}
	}
	return h, true
}
