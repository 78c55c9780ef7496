package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// The long-get tests send retrieval lines longer than max_request_line
// (memcached serves a get line of any length; observed on 1.6.18 with
// 20,000 and 100,000 keys), which the proxy cuts into parts as they
// stream in: the client must read one reply, byte for byte what
// memcached would answer, with memory bounded by the client's buffers.

// longGetKeys is the number of keys of the long get lines.
const longGetKeys = 20000

// longKey and longValue name key i and its value (stored for even i).
func longKey(i int) string { return fmt.Sprintf("long:%05d", i) }
func longValue(i int) string {
	return fmt.Sprintf("value-%d-%s", i, strings.Repeat("v", i%97))
}

// longGetLine is "<verb> key0 ... key<n-1>\r\n".
func longGetLine(verb string, n int) string {
	var b strings.Builder
	b.WriteString(verb)
	for i := range n {
		b.WriteString(" " + longKey(i))
	}
	b.WriteString("\r\n")
	return b.String()
}

// longGetReply is memcached's reply to longGetLine("get", n) once
// storeLong stored the even keys: their values in key order, the odd keys
// missing, one END.
func longGetReply(n int) string {
	var b strings.Builder
	for i := 0; i < n; i += 2 {
		v := longValue(i)
		fmt.Fprintf(&b, "VALUE %s 0 %d\r\n%s\r\n", longKey(i), len(v), v)
	}
	b.WriteString("END\r\n")
	return b.String()
}

// storeLong stores the even keys of longGetLine through addr with noreply
// sets, and checks one.
func storeLong(t testing.TB, addr string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i += 2 {
		v := longValue(i)
		fmt.Fprintf(&b, "set %s 0 0 %d noreply\r\n%s\r\n", longKey(i), len(v), v)
	}
	c := dial(t, addr)
	go c.nc.Write([]byte(b.String() + "get " + longKey(2) + "\r\n"))
	if r, want := c.reply(), fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", longKey(2), len(longValue(2)), longValue(2)); r != want {
		t.Fatalf("after the sets: %q, want %q", r, want)
	}
}

// readReplies reads the replies to a pipeline whose replies are want, in
// order, each compared byte for byte.
func readReplies(t *testing.T, r *bufio.Reader, want ...string) {
	t.Helper()
	for i, w := range want {
		got := make([]byte, len(w))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("reply %d: %v after %d bytes", i, err, len(got))
		}
		if string(got) != w {
			at := mismatchAt(string(got), w)
			t.Fatalf("reply %d differs at byte %d of %d: got %.80q, want %.80q", i, at, len(w), got[at:], w[at:])
		}
	}
}

// TestLongGetThroughPool sends a 20,000-key get (a 220 KB line) through a
// native pool of three memcached servers, text and meta, pipelined after
// and before other requests with noreply sets between, and checks every
// value and every miss; then the same line a few bytes at a time.
func TestLongGetThroughPool(t *testing.T) {
	for _, proto := range []string{"text", "meta"} {
		t.Run(proto, func(t *testing.T) {
			_, yaml := memcachedPool(t, 3, "  server_protocol: "+proto+"\n")
			_, addr := startProxy(t, yaml, "mc")
			storeLong(t, addr, longGetKeys)
			line, want := longGetLine("get", longGetKeys), longGetReply(longGetKeys)

			c := dial(t, addr)
			in := "set before 0 0 3 noreply\r\nabc\r\nget before\r\n" + line +
				"set after 0 0 3 noreply\r\nxyz\r\n" + line + "get after\r\n" +
				"gets " + longKey(0) + "\r\n"
			go func() { c.nc.SetWriteDeadline(time.Now().Add(ioTimeout)); io.WriteString(c.nc, in) }()
			c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
			readReplies(t, c.r, "VALUE before 0 3\r\nabc\r\nEND\r\n", want, want, "VALUE after 0 3\r\nxyz\r\nEND\r\n")
			if r := c.reply(); !strings.HasPrefix(r, "VALUE "+longKey(0)+" 0 ") {
				t.Fatalf("gets after the long lines: %q", r)
			}

			// gets and gat: the same values, with CAS or touched.
			c.send(longGetLine("gat 0", longGetKeys))
			if r := c.reply(); strings.Count(r, "VALUE ") != longGetKeys/2 || !strings.HasSuffix(r, longValue(longGetKeys-2)+"\r\nEND\r\n") {
				t.Fatalf("gat of %d keys: %d values, ends %q", longGetKeys, strings.Count(r, "VALUE "), r[max(0, len(r)-60):])
			}

			// A slow client: the line in 100-byte writes.
			slow := dial(t, addr)
			go func() {
				for i := 0; i < len(line); i += 100 {
					slow.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
					if _, err := io.WriteString(slow.nc, line[i:min(i+100, len(line))]); err != nil {
						return
					}
					if i%10000 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				io.WriteString(slow.nc, "get before\r\n")
			}()
			slow.nc.SetReadDeadline(time.Now().Add(ioTimeout))
			readReplies(t, slow.r, want, "VALUE before 0 3\r\nabc\r\nEND\r\n")
		})
	}
}

// TestLongGetKeyTooLong puts a key over 250 bytes in the middle of a long
// line. memcached (which reads the whole line first) answers "CLIENT_ERROR
// bad command line format" alone; the proxy has sent the values of the
// parts before the key already, and ends the reply with that error. The
// rest of the line is dropped and the connection stays, as in memcached.
func TestLongGetKeyTooLong(t *testing.T) {
	_, yaml := memcachedPool(t, 3, "")
	_, addr := startProxy(t, yaml, "mc")
	storeLong(t, addr, longGetKeys)
	keys := strings.Fields(strings.TrimSuffix(longGetLine("get", longGetKeys), "\r\n"))
	keys[1+15000] = strings.Repeat("x", 251)
	c := dial(t, addr)
	go io.WriteString(c.nc, strings.Join(keys, " ")+"\r\nget before-nothing "+longKey(0)+"\r\n")
	var got strings.Builder
	for {
		r := c.line()
		if !strings.HasPrefix(r, "VALUE ") {
			if r != "CLIENT_ERROR bad command line format" {
				t.Fatalf("the line's reply ends with %q", r)
			}
			break
		}
		var key string
		var flags, n int
		fmt.Sscanf(r, "VALUE %s %d %d", &key, &flags, &n)
		got.WriteString(r + "\r\n" + c.readN(n+2))
	}
	if want := longGetReply(longGetKeys); !strings.HasPrefix(want, got.String()) || got.Len() == 0 {
		t.Fatalf("values before the error (%d bytes) are not the line's first values", got.Len())
	}
	v := longValue(0)
	if r, want := c.reply(), fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", longKey(0), len(v), v); r != want {
		t.Fatalf("the request after the line: %q, want %q", r, want)
	}

	// The same key within the first part: memcached's answer exactly.
	mc := testserver.StartMemcached(t)
	keys[1+15000] = longKey(15000)
	keys[1+2] = strings.Repeat("x", 251)
	in := strings.Join(keys, " ") + "\r\n"
	for _, a := range []string{mc.Addr, addr} {
		c := dial(t, a)
		go io.WriteString(c.nc, in)
		if r := c.line(); r != "CLIENT_ERROR bad command line format" {
			t.Fatalf("%s: %q", a, r)
		}
	}
}

// TestLongGetEndless sends a get line that never ends. Its keys miss: the
// proxy keeps serving it part by part (nothing to reply) with its memory
// flat. Its keys hit and the client does not read: the proxy reads no
// more of the line once the client's replies and read buffer are full
// (the client's writes block), with its memory bounded; once the client
// reads, the line completes with every value and one END. The proxy
// neither closes the connection nor answers an error.
func TestLongGetEndless(t *testing.T) {
	_, yaml := memcachedPool(t, 2, "")
	_, addr := startProxy(t, yaml, "mc")
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	const limit = 48 << 20

	t.Run("misses", func(t *testing.T) {
		c := dial(t, addr)
		base := heap()
		c.send("get")
		chunk := strings.Repeat(" missing-key-0123456789", 4096) // 92 KB
		for i := range 700 {                                     // 64 MB
			c.send(chunk)
			if i%100 == 99 {
				if h := heap(); h > base+limit {
					t.Fatalf("heap %d MB after %d MB of one line", h>>20, (i+1)*len(chunk)>>20)
				}
			}
		}
		c.send("\r\n")
		if r := c.reply(); r != "END\r\n" {
			t.Fatalf("a line of misses: %q", r)
		}
	})

	t.Run("hits, a client that does not read", func(t *testing.T) {
		big := strings.Repeat("b", 10<<10)
		var b strings.Builder
		bigKey := func(i int) string { return fmt.Sprintf("big:%03d:%s", i, strings.Repeat("k", 200)) }
		for i := range 200 {
			fmt.Fprintf(&b, "set %s 0 0 %d noreply\r\n%s\r\n", bigKey(i), len(big), big)
		}
		c := dial(t, addr)
		go io.WriteString(c.nc, b.String()+"get "+bigKey(199)+"\r\n")
		if r := c.reply(); !strings.HasSuffix(r, big+"\r\nEND\r\n") {
			t.Fatalf("get %s: %.60q", bigKey(199), r)
		}
		base := heap()
		c.send("get")
		var keys strings.Builder
		for i := range 200 {
			keys.WriteString(" " + bigKey(i))
		}
		chunk := keys.String() // 40 KB: 200 hits, 2 MB of values
		sent := 0
		for {
			c.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.WriteString(c.nc, chunk); err != nil {
				if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
					t.Fatalf("write: %v", err)
				}
				break // the proxy stopped reading
			}
			sent++
			if sent > 2000 { // 80 MB of line, 4 GB of replies: it never stopped
				t.Fatalf("the proxy read %d chunks without the client reading", sent)
			}
		}
		if h := heap(); h > base+limit {
			t.Fatalf("heap grew by %d MB while the client did not read", (h-base)>>20)
		}
		t.Logf("the proxy stopped reading after %d of the line's chunks (%d KB), heap %+d MB", sent, sent*len(chunk)>>10, (int64(heap())-int64(base))>>20)

		// Now the client reads: every value of what it sent, then END.
		done := make(chan error, 1)
		go func() {
			// The rest of a chunk the timed-out write may have cut, then the end.
			for range 3 {
				c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
				if _, err := io.WriteString(c.nc, chunk); err != nil {
					done <- err
					return
				}
			}
			_, err := io.WriteString(c.nc, " "+bigKey(0)+"\r\nget "+bigKey(1)+"\r\n")
			done <- err
		}()
		values := 0
		for {
			l := c.line()
			if l == "END" {
				break
			}
			if !strings.HasPrefix(l, "VALUE big:") {
				t.Fatalf("after %d values: %q", values, l)
			}
			if v := c.readN(len(big) + 2); v != big+"\r\n" {
				t.Fatalf("value %d: %.40q", values, v)
			}
			values++
		}
		if err := <-done; err != nil {
			t.Fatalf("write: %v", err)
		}
		// Whole chunks were sent before the timeout, maybe one cut
		// short, three more and one key.
		if values < (sent+3)*200+1 || values > (sent+4)*200+1 {
			t.Fatalf("%d values for %d chunks", values, sent+3)
		}
		if r := c.reply(); !strings.HasSuffix(r, big+"\r\nEND\r\n") {
			t.Fatalf("the request after the line: %.60q", r)
		}
	})
}

// TestLongGetBufferLimit: a part that buffer_memory_limit refuses ends the
// line's reply with the limit's error; the rest of the line is dropped
// and the connection stays.
func TestLongGetBufferLimit(t *testing.T) {
	_, yaml := memcachedPool(t, 1, "  max_request_line: 2048\n  buffer_memory_limit: 1\n")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	go io.WriteString(c.nc, longGetLine("get", longGetKeys))
	r := c.reply()
	if !strings.HasSuffix(r, "SERVER_ERROR buffer memory limit reached\r\n") {
		t.Fatalf("reply ends %q", r[max(0, len(r)-80):])
	}
	if r := c.do("get k\r\n"); r != "END\r\n" {
		t.Fatalf("after the refused line: %q", r)
	}
}

// TestLongGetLua sends the 20,000-key get to a Lua pool, as memcached's
// proxy serves it (observed on 1.6.45: every value, and a key over 250
// bytes answered "CLIENT_ERROR key too long" in its place).
func TestLongGetLua(t *testing.T) {
	mc := testserver.StartMemcached(t)
	_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+luaFile(t, mc)+"\n", "lp")
	storeLong(t, addr, longGetKeys)
	c := dial(t, addr)
	go io.WriteString(c.nc, longGetLine("get", longGetKeys)+"get "+longKey(0)+"\r\n")
	v := longValue(0)
	readReplies(t, c.r, longGetReply(longGetKeys), fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", longKey(0), len(v), v))

	keys := strings.Fields(strings.TrimSuffix(longGetLine("get", 12000), "\r\n"))
	keys[1+11000] = strings.Repeat("x", 251)
	go io.WriteString(c.nc, strings.Join(keys, " ")+"\r\n")
	want := longGetReply(12000)
	want = strings.Replace(want, "VALUE "+longKey(11000)+" ", "CLIENT_ERROR key too long\r\nVALUE "+longKey(11000)+" ", 1)
	cut := strings.Index(want, "CLIENT_ERROR")
	end := strings.Index(want[cut:], "VALUE "+longKey(11002)) + cut
	want = want[:cut] + "CLIENT_ERROR key too long\r\n" + want[end:]
	readReplies(t, c.r, want)
}

// BenchmarkLongGet sends the 20,000-key get (10,000 hits) to one memcached
// directly and through the proxy (a pool of that one server, and of
// three), one line at a time, and reads the whole reply.
func BenchmarkLongGet(b *testing.B) {
	one, oneYAML := memcachedPool(b, 1, "")
	_, threeYAML := memcachedPool(b, 3, "")
	_, viaOne := startProxy(b, oneYAML, "mc")
	_, viaThree := startProxy(b, threeYAML, "mc")
	line, want := longGetLine("get", longGetKeys), longGetReply(longGetKeys)
	for _, bc := range []struct{ name, addr, store string }{
		{"direct", one[0].Addr, viaOne},
		{"proxy-1-server", viaOne, viaOne},
		{"proxy-3-servers", viaThree, viaThree},
	} {
		b.Run(bc.name, func(b *testing.B) {
			storeLong(b, bc.store, longGetKeys)
			c := dial(b, bc.addr)
			got := make([]byte, len(want))
			b.SetBytes(int64(len(want)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				go io.WriteString(c.nc, line)
				c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
				if _, err := io.ReadFull(c.r, got); err != nil || string(got) != want {
					b.Fatalf("reply: %v", err)
				}
			}
		})
	}
}
