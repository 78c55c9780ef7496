package proc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut records every port FreePort returned in this process, so two
// servers of one process never get the same port, and a stopped server's
// port stays its own for a restart. Across processes, reserve does the
// same.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment
// ago and that FreePort has not returned before, in this process or in any
// other process of this repository (test binary, soak, bench) still
// running. A process outside them may still take it before the caller
// binds it; Start then fails with ErrAddrInUse.
func FreePort() (int, error) {
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
		return port, nil
	}
	return 0, fmt.Errorf("proc: no free port in %d-%d after 1000 tries", lo, hi)
}

// PortRangeEnv names the environment variable that, set to "LO-HI",
// confines FreePort to those ports: on a machine shared with other users
// of loopback ports, each keeps to its own range.
const PortRangeEnv = "SHARDPROXY_PORT_RANGE"

// listenRange is where FreePort looks: PortRangeEnv's range when it is set
// and valid, else below the kernel's range of ephemeral ports, from which
// outgoing connections (the tests', a load generator's) take their local
// ports. A port handed out from that range could be taken by such a client
// socket before its server binds it.
func listenRange() (lo, hi int) {
	if lo, hi, ok := parsePortRange(os.Getenv(PortRangeEnv)); ok {
		return lo, hi
	}
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

// parsePortRange parses "LO-HI" (1 <= LO <= HI <= 65535).
func parsePortRange(s string) (lo, hi int, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}
