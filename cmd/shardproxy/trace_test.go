package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// TestTraces runs the binary with tracing to a real OTLP/HTTP receiver.
// With trace_sample 1 every request of a memcache and a Redis pool
// becomes a span with a child span for its server call; after a reload to
// trace_sample 0 only the requests over a pool's slowlog threshold are
// traced (its server slowed by 40 ms), and after one without trace keys
// none.
func TestTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary, runs memcached and redis-server")
	}
	rx := testserver.StartOTLP(t)
	slow := faultproxy.New(t, testserver.StartMemcached(t).Addr)
	slow.Set(faultproxy.Downstream, faultproxy.Toxic{Latency: 40 * time.Millisecond})
	mcAddr, rdAddr, slowAddr, adminAddr := loopback(t), loopback(t), loopback(t), loopback(t)
	pools := fmt.Sprintf("mc:\n  listen: %s\n  servers:\n    - %s:1 mc1\n"+
		"rd:\n  listen: %s\n  redis: true\n  servers:\n    - %s:1 rd1\n"+
		"sl:\n  listen: %s\n  slowlog_threshold: 20\n  timeout: 2000\n  servers:\n    - %s:1 sl1\n"+
		"shardproxy:\n  admin_listen: %s\n",
		mcAddr, testserver.StartMemcached(t).Addr, rdAddr, testserver.StartRedis(t).Addr, slowAddr, slow.Addr(), adminAddr)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	write := func(trace string) {
		if err := os.WriteFile(conf, []byte(pools+trace), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("  trace_endpoint: %s\n  trace_sample: 1\n  trace_service: edge\n", rx.Endpoint))
	cmd, logs, fail := startProxy(t, testserver.Shardproxy(t), "-c", conf, "-s", "0", "--admin", "")
	waitFor(t, fail, "the admin", func() bool { _, err := checksum(adminAddr); return err == nil })
	// reload applies the file and waits for its tracing line.
	reload := func(line string) {
		n := strings.Count(logs.String(), line)
		cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, fail, "the log's "+line, func() bool { return strings.Count(logs.String(), line) > n })
	}
	spans := func(from int) map[string][]testserver.Span {
		m := map[string][]testserver.Span{}
		for _, s := range rx.Spans()[from:] {
			m[s.Attrs["shardproxy.pool"]+" "+s.Name] = append(m[s.Attrs["shardproxy.pool"]+" "+s.Name], s)
		}
		return m
	}

	roundTrip(t, fail, mcAddr, "k")
	nc, err := net.DialTimeout("tcp", rdAddr, 5*time.Second)
	if err != nil {
		fail("dial: %v", err)
	}
	defer nc.Close()
	if err := redisStep(newClientConn(nc), "k", 1); err != nil {
		fail("Redis: %v", err)
	}
	waitFor(t, fail, "the spans of a memcache get and a Redis SET", func() bool {
		m := spans(0)
		return len(m["mc get"]) > 0 && len(m["mc get mc1"]) > 0 && len(m["rd set"]) > 0 && len(m["rd set rd1"]) > 0
	})
	m := spans(0)
	get, call := m["mc get"][0], m["mc get mc1"][0]
	if get.Service != "edge" || get.Attrs["db.system"] != "memcached" || call.Attrs["server.address"] != "mc1" ||
		call.ParentID != get.SpanID || call.TraceID != get.TraceID || m["rd set"][0].Attrs["db.system"] != "redis" {
		fail("spans: get %+v, its call %+v, set %+v", get, call, m["rd set"][0])
	}

	// trace_sample 0: the slow requests only. The reload's line comes
	// once the first tracer has sent all it had.
	write(fmt.Sprintf("  trace_endpoint: %s\n  trace_sample: 0\n", rx.Endpoint))
	reload("sample=0")
	before := len(rx.Spans())
	for i := range 5 {
		roundTrip(t, fail, mcAddr, fmt.Sprintf("fast%d", i))
	}
	roundTrip(t, fail, slowAddr, "slow")
	waitFor(t, fail, "the slow get's span", func() bool { return len(spans(before)["sl get"]) > 0 })
	time.Sleep(1500 * time.Millisecond) // a batch's time: spans of the fast requests would be here by now
	m = spans(before)
	if len(m["mc get"])+len(m["mc set"]) > 0 {
		fail("fast requests traced with trace_sample 0: %v", m)
	}
	if sl := m["sl get"][0]; sl.End.Sub(sl.Start) < 40*time.Millisecond {
		fail("the slow get's span took %v, want at least the 40 ms added", sl.End.Sub(sl.Start))
	}

	write("")
	reload("tracing off")
	before = len(rx.Spans())
	roundTrip(t, fail, slowAddr, "off")
	time.Sleep(1500 * time.Millisecond)
	if n := len(rx.Spans()) - before; n != 0 {
		fail("%d spans after tracing was turned off", n)
	}
}
