package testserver

import (
	"net"
	"sync"
	"testing"
)

// handedOut records every port FreePort returned in this process, so two
// servers of one test binary never get the same port, and a stopped server's
// port stays its own for Restart.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment
// ago and that FreePort has not returned before in this process. Another
// process may still take it before the caller binds it; the Start functions
// retry with a new port when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testserver: find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		handedOut.Lock()
		fresh := !handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if fresh {
			return port
		}
	}
	t.Fatalf("testserver: no free port after 100 tries")
	return 0
}
