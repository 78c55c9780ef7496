package cluster

import (
	"bytes"
	"net"
	"strconv"
)

// Wire prefixes of the cluster error replies the router acts on.
var (
	movedPrefix       = []byte("-MOVED ")
	askPrefix         = []byte("-ASK ")
	tryAgainPrefix    = []byte("-TRYAGAIN")
	clusterDownPrefix = []byte("-CLUSTERDOWN")
)

// maxHost bounds the host of a redirect: a DNS name is at most 253 bytes.
const maxHost = 255

// ParseRedirect reads a MOVED or ASK error reply ("-MOVED 3999
// 127.0.0.1:6381\r\n", "-ASK 3999 127.0.0.1:6381\r\n"). from is the address
// of the node that sent it, whose host stands in for an empty one
// ("-MOVED 3999 :6381"). It returns false for any other reply and for a
// malformed redirect, which must not be followed: a slot that is no
// decimal number below 16384, a port that is no number from 1 to 65535, a
// host with spaces or control bytes, anything after the address.
func ParseRedirect(reply []byte, from string) (*RedirectError, bool) {
	var ask bool
	var rest []byte
	switch {
	case bytes.HasPrefix(reply, movedPrefix):
		rest = reply[len(movedPrefix):]
	case bytes.HasPrefix(reply, askPrefix):
		ask, rest = true, reply[len(askPrefix):]
	default:
		return nil, false
	}
	rest, ok := bytes.CutSuffix(rest, []byte("\r\n"))
	if !ok {
		return nil, false
	}
	slotText, addr, ok := bytes.Cut(rest, []byte(" "))
	slot, slotOK := parseSlot(slotText)
	if !ok || !slotOK {
		return nil, false
	}
	colon := bytes.LastIndexByte(addr, ':')
	if colon < 0 {
		return nil, false
	}
	host, portText := addr[:colon], addr[colon+1:]
	port, ok := parsePort(portText)
	if !ok || len(host) > maxHost || !hostOK(host) {
		return nil, false
	}
	h := string(host)
	if h == "" {
		if h, _, ok = splitHost(from); !ok {
			return nil, false
		}
	}
	return &RedirectError{Ask: ask, Slot: slot, Addr: net.JoinHostPort(h, strconv.Itoa(port))}, true
}

// parseSlot reads a slot number: decimal digits only, below Slots.
func parseSlot(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < Slots
}

// parsePort reads a TCP port: decimal digits only, 1 to 65535.
func parsePort(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= 65535
}

// hostOK accepts what a node may name itself by: printable ASCII without
// spaces (an IP address, IPv6 unbracketed as Redis writes it, or a
// hostname).
func hostOK(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c > '~' || c == '[' || c == ']' || c == '/' {
			return false
		}
	}
	return true
}

// splitHost returns the host of a "host:port" address.
func splitHost(addr string) (host, port string, ok bool) {
	host, port, err := net.SplitHostPort(addr)
	return host, port, err == nil
}
