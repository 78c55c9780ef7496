package proxy_test

import (
	"bufio"
	"fmt"
	"math/rand"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

func TestMemcacheCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	forServerProtocols(t, func(t *testing.T, extra string) {
		c := memcacheClient(t, extra)

		steps := []struct {
			req  string
			want string // exact reply, or a regexp when it starts with "re:"
		}{
			{"set a 5 0 3\r\nfoo\r\n", "STORED\r\n"},
			{"get a\r\n", "VALUE a 5 3\r\nfoo\r\nEND\r\n"},
			{"gets a\r\n", `re:^VALUE a 5 3 \d+\r\nfoo\r\nEND\r\n$`},
			{"add a 0 0 1\r\nx\r\n", "NOT_STORED\r\n"},
			{"add b 0 0 1\r\nx\r\n", "STORED\r\n"},
			{"replace b 7 0 2\r\nyy\r\n", "STORED\r\n"},
			{"replace nob 0 0 1\r\nx\r\n", "NOT_STORED\r\n"},
			{"append b 0 0 1\r\nz\r\n", "STORED\r\n"},
			{"prepend b 0 0 1\r\nw\r\n", "STORED\r\n"},
			{"get b\r\n", "VALUE b 7 4\r\nwyyz\r\nEND\r\n"},
			{"cas b 0 0 1 1\r\nq\r\n", "EXISTS\r\n"},
			{"cas nocas 0 0 1 1\r\nq\r\n", "NOT_FOUND\r\n"},
			{"set n 0 0 2\r\n10\r\n", "STORED\r\n"},
			{"incr n 5\r\n", "15\r\n"},
			{"decr n 20\r\n", "0\r\n"},
			{"incr nokey 1\r\n", "NOT_FOUND\r\n"},
			{"incr a 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
			{"touch a 100\r\n", "TOUCHED\r\n"},
			{"touch nokey 100\r\n", "NOT_FOUND\r\n"},
			{"gat 100 a\r\n", "VALUE a 5 3\r\nfoo\r\nEND\r\n"},
			{"gats 100 a\r\n", `re:^VALUE a 5 3 \d+\r\nfoo\r\nEND\r\n$`},
			{"delete a\r\n", "DELETED\r\n"},
			{"delete a\r\n", "NOT_FOUND\r\n"},
			{"get a\r\n", "END\r\n"},
			{"get a b nokey\r\n", "VALUE b 7 4\r\nwyyz\r\nEND\r\n"},
			// meta commands
			{"ms m1 2 T0 F9\r\nhi\r\n", "HD\r\n"},
			{"mg m1 v f\r\n", "VA 2 f9\r\nhi\r\n"},
			{"mg m1 s v O123 k\r\n", "VA 2 s2 O123 km1\r\nhi\r\n"},
			{"mg missing v\r\n", "EN\r\n"},
			{"ma m1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"},
			{"ms cnt 1\r\n5\r\n", "HD\r\n"},
			{"ma cnt v D3\r\n", "VA 1\r\n8\r\n"},
			{"md m1\r\n", "HD\r\n"},
			{"md m1\r\n", "NF\r\n"},
			{"mg TDE= b v\r\n", "EN\r\n"}, // base64 "L1"
			{"ms TDE= 1 b\r\nz\r\n", "HD\r\n"},
			{"mg TDE= b v\r\n", "VA 1\r\nz\r\n"},
			{"get L1\r\n", "VALUE L1 0 1\r\nz\r\nEND\r\n"},
			{"me cnt\r\n", `re:^ME cnt exp=-1 la=\d+ cas=\d+ fetch=no cls=\d+ size=\d+\r\n$`},
			{"mn\r\n", "MN\r\n"},
			// answered by the proxy
			{"version\r\n", `re:^VERSION \S+\r\n$`},
			{"verbosity 1\r\n", "OK\r\n"},
			{"stats\r\n", `re:(?s)^STAT pid \d+\r\n.*END\r\n$`},
			{"bogus\r\n", "ERROR\r\n"},
			{"shutdown\r\n", `re:^(CLIENT|SERVER)_ERROR .*shutdown.*\r\n$`},
			{"flush_all\r\n", "OK\r\n"},
			{"get b\r\n", "END\r\n"},
		}
		for _, s := range steps {
			got := c.do(s.req)
			if re, ok := strings.CutPrefix(s.want, "re:"); ok {
				if !regexp.MustCompile(re).MatchString(got) {
					t.Errorf("%q: got %q, want match %q", s.req, got, re)
				}
			} else if got != s.want {
				t.Errorf("%q: got %q, want %q", s.req, got, s.want)
			}
		}
		c.send("quit\r\n")
		c.expectClosed()
	})
}

func TestMemcacheNoreplyAndQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	_, yaml := memcachedPool(t, 3, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)

	// noreply: nothing comes back for these, so the next reply is the get's.
	c.send("set k1 0 0 2 noreply\r\nv1\r\n" +
		"set k2 0 0 2 noreply\r\nv2\r\n" +
		"add k1 0 0 1 noreply\r\nx\r\n" + // NOT_STORED, hidden
		"incr k1 1 noreply\r\n" + // CLIENT_ERROR, hidden
		"touch k2 10 noreply\r\n" +
		"delete nokey noreply\r\n" +
		"flush_all 0 noreply\r\n" +
		"set k3 0 0 2 noreply\r\nv3\r\n" +
		"get k3\r\n")
	if got := c.reply(); got != "VALUE k3 0 2\r\nv3\r\nEND\r\n" {
		t.Fatalf("after noreply commands: got %q", got)
	}

	// meta quiet: misses and successes are hidden, hits and errors shown;
	// mn flushes.
	c.send("ms q1 2 q\r\nv1\r\n" + // HD hidden
		"ms q2 2 q\r\nv2\r\n" +
		"mg q1 v q k\r\n" + // hit shown
		"mg nokey v q\r\n" + // EN hidden
		"mg q2 v q k\r\n" +
		"md q2 q\r\n" + // HD hidden
		"md nokey q\r\n" + // memcached 1.6 shows NF in quiet mode
		"ma q1 q\r\n" + // error shown
		"mn\r\n")
	want := []string{"VA 2 kq1\r\nv1\r\n", "VA 2 kq2\r\nv2\r\n", "NF\r\n",
		"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", "MN\r\n"}
	for _, w := range want {
		if got := c.reply(); got != w {
			t.Errorf("quiet: got %q, want %q", got, w)
		}
	}
}

// TestMemcacheMultiGetOrder checks that a multi-get whose keys live on all
// three servers returns the values in the client's key order.
func TestMemcacheMultiGetOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	servers, yaml := memcachedPool(t, 3, "  timeout: 2000\n")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)

	// fnv1a_64 (twemproxy's default) clusters keys that differ only in
	// their last bytes, so pick keys that the pool spreads over all servers.
	addrs := []string{servers[0].Addr, servers[1].Addr, servers[2].Addr}
	var keys []string
	for _, ks := range keysFor(t, addrs, 20) {
		keys = append(keys, ks...)
	}
	for i, k := range keys {
		if got := c.do(fmt.Sprintf("set %s %d 0 %d\r\n%s\r\n", k, i, len(k)+2, "v-"+k)); got != "STORED\r\n" {
			t.Fatalf("set %s: %q", k, got)
		}
	}
	// Every server must hold some of the keys, or the test shows nothing.
	for _, s := range servers {
		n := 0
		for _, k := range keys {
			if _, ok := direct(t, s.Addr, k); ok {
				n++
			}
		}
		if n == 0 {
			t.Fatalf("server %s holds none of the keys", s.Addr)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for round := range 5 {
		order := append([]string(nil), keys...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		order = append(order, "missing-1", order[0]) // a miss and a duplicate
		var want strings.Builder
		for _, k := range order {
			if strings.HasPrefix(k, "missing") {
				continue
			}
			i := slices.Index(keys, k)
			fmt.Fprintf(&want, "VALUE %s %d %d\r\nv-%s\r\n", k, i, len(k)+2, k)
		}
		want.WriteString("END\r\n")
		if got := c.do("get " + strings.Join(order, " ") + "\r\n"); got != want.String() {
			t.Fatalf("round %d: multi-get out of order:\ngot  %q\nwant %q", round, got, want.String())
		}
	}
}

func TestMemcacheLargeValues(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	forServerProtocols(t, func(t *testing.T, extra string) {
		_, yaml := memcachedPool(t, 3, "  timeout: 5000\n"+extra, "-I", "2m")
		_, addr := startProxy(t, yaml, "mc")
		c := dial(t, addr)
		val := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
		for i := range 4 {
			k := fmt.Sprintf("big%d", i)
			if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(val), val)); got != "STORED\r\n" {
				t.Fatalf("set 1 MiB: %q", got)
			}
		}
		got := c.do("get big0 big1 big2 big3\r\n")
		var want strings.Builder
		for i := range 4 {
			fmt.Fprintf(&want, "VALUE big%d 0 %d\r\n%s\r\n", i, len(val), val)
		}
		want.WriteString("END\r\n")
		if got != want.String() {
			t.Fatalf("multi-get of 1 MiB values differs (got %d bytes, want %d)", len(got), want.Len())
		}
		// One byte over item_size_max (1 MiB): refused, swallowed, connection kept.
		big := val + "x"
		if got := c.do(fmt.Sprintf("set over 0 0 %d\r\n%s\r\n", len(big), big)); got != "SERVER_ERROR object too large for cache\r\n" {
			t.Fatalf("over-size set: %q", got)
		}
		if got := c.do("get big0\r\n"); !strings.HasPrefix(got, "VALUE big0 0 1048576\r\n") {
			t.Fatalf("connection unusable after an over-size set: %.40q", got)
		}
		// One-key gets pipelined: each big reply is written from the
		// backend's buffer, what goes around it from the batch's.
		c.send("get big1\r\nget nokey\r\nget big2\r\ngets big3\r\nget big0\r\n")
		for _, k := range []string{"big1", "nokey", "big2", "big3", "big0"} {
			want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(val), val)
			if k == "nokey" {
				want = "END\r\n"
			}
			got := c.reply()
			if k == "big3" {
				got = regexp.MustCompile(`^(VALUE big3 0 1048576) \d+\r\n`).ReplaceAllString(got, "$1\r\n")
			}
			if got != want {
				t.Fatalf("pipelined get %s: got %d bytes %.60q, want %d", k, len(got), got, len(want))
			}
		}
	})
}

// TestMemcacheByteByByte sends requests one byte per write.
func TestMemcacheByteByByte(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	forServerProtocols(t, func(t *testing.T, extra string) {
		c := memcacheClient(t, extra)
		req := "set split 3 0 5\r\nhello\r\nget split other\r\nms m2 2 T0\r\nhi\r\nmg m2 v\r\n"
		for i := range len(req) {
			c.send(req[i : i+1])
			if i%7 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		for _, want := range []string{"STORED\r\n", "VALUE split 3 5\r\nhello\r\nEND\r\n", "HD\r\n", "VA 2\r\nhi\r\n"} {
			if got := c.reply(); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	})
}

// TestMemcachePipelinedClients runs 100 clients that each pipeline 1,000
// requests and checks every reply against its own request.
func TestMemcachePipelinedClients(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	forServerProtocols(t, func(t *testing.T, extra string) {
		_, yaml := memcachedPool(t, 3, "  timeout: 20000\n  server_connections: 2\n"+extra)
		_, addr := startProxy(t, yaml, "mc")
		const perClient = 1000
		eachClient(t, addr, 100, func(ci int, c *client) error {
			var req strings.Builder
			// Pairs of set+get on a key of this client: each get must see
			// its own set's value, whatever server it lives on.
			for i := range perClient / 2 {
				k := fmt.Sprintf("c%d:k%d", ci, i%50)
				v := fmt.Sprintf("v%d-%d", ci, i)
				fmt.Fprintf(&req, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", k, len(v), v, k)
			}
			go c.send(req.String())
			for i := range perClient / 2 {
				k := fmt.Sprintf("c%d:k%d", ci, i%50)
				v := fmt.Sprintf("v%d-%d", ci, i)
				if got := c.reply(); got != "STORED\r\n" {
					return fmt.Errorf("set %d: %q", i, got)
				}
				want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v)
				if got := c.reply(); got != want {
					return fmt.Errorf("get %d: got %q want %q", i, got, want)
				}
			}
			return nil
		})
	})
}

// memcacheClient starts 3 memcached behind a proxy pool with a 2 s timeout
// and extra pool keys, and returns a client of the pool.
func memcacheClient(t *testing.T, extra string) *client {
	t.Helper()
	_, yaml := memcachedPool(t, 3, "  timeout: 2000\n"+extra)
	_, addr := startProxy(t, yaml, "mc")
	return dial(t, addr)
}

// forServerProtocols runs test once per server_protocol, with extra the
// pool key that selects it.
func forServerProtocols(t *testing.T, test func(t *testing.T, extra string)) {
	for _, sp := range []string{"text", "meta", "auto"} {
		t.Run(sp, func(t *testing.T) { test(t, "  server_protocol: "+sp+"\n") })
	}
}

// metaServer is a fake memcached that answers the handshake ("version",
// and "mn" with mnReply), then answers each request line with
// replies[line], recording the lines it was sent.
func metaServer(t *testing.T, mnReply string, replies map[string]string, lines chan<- string) string {
	return testserver.Fake(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch l {
			case "version\r\n":
				nc.Write([]byte("VERSION 1.6.18\r\n"))
				continue
			case "mn\r\n":
				nc.Write([]byte(mnReply))
				continue
			}
			lines <- l
			nc.Write([]byte(replies[l]))
		}
	})
}

// TestMemcacheServerProtocolMeta checks on the wire what server_protocol
// meta sends and how the proxy takes the replies: a one-key get or gets
// goes as mg and its reply shows as text; a multi-key get stays text; a
// reply naming another key is a desync; a server that does not speak meta
// fails its handshake.
func TestMemcacheServerProtocolMeta(t *testing.T) {
	lines := make(chan string, 16)
	addr := metaServer(t, "MN\r\n", map[string]string{
		"mg foo k f v\r\n":     "VA 3 kfoo f5\r\nbar\r\n",
		"mg foo k f c v\r\n":   "VA 3 kfoo f5 c42\r\nbar\r\n",
		"mg nope k f v\r\n":    "EN knope\r\n",
		"get foo nope\r\n":     "VALUE foo 5 3\r\nbar\r\nEND\r\n",
		"mg shifted k f v\r\n": "VA 3 kfoo f5\r\nbar\r\n",
	}, lines)
	yaml := "mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  server_protocol: meta\n  servers:\n    - " + addr + ":1\n"
	_, paddr := startProxy(t, yaml, "mc")
	c := dial(t, paddr)
	for _, s := range []struct{ req, sent, want string }{
		{"get foo\r\n", "mg foo k f v\r\n", "VALUE foo 5 3\r\nbar\r\nEND\r\n"},
		{"gets foo\r\n", "mg foo k f c v\r\n", "VALUE foo 5 3 42\r\nbar\r\nEND\r\n"},
		{"get nope\r\n", "mg nope k f v\r\n", "END\r\n"},
		{"get foo nope\r\n", "get foo nope\r\n", "VALUE foo 5 3\r\nbar\r\nEND\r\n"},
		{"get shifted\r\n", "mg shifted k f v\r\n", "SERVER_ERROR backend failure: parsing\r\n"},
	} {
		if got := c.do(s.req); got != s.want {
			t.Errorf("%q: got %q, want %q", s.req, got, s.want)
		}
		if sent := <-lines; sent != s.sent {
			t.Errorf("%q: the server was sent %q, want %q", s.req, sent, s.sent)
		}
	}

	old := metaServer(t, "ERROR\r\n", nil, lines) // memcached before 1.6
	yaml = "mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  server_protocol: meta\n  servers:\n    - " + old + ":1\n"
	_, paddr = startProxy(t, yaml, "mc")
	if got := dial(t, paddr).do("get foo\r\n"); got != "SERVER_ERROR backend failure: badvalidate\r\n" {
		t.Errorf("server without meta: got %q", got)
	}
	select {
	case l := <-lines:
		t.Errorf("a server that failed the handshake was sent %q", l)
	default:
	}
}

// TestMemcacheGetsCAS takes the cas unique a gets shows (from a VALUE line,
// or from mg's c flag under server_protocol meta) and spends it: the cas
// with it stores, a second cas with it is refused.
func TestMemcacheGetsCAS(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	forServerProtocols(t, func(t *testing.T, extra string) {
		c := memcacheClient(t, extra)
		if got := c.do("set casme 3 0 2\r\nv1\r\n"); got != "STORED\r\n" {
			t.Fatalf("set: %q", got)
		}
		m := regexp.MustCompile(`^VALUE casme 3 2 (\d+)\r\nv1\r\nEND\r\n$`).FindStringSubmatch(c.do("gets casme\r\n"))
		if m == nil {
			t.Fatal("gets casme: no cas unique")
		}
		if got := c.do("cas casme 4 0 2 " + m[1] + "\r\nv2\r\n"); got != "STORED\r\n" {
			t.Fatalf("cas with the unique gets showed: %q", got)
		}
		if got := c.do("cas casme 5 0 2 " + m[1] + "\r\nv3\r\n"); got != "EXISTS\r\n" {
			t.Fatalf("cas with a spent unique: %q", got)
		}
		if got := c.do("get casme\r\n"); got != "VALUE casme 4 2\r\nv2\r\nEND\r\n" {
			t.Fatalf("get after cas: %q", got)
		}
	})
}
