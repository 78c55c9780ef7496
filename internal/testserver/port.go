package testserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
)

// handedOut records every port FreePort returned in this process, so two
// servers of one test binary never get the same port, and a stopped server's
// port stays its own for Restart. Across processes, reserve does the same.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment
// ago and that FreePort has not returned before, in this process or in any
// other test process of this repository still running. A process outside
// the tests may still take it before the caller binds it; the Start
// functions retry with a new port when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := listenRange()
	for range 1000 {
		port := lo + rand.IntN(hi-lo+1)
		handedOut.Lock()
		fresh := !handedOut.ports[port]
		handedOut.ports[port] = true // tried once, used or not
		claimed := fresh && reserve(port)
		handedOut.Unlock()
		if !claimed {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // in use
		}
		_ = l.Close()
		return port
	}
	t.Fatalf("testserver: no free port in %d-%d after 1000 tries", lo, hi)
	return 0
}

// listenRange is where FreePort looks: below the kernel's range of
// ephemeral ports, from which the tests' own outgoing connections take
// their local ports. A port handed out from that range could be taken by a
// client socket of a test running in parallel before its server binds it.
func listenRange() (lo, hi int) {
	lo, hi = 20000, 32767 // Linux's default ephemeral range starts at 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(b), &first, &last); err == nil && first > 12000 {
			hi = first - 1
			lo = min(lo, hi-10000)
		}
	}
	return lo, hi
}
