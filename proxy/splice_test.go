package proxy_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// spliceValue is the value of key i: 150 KB, long enough to be spliced,
// every byte depending on i.
func spliceValue(i int) string {
	return repeatTo(fmt.Sprintf("[%d]", i), 150<<10)
}

// TestSplicedValues: long values a get asks for reach the client whole
// and in order among small replies and misses, on both server protocols,
// whether the client reads at once or only after the proxy's writes
// filled its socket; clients that leave without reading give their pipes
// back (later values are still spliced). A V2 route's handler that only
// enqueues and waits (answered without Lua, lua/direct_fast.go) splices
// too, on either protocol.
func TestSplicedValues(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	native := func(proto string) func(t *testing.T) string {
		return func(t *testing.T) string {
			_, yaml := memcachedPool(t, 2, "  server_protocol: "+proto+"\n")
			return yaml
		}
	}
	v2 := func(proto string) func(t *testing.T) string {
		return func(t *testing.T) string {
			mc := testserver.StartMemcached(t)
			return "mc:\n  listen: 127.0.0.1:0\n  lua: " + v2DirectRoute(t, mc) + "\n  server_protocol: " + proto + "\n"
		}
	}
	for _, tc := range []struct {
		name string
		yaml func(t *testing.T) string
	}{
		{"auto", native("auto")}, {"text", native("text")},
		{"lua-v2-text", v2("text")}, {"lua-v2-meta", v2("meta")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := startProxy(t, tc.yaml(t), "mc")
			const keys, lateRounds = 8, 6
			c := dial(t, addr)
			for i := range keys {
				v := spliceValue(i)
				if got := c.do(fmt.Sprintf("set big%d 7 0 %d\r\n%s\r\n", i, len(v), v)); got != "STORED\r\n" {
					t.Fatalf("set %d: %q", i, got)
				}
			}
			c.do("set small 1 0 2\r\nhi\r\n")

			var req strings.Builder
			var want []string
			for i := range keys {
				fmt.Fprintf(&req, "get big%d\r\nget small\r\nget nope%d\r\n", i, i)
				want = append(want, fmt.Sprintf("VALUE big%d 7 %d\r\n%s\r\nEND\r\n", i, 150<<10, spliceValue(i)),
					"VALUE small 1 2\r\nhi\r\nEND\r\n", "END\r\n")
			}
			check := func(name string, c *client) {
				t.Helper()
				for i, w := range want {
					if got := c.reply(); got != w {
						t.Fatalf("%s: reply %d: %d bytes %.60q, want %d bytes %.60q", name, i, len(got), got, len(w), w)
					}
				}
			}

			// One get at a time: each alone on its socket.
			before := srv.Stats().SplicedReplies
			for i := range keys {
				if got, w := c.do(fmt.Sprintf("get big%d\r\n", i)), want[3*i]; got != w {
					t.Fatalf("get big%d: %d bytes, want %d", i, len(got), len(w))
				}
			}
			if d := srv.Stats().SplicedReplies - before; d < keys/2 {
				t.Errorf("%d of %d lone gets spliced", d, keys)
			}

			// Pipelined, read at once.
			go c.send(req.String())
			check("pipelined", c)

			// Pipelined, read late: the proxy's writes fill the
			// client's socket and its own send buffer (up to 4 MB,
			// tcp_wmem) first, so that the rest of a spliced value
			// waits in memory, and later ones behind it.
			slow := dial(t, addr)
			slow.nc.(*net.TCPConn).SetReadBuffer(32 << 10)
			go slow.send(strings.Repeat(req.String(), lateRounds))
			time.Sleep(300 * time.Millisecond)
			for range lateRounds {
				check("read late", slow)
			}

			// Clients that leave with spliced replies unwritten.
			for range 10 {
				gone := dial(t, addr)
				gone.send(req.String())
				gone.line()
				gone.nc.Close()
			}
			time.Sleep(100 * time.Millisecond)
			before = srv.Stats().SplicedReplies
			for i := range keys {
				if got, w := c.do(fmt.Sprintf("get big%d\r\n", i)), want[3*i]; got != w {
					t.Fatalf("after the clients left: get big%d: %d bytes, want %d", i, len(got), len(w))
				}
			}
			if d := srv.Stats().SplicedReplies - before; d < keys/2 {
				t.Errorf("after the clients left, %d of %d lone gets spliced: pipes lost?", d, keys)
			}
		})
	}
}

// TestSplicePipesPerClient: a client that pipelines many long gets and
// reads nothing holds at most backend.MaxClientPipes pipes, so another
// client's values are still spliced.
func TestSplicePipesPerClient(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 2, "")
	srv, addr := startProxy(t, yaml, "mc")
	const keys = 8
	c := dial(t, addr)
	for i := range keys {
		v := spliceValue(i)
		if got := c.do(fmt.Sprintf("set big%d 7 0 %d\r\n%s\r\n", i, len(v), v)); got != "STORED\r\n" {
			t.Fatalf("set %d: %q", i, got)
		}
	}
	hog := dial(t, addr)
	hog.nc.(*net.TCPConn).SetReadBuffer(32 << 10)
	// Rounds of gets, more than the process's 32 pipes in all: once its
	// socket is full, the replies that come in wait for the write that
	// blocks, each holding its pipe.
	for range 14 { // 112 gets: within a client's 128 in flight
		var req strings.Builder
		for i := range keys {
			fmt.Fprintf(&req, "get big%d\r\n", i)
		}
		hog.send(req.String())
		time.Sleep(100 * time.Millisecond)
	}
	// Until its replies stop coming in from the servers.
	last := int64(-1)
	for n := srv.Stats().SplicedReplies; n != last; n = srv.Stats().SplicedReplies {
		last = n
		time.Sleep(200 * time.Millisecond)
	}
	before := srv.Stats().SplicedReplies
	for i := range keys {
		want := fmt.Sprintf("VALUE big%d 7 %d\r\n%s\r\nEND\r\n", i, 150<<10, spliceValue(i))
		if got := c.do(fmt.Sprintf("get big%d\r\n", i)); got != want {
			t.Fatalf("get big%d: %d bytes, want %d", i, len(got), len(want))
		}
	}
	if d := srv.Stats().SplicedReplies - before; d < keys/2 {
		t.Errorf("with a client not reading, %d of %d lone gets of another spliced", d, keys)
	}
}
