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
	_, yaml := memcachedPool(t, 3, "  timeout: 20000\n")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	const keys, gets = 50, 20000
	var sets strings.Builder
	for k := range keys {
		v := fmt.Sprintf("value-%d-%s", k, strings.Repeat("x", 1000+k))
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
		v := fmt.Sprintf("value-%d-%s", k, strings.Repeat("x", 1000+k))
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
