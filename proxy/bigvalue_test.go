package proxy_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// bigValueSizes cross every buffer path: copied out of the socket's read
// buffer (3 KB), sliced from it (20 KB), and read into a buffer of the
// announced length that is then recycled (70 KB, 300 KB, 1.5 MB), in both
// directions.
var bigValueSizes = []int{3 << 10, 20 << 10, 70 << 10, 300 << 10, 1536 << 10}

// bigValue is the value of set i of client ci: its size cycles through
// bigValueSizes and every byte depends on (ci, i), so a reply assembled from
// a recycled buffer that another request still used shows up as a wrong
// byte, never as a plausible value.
func bigValue(ci, i int) string {
	return repeatTo(fmt.Sprintf("<%d:%d>", ci, i), bigValueSizes[(ci+i)%len(bigValueSizes)])
}

// repeatTo returns seed repeated to n bytes.
func repeatTo(seed string, n int) string {
	return strings.Repeat(seed, n/len(seed)+1)[:n]
}

// TestMemcacheBigValuesPipelined runs clients that each pipeline sets and
// gets of values from 3 KB to 1.5 MB through the proxy at once, and checks
// every reply byte for byte.
func TestMemcacheBigValuesPipelined(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 2, "  timeout: 20000\n  item_size_max: 2097152\n", "-I", "2m", "-m", "256")
	_, addr := startProxy(t, yaml, "mc")
	const pairs = 40
	eachClient(t, addr, 6, func(ci int, c *client) error {
		var req strings.Builder
		for i := range pairs {
			k, v := fmt.Sprintf("big%d:%d", ci, i%7), bigValue(ci, i)
			fmt.Fprintf(&req, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", k, len(v), v, k)
		}
		go c.send(req.String())
		for i := range pairs {
			k, v := fmt.Sprintf("big%d:%d", ci, i%7), bigValue(ci, i)
			if got := c.reply(); got != "STORED\r\n" {
				return fmt.Errorf("set %d (%d bytes): %.60q", i, len(v), got)
			}
			want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v)
			if got := c.reply(); got != want {
				return fmt.Errorf("get %d (%d bytes): reply of %d bytes differs at byte %d",
					i, len(v), len(got), mismatchAt(got, want))
			}
		}
		return nil
	})
}

// TestRedisBigValuesPipelined is the same through RESP: bulk strings in
// requests and in replies.
func TestRedisBigValuesPipelined(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	_, yaml := redisPool(t, 2, "  timeout: 20000\n")
	_, addr := startProxy(t, yaml, "rd")
	const pairs = 40
	eachClient(t, addr, 6, func(ci int, c *client) error {
		var req strings.Builder
		for i := range pairs {
			k, v := fmt.Sprintf("big%d:%d", ci, i%7), bigValue(ci, i)
			fmt.Fprintf(&req, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
			fmt.Fprintf(&req, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k)
		}
		go c.send(req.String())
		for i := range pairs {
			v := bigValue(ci, i)
			if got := c.line(); got != "+OK" {
				return fmt.Errorf("SET %d (%d bytes): %.60q", i, len(v), got)
			}
			if got := c.line(); got != fmt.Sprintf("$%d", len(v)) {
				return fmt.Errorf("GET %d: header %.60q, want $%d", i, got, len(v))
			}
			if got := c.readN(len(v) + 2); got != v+"\r\n" {
				return fmt.Errorf("GET %d (%d bytes): differs at byte %d", i, len(v), mismatchAt(got, v+"\r\n"))
			}
		}
		return nil
	})
}

// eachClient runs f for n clients of addr at once and reports every error,
// prefixed with the client's number.
func eachClient(t *testing.T, addr string, n int, f func(ci int, c *client) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for ci := range n {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ci, c); err != nil {
				errs <- fmt.Errorf("client %d: %w", ci, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// mismatchAt returns the first index where a and b differ.
func mismatchAt(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMemcacheBigSetAllocation sends 100 KB sets one at a time, each line
// and value in pieces as a client's writes reach a socket, and checks
// what the proxy allocates per set. The value's length, known once the
// line is in, sizes the session's read buffer and the request's copy
// from recycled buffers: growing the buffer by doubling, and a fresh
// buffer for each request's copy, cost over three times the value in
// garbage per set.
func TestMemcacheBigSetAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 2, "  timeout: 20000\n")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	const sets, size = 100, 100 << 10
	value := []byte(strings.Repeat("v", size) + "\r\n")
	lines := make([][]byte, sets)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, "set bigalloc:%d 0 0 %d\r\n", i%10, size)
	}
	set := func(i int) {
		c.send(string(lines[i]))
		for off := 0; off < len(value); off += 16 << 10 {
			c.nc.Write(value[off:min(off+16<<10, len(value))])
		}
		if got := c.line(); got != "STORED" {
			t.Fatalf("set %d: %q", i, got)
		}
	}
	for i := range 10 { // buffers in the pools
		set(i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range sets {
		set(i)
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / sets
	t.Logf("%d bytes allocated per %d-byte set", per, size)
	if raceEnabled() {
		return // the race detector's sync.Pool drops a share of what is put back
	}
	if per > size/4 {
		t.Errorf("%d bytes allocated per %d-byte set; want under %d", per, size, size/4)
	}
}
