package combine_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// BenchmarkShadow measures the primary's throughput (ops/s) and p99
// latency through a route pool without a shadow, with a live shadow, a
// dead one (its listener gone) and a hung one (a server that answers the
// handshake's version, then reads every request and answers none: no
// shadow server's work competes for the CPU, as a blackholed memcached's
// would). The
// copies are sent at once and bounded by the shadow's queue, so the three
// should read within noise of the first: run with -count and compare.
//
//	go test -run - -bench Shadow -benchtime 20000x -count 3 ./combine/
func BenchmarkShadow(b *testing.B) {
	for _, mode := range []string{"none", "live", "dead", "hung"} {
		b.Run(mode, func(b *testing.B) { benchShadow(b, mode) })
	}
}

func benchShadow(b *testing.B, mode string) {
	p, s := testserver.StartMemcached(b), testserver.StartMemcached(b)
	fp := faultproxy.New(b, s.Addr)
	port := testserver.FreePort(b)
	target := fp.Addr()
	switch mode {
	case "none":
		target = ""
	case "hung":
		target = testserver.FakeMemcached(b, hungServer)
	}
	startProxy(b, shadowConfig(port, p, target, 1024))
	if mode == "dead" {
		fp.Stop()
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs atomic.Int64
		id   atomic.Int64
	)
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		me := id.Add(1)
		var mine []time.Duration
		for i := 0; pb.Next(); i++ {
			key := fmt.Sprintf("b:%d:%d", me, i%512)
			req := "get " + key + "\r\n"
			if i%4 == 0 {
				req = fmt.Sprintf("set %s 0 0 5\r\nvalue\r\n", key)
			}
			t0 := time.Now()
			if _, err := io.WriteString(nc, req); err != nil {
				errs.Add(1)
				return
			}
			if !readReply(r) {
				errs.Add(1)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if errs.Load() > 0 {
		b.Errorf("%d errors on the primary", errs.Load())
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
}

// readReply reads one reply to a get or set; false on an error reply or
// a broken stream.
func readReply(r *bufio.Reader) bool {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		switch {
		case line == "END\r\n", line == "STORED\r\n":
			return true
		case len(line) > 6 && line[:6] == "VALUE ":
			var k string
			var f, n int
			fmt.Sscanf(line, "VALUE %s %d %d", &k, &f, &n)
			if _, err := r.Discard(n + 2); err != nil {
				return false
			}
		default:
			return false
		}
	}
}

// hungServer answers a memcached's version to the handshake, then reads
// every request and answers none.
func hungServer(_ int, line string) string {
	if strings.HasPrefix(line, "version") {
		return testserver.FakeVersion
	}
	return ""
}
