package proxy_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestSlowReaderGetsEveryReply pipelines more small gets than the sockets
// can buffer and reads their replies late and in small pieces: the writes
// the proxy tries without waiting come up short, the rest goes through the
// session's writer goroutine, and every reply must still arrive once, in
// order.
func TestSlowReaderGetsEveryReply(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	slowReader(t, 50, 20000, func(k int) int { return 1000 + k })
}

// TestSlowReaderGetsEveryBigReply is the same with replies big enough to
// be written from the backend's buffer (writev), between small ones: a
// write that comes up short in the middle of a big reply leaves its rest,
// and every reply after it, to the writer goroutine, in order.
func TestSlowReaderGetsEveryBigReply(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	slowReader(t, 20, 600, func(k int) int {
		if k%2 == 0 {
			return 100 + k
		}
		return 20<<10 + k*9000 // 20 KB to 200 KB
	})
}

// slowReader sets keys values of size(k) bytes, pipelines gets of them
// without reading, then reads the replies late and slowly, and checks
// every byte.
func slowReader(t *testing.T, keys, gets int, size func(k int) int) {
	t.Helper()
	_, yaml := memcachedPool(t, 3, "  timeout: 20000\n")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	value := func(k int) string {
		v := fmt.Sprintf("value-%d-", k)
		return v + strings.Repeat(string(rune('a'+k%26)), size(k)-len(v))
	}
	var sets strings.Builder
	for k := range keys {
		v := value(k)
		fmt.Fprintf(&sets, "set slow%d 0 0 %d\r\n%s\r\n", k, len(v), v)
	}
	c.send(sets.String())
	for k := range keys {
		if got := c.reply(); got != "STORED\r\n" {
			t.Fatalf("set %d: %q", k, got)
		}
	}
	var req, want strings.Builder
	for i := range gets {
		k := (i * 7) % keys
		v := value(k)
		fmt.Fprintf(&req, "get slow%d\r\n", k)
		fmt.Fprintf(&want, "VALUE slow%d 0 %d\r\n%s\r\nEND\r\n", k, len(v), v)
	}
	go c.send(req.String()) // blocks once the proxy stops reading
	time.Sleep(300 * time.Millisecond)
	got := make([]byte, 0, want.Len())
	chunk := make([]byte, 4096)
	for len(got) < want.Len() {
		c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
		n, err := c.r.Read(chunk)
		got = append(got, chunk[:n]...)
		if err != nil {
			if err == io.EOF {
				break
			}
			t.Fatalf("after %d of %d bytes: %v", len(got), want.Len(), err)
		}
		if len(got)%(256<<10) < n {
			time.Sleep(5 * time.Millisecond) // a slow reader
		}
	}
	if string(got) != want.String() {
		t.Fatalf("replies differ at byte %d of %d (got %d bytes)", mismatchAt(string(got), want.String()), want.Len(), len(got))
	}
}
