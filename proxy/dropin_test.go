package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// The drop-in tests check, through real sockets, that clients written for
// memcached find what they expect behind the proxy: the servers' version,
// memcached's answers to stats subcommands, a too-large set that drops the
// old value, and errors that leave the connection open. Where memcached
// defines the answer the test asks a real memcached first.

// transcript sends in and then "version\r\n" on a new connection to addr
// and returns every byte up to and including the VERSION line, and whether
// the server closed the connection before it.
func transcript(t *testing.T, addr, in string) (out string, closed bool) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(ioTimeout))
	go io.WriteString(nc, in+"version\r\n") // a big value may not fit the socket buffers
	r := bufio.NewReader(nc)
	var b strings.Builder
	for {
		l, err := r.ReadString('\n')
		b.WriteString(l)
		switch {
		case errors.Is(err, io.EOF) || err != nil && isReset(err):
			return b.String(), true
		case err != nil:
			t.Fatalf("reading the answer to %.60q: %v (have %q)", in, err, b.String())
		case strings.HasPrefix(l, "VERSION "):
			return b.String(), false
		}
	}
}

// warm sends a get through the pool at addr, so that its server's socket
// is validated and the pool knows the server's version.
func warm(t *testing.T, addr string) {
	t.Helper()
	if r := dial(t, addr).do("get warm-up\r\n"); r != "END\r\n" {
		t.Fatalf("warm-up get: %q", r)
	}
}

// TestDropInErrorsKeepConnection sends what memcached answers with an
// error on an open connection, to memcached and to the proxy: the client
// must see the same bytes and the connection must stay open in both, or
// close in both.
func TestDropInErrorsKeepConnection(t *testing.T) {
	_, yaml := memcachedPool(t, 1, "")
	_, addr := startProxy(t, yaml, "mc")
	warm(t, addr)
	mc := testserver.StartMemcached(t).Addr
	big := strings.Repeat("v", 2<<20)
	key251 := strings.Repeat("k", 251)
	tests := []struct{ name, in string }{
		{"empty line", "\r\n"},
		{"unknown command", "foo bar\r\n"},
		{"set negative length", "set k 0 0 -1\r\n"},
		{"set length not a number", "set k 0 0 x\r\n"},
		{"set length not a number, value run as commands", "set k 0 0 x\r\nab\r\n"},
		{"set bad length noreply", "set k 0 0 x noreply\r\n"},
		{"set noreply as length", "set k 0 0 noreply\r\n"},
		{"set length 2^31", "set k 0 0 2147483648\r\n"},
		{"set length INT_MAX", "set k 0 0 2147483647\r\n"},
		{"set bad data chunk", "set k 0 0 1\r\nabc\r\n"},
		{"set bad data chunk noreply", "set k 0 0 1 noreply\r\nabc\r\n"},
		{"set too few tokens", "set k 0 0\r\n"},
		{"set too large", "set k 0 0 " + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n"},
		{"set too large noreply", "set k 0 0 " + strconv.Itoa(len(big)) + " noreply\r\n" + big + "\r\n"},
		{"add too large", "add k 0 0 " + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n"},
		{"cas bad length", "cas k 0 0 x 1\r\n"},
		{"cas without unique", "cas k 0 0 1\r\n"},
		{"ms negative length", "ms k -1\r\n"},
		{"ms bad length", "ms k x\r\n"},
		{"ms bad length, too many flags", "ms k x" + strings.Repeat(" T1", 17) + "\r\n"},
		{"ms bad data chunk", "ms k 2\r\nhix\r\n"},
		{"ms bad data chunk quiet", "ms k 1 q\r\nabc\r\n"},
		{"ms without length", "ms k\r\n"},
		{"ms too large", "ms k " + strconv.Itoa(len(big)) + " T0\r\n" + big + "\r\n"},
		{"get without key", "get\r\n"},
		{"get key too long", "get " + key251 + "\r\n"},
		{"gat bad exptime", "gat x a\r\n"},
		{"incr bad delta", "incr k x\r\n"},
		{"touch bad exptime noreply", "touch k x noreply\r\n"},
		{"delete hold time", "delete k 1\r\n"},
		{"verbosity without level", "verbosity\r\n"},
		{"mg without key", "mg\r\n"},
		{"me without key", "me\r\n"},
		{"stats unknown", "stats foo\r\n"},
		{"stats noreply", "stats noreply\r\n"},
		{"stats reset", "stats reset\r\n"},
		{"stats reset noreply", "stats reset noreply\r\n"},
		{"HTTP closes", "GET / HTTP/1.1\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantClosed := transcript(t, mc, tt.in)
			got, gotClosed := transcript(t, addr, tt.in)
			if got != want || gotClosed != wantClosed {
				t.Errorf("%.60q\nproxy:     %q (closed %v)\nmemcached: %q (closed %v)", tt.in, got, gotClosed, want, wantClosed)
			}
		})
	}
}

// TestDropInVersion checks that "version" answers the servers' version:
// default_version before any socket is validated, the server's after, and
// the lowest of the pool's servers.
func TestDropInVersion(t *testing.T) {
	t.Run("default then learned", func(t *testing.T) {
		servers, yaml := memcachedPool(t, 1, "  default_version: 1.2.3\n")
		_, addr := startProxy(t, yaml, "mc")
		c := dial(t, addr)
		if r := c.do("version\r\n"); r != "VERSION 1.2.3\r\n" {
			t.Fatalf("before any socket is validated: %q, want default_version", r)
		}
		want := dial(t, servers[0].Addr).do("version\r\n")
		if !strings.HasPrefix(want, "VERSION 1.") {
			t.Fatalf("memcached says %q", want)
		}
		c.do("get a\r\n")
		if r := c.do("version\r\n"); r != want {
			t.Errorf("after a request: %q, memcached says %q", r, want)
		}
		if st := statsOf(t, c, "stats\r\n"); st["version"] == strings.TrimPrefix(strings.TrimSuffix(want, "\r\n"), "VERSION ") {
			t.Errorf("stats shows the server's version %q, want the proxy's own", st["version"])
		}
	})
	t.Run("lowest of the pool", func(t *testing.T) {
		// A memcached older than the one installed, as a scripted server:
		// the version is all the pool asks it here.
		old := testserver.Fake(t, func(nc net.Conn) {
			r := bufio.NewReader(nc)
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == "version\r\n" {
					io.WriteString(nc, "VERSION 1.4.25\r\n")
				} else {
					io.WriteString(nc, "ERROR\r\n")
				}
			}
		})
		_, yaml := memcachedPool(t, 1, "  preconnect: true\n")
		yaml += "    - " + old + ":1\n"
		_, addr := startProxy(t, yaml, "mc")
		c := dial(t, addr)
		waitFor(t, ioTimeout, "the pool to answer 1.4.25, its oldest server's version", func() bool { return c.do("version\r\n") == "VERSION 1.4.25\r\n" })
	})
}

// statsOf sends a stats request and returns its counters by name.
func statsOf(t testing.TB, c *client, req string) map[string]string {
	t.Helper()
	c.send(req)
	st := map[string]string{}
	for {
		l := c.line()
		if l == "END" {
			return st
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(l, "STAT "), " ")
		if !ok || !strings.HasPrefix(l, "STAT ") {
			t.Fatalf("%q: line %q", req, l)
		}
		st[name] = value
	}
}

// sniffVersion is what a client that picks features by the server's
// version does (libmemcached reads "VERSION %u.%u.%u"): it asks, parses
// major.minor.patch and enables meta commands from 1.6 on.
func sniffVersion(t *testing.T, c *client) (major, minor, patch int, meta bool) {
	t.Helper()
	line := c.do("version\r\n")
	if _, err := fmt.Sscanf(line, "VERSION %d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("version %q does not parse as major.minor.patch: %v", line, err)
	}
	return major, minor, patch, major > 1 || major == 1 && minor >= 6
}

// TestDropInVersionSniffingClient runs a version-sniffing client against
// memcached and through the proxy: it must take the proxy for the server
// and use the features the server has.
func TestDropInVersionSniffingClient(t *testing.T) {
	servers, yaml := memcachedPool(t, 1, "")
	_, addr := startProxy(t, yaml, "mc")
	warm(t, addr)
	d := dial(t, servers[0].Addr)
	dMajor, dMinor, dPatch, dMeta := sniffVersion(t, d)
	c := dial(t, addr)
	major, minor, patch, meta := sniffVersion(t, c)
	if major != dMajor || minor != dMinor || patch != dPatch || meta != dMeta {
		t.Fatalf("through the proxy the client sees %d.%d.%d (meta %v), memcached is %d.%d.%d (meta %v)",
			major, minor, patch, meta, dMajor, dMinor, dPatch, dMeta)
	}
	if !meta {
		t.Fatalf("memcached %d.%d.%d: the client would not use meta commands", major, minor, patch)
	}
	// The feature it chose works through the proxy.
	if r := c.do("ms sniffed 2 T0\r\nhi\r\n"); r != "HD\r\n" {
		t.Fatalf("ms: %q", r)
	}
	if r := c.do("mg sniffed v\r\n"); r != "VA 2\r\nhi\r\n" {
		t.Errorf("mg: %q", r)
	}
}

// TestDropInStats checks the stats subcommands against memcached's
// answers: unknown ones are ERROR, settings and proxy are the proxy's,
// reset answers RESET and restarts the counters, not the gauges.
func TestDropInStats(t *testing.T) {
	_, yaml := memcachedPool(t, 1, "  item_size_max: 4096\n")
	_, addr := startProxy(t, yaml, "mc")
	mc := testserver.StartMemcached(t).Addr
	// memcached answers these with ERROR; the proxy, which has no slabs,
	// items, or per-connection or per-prefix tables, answers them ERROR.
	d, c := dial(t, mc), dial(t, addr)
	for _, sub := range []string{"foo", "noreply", "a b c"} {
		if r := d.do("stats " + sub + "\r\n"); r != "ERROR\r\n" {
			t.Fatalf("memcached: stats %s: %q", sub, r)
		}
	}
	for _, sub := range []string{"foo", "noreply", "a b c", "slabs", "items", "sizes", "conns", "detail", "detail dump", "cachedump 1 1", "extstore", "sizes_enable"} {
		if r := c.do("stats " + sub + "\r\n"); r != "ERROR\r\n" {
			t.Errorf("stats %s: %q, want ERROR", sub, r)
		}
	}
	set := statsOf(t, c, "stats settings\r\n")
	if set["item_size_max"] != "4096" || set["pool"] != "mc" || set["binding_protocol"] != "ascii" {
		t.Errorf("stats settings: %v", set)
	}
	if _, ok := set["version"]; ok {
		t.Errorf("stats settings shows the general stats: %v", set)
	}

	for range 3 {
		c.do("get a\r\n")
	}
	c.do("incr a x\r\n") // a protocol error
	other := dial(t, addr)
	other.do("get b\r\n")
	before := statsOf(t, c, "stats\r\n")
	if n, _ := strconv.Atoi(before["requests"]); n < 4 {
		t.Fatalf("stats before reset: %v", before)
	}
	if r := c.do("stats reset\r\n"); r != "RESET\r\n" {
		t.Fatalf("stats reset: %q", r)
	}
	after := statsOf(t, c, "stats\r\n")
	// Reset: counters. requests counts the stats request just made.
	for name, want := range map[string]string{"requests": "1", "protocol_errors": "0", "total_connections": "0", "client_eof": "0"} {
		if after[name] != want {
			t.Errorf("after reset %s = %s, want %s", name, after[name], want)
		}
	}
	// Kept: gauges and what does not count.
	for _, name := range []string{"curr_connections", "client_connections", "pid", "version", "pool"} {
		if after[name] != before[name] {
			t.Errorf("after reset %s = %s, was %s: not a counter, reset anyway", name, after[name], before[name])
		}
	}
	if before["curr_connections"] == "0" || after["client_connections"] != "2" {
		t.Errorf("gauges: before %v after %v", before, after)
	}
	c.do("get a\r\n")
	px := statsOf(t, c, "stats proxy\r\n")
	if px["cmd_get"] != "1" {
		t.Errorf("stats proxy after reset and one get: cmd_get %q, want 1", px["cmd_get"])
	}
	// The proxy counts on: a second reset starts from the new values.
	c.do("stats reset\r\n")
	if st := statsOf(t, c, "stats\r\n"); st["requests"] != "1" {
		t.Errorf("after a second reset requests = %s, want 1", st["requests"])
	}
}

// TestDropInTooLargeDropsOldValue checks that a set larger than
// item_size_max gets memcached's error and leaves no stale value: the
// key's server has dropped it before the client reads the error, as
// memcached drops it itself. add, replace, append, prepend and cas keep
// it, as in memcached.
func TestDropInTooLargeDropsOldValue(t *testing.T) {
	servers, yaml := memcachedPool(t, 1, "  item_size_max: 4096\n")
	_, addr := startProxy(t, yaml, "mc")
	srv := servers[0].Addr
	c := dial(t, addr)
	big := strings.Repeat("x", 5000)
	tests := []struct {
		name, key, req, reply string
		dropped               bool
	}{
		{"set", "k1", "set k1 0 0 5000\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", true},
		{"set noreply", "k2", "set k2 0 0 5000 noreply\r\n" + big + "\r\n", "", true},
		{"ms", "k3", "ms k3 5000 T0\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", true},
		{"ms quiet shows the error", "k4", "ms k4 5000 q\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", true},
		{"ms base64 key", "k5", "ms azU= 5000 b\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", true},
		{"ms add mode", "k6", "ms k6 5000 ME\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", true},
		{"add keeps it", "k7", "add k7 0 0 5000\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", false},
		{"append keeps it", "k8", "append k8 0 0 5000\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", false},
		{"cas keeps it", "k9", "cas k9 0 0 5000 1\r\n" + big + "\r\n", "SERVER_ERROR object too large for cache\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := c.do("set " + tt.key + " 0 0 3\r\nold\r\n"); r != "STORED\r\n" {
				t.Fatalf("set: %q", r)
			}
			if _, ok := direct(t, srv, tt.key); !ok {
				t.Fatalf("%s not on the server", tt.key)
			}
			c.send(tt.req + "mn\r\n")
			got := c.line() + "\r\n"
			if got == "MN\r\n" {
				got = ""
			} else if c.line() != "MN" {
				t.Fatal("more than one reply")
			}
			if got != tt.reply {
				t.Errorf("reply %q, want %q", got, tt.reply)
			}
			// No waiting: the server heard of it before the client did.
			v, ok := direct(t, srv, tt.key)
			if ok == tt.dropped {
				t.Errorf("on the server after the error: %q (present %v), want dropped %v", v, ok, tt.dropped)
			}
			if r := c.do("get " + tt.key + "\r\n"); (r == "END\r\n") != tt.dropped {
				t.Errorf("get through the proxy: %q", r)
			}
		})
	}
}
