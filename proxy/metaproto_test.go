package proxy_test

import (
	"bufio"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// probeServer is a fake memcached whose n-th connection (from 0) answers
// "mn" as mn(n) says: a reply ("MN\r\n", memcached 1.6; "ERROR\r\n",
// memcached before it), or "" to close the connection instead. It answers
// "mg <key> k f v" and "get <keys>" with a one-byte hit per key, records
// every other line it is sent in lines, and closes a connection after
// serving its quota(n) requests (0: no limit), as a server that is
// restarted or replaced.
func probeServer(t *testing.T, mn func(n int) string, quota func(n int) int, lines chan<- string) string {
	var conns atomic.Int32
	return testserver.Fake(t, func(nc net.Conn) {
		n := int(conns.Add(1)) - 1
		r := bufio.NewReader(nc)
		served := 0
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
				reply := mn(n)
				if reply == "" {
					return
				}
				nc.Write([]byte(reply))
				continue
			}
			lines <- l
			f := strings.Fields(l)
			var out string
			switch {
			case len(f) == 5 && f[0] == "mg" && strings.Join(f[2:], " ") == "k f v":
				out = "VA 1 k" + f[1] + " f0\r\nx\r\n"
			case len(f) > 1 && f[0] == "get":
				for _, k := range f[1:] {
					out += "VALUE " + k + " 0 1\r\nx\r\n"
				}
				out += "END\r\n"
			default:
				out = "ERROR\r\n"
			}
			nc.Write([]byte(out))
			if served++; quota != nil && quota(n) > 0 && served >= quota(n) {
				return
			}
		}
	})
}

func always(s string) func(int) string { return func(int) string { return s } }

func oneByteHits(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("VALUE " + k + " 0 1\r\nx\r\n")
	}
	return b.String() + "END\r\n"
}

// settingOf returns the value of name in "stats settings".
func settingOf(t *testing.T, c *client, name string) string {
	t.Helper()
	m := regexp.MustCompile(`STAT ` + name + ` ([^\r]*)\r\n`).FindStringSubmatch(c.do("stats settings\r\n"))
	if m == nil {
		t.Fatalf("stats settings has no %s", name)
	}
	return m[1]
}

// TestServerProtocolAuto checks the default server_protocol on the wire,
// per kind of server: a server that answers mn is sent a one-key get as
// mg (a multi-key get as written), one that answers ERROR (memcached
// before 1.6) or closes the socket on mn is sent text; each pool says
// what it uses in its log and in "stats settings".
func TestServerProtocolAuto(t *testing.T) {
	for _, tt := range []struct {
		name, mn, sent, uses string
	}{
		{"meta server", "MN\r\n", "mg foo k f v\r\n", "meta 1/1"},
		{"old server", "ERROR\r\n", "get foo\r\n", "text 0/1"},
		{"closes on mn", "", "get foo\r\n", "text 0/1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lines := make(chan string, 16)
			addr := probeServer(t, always(tt.mn), nil, lines)
			srv, logs := startLoggedProxy(t, "mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  servers:\n    - "+addr+":1\n", "x.yml")
			c := dial(t, srv.Addr("mc").String())
			if got := c.do("get foo\r\n"); got != oneByteHits("foo") {
				t.Fatalf("get foo: %q", got)
			}
			if sent := <-lines; sent != tt.sent {
				t.Errorf("get foo: the server was sent %q, want %q", sent, tt.sent)
			}
			if got := c.do("get foo bar\r\n"); got != oneByteHits("foo", "bar") {
				t.Fatalf("get foo bar: %q", got)
			}
			if sent := <-lines; sent != "get foo bar\r\n" {
				t.Errorf("get foo bar: the server was sent %q", sent)
			}
			if got := settingOf(t, c, "server_protocol"); got != "auto" {
				t.Errorf("server_protocol %q, want auto", got)
			}
			if got := settingOf(t, c, "server_protocol_uses"); got != tt.uses {
				t.Errorf("server_protocol_uses %q, want %q", got, tt.uses)
			}
			uses := strings.Fields(tt.uses)[0]
			if !strings.Contains(logs.String(), `msg="server protocol" pool=mc server_protocol=auto uses=`+uses+" ") {
				t.Errorf("log lacks the pool's protocol:\n%s", logs)
			}
		})
	}
}

// TestServerProtocolAutoMixed runs a pool of a meta server and an old one:
// each is sent what it speaks, whichever key lands where.
func TestServerProtocolAutoMixed(t *testing.T) {
	newer, older := make(chan string, 64), make(chan string, 64)
	a := probeServer(t, always("MN\r\n"), nil, newer)
	b := probeServer(t, always("ERROR\r\n"), nil, older)
	srv, logs := startLoggedProxy(t, "mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  preconnect: true\n  servers:\n    - "+
		a+":1\n    - "+b+":1\n", "x.yml")
	c := dial(t, srv.Addr("mc").String())
	var seenMeta, seenText bool
	for i := range 32 {
		key := "user:" + strconv.Itoa(i*7919)
		if got := c.do("get " + key + "\r\n"); got != oneByteHits(key) {
			t.Fatalf("get %s: %q", key, got)
		}
		select {
		case l := <-newer:
			seenMeta = true
			if l != "mg "+key+" k f v\r\n" {
				t.Errorf("the meta server was sent %q", l)
			}
		case l := <-older:
			seenText = true
			if l != "get "+key+"\r\n" {
				t.Errorf("the old server was sent %q", l)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("get %s reached no server", key)
		}
	}
	if !seenMeta || !seenText {
		t.Fatalf("keys reached meta %v, text %v: want both", seenMeta, seenText)
	}
	if got := settingOf(t, c, "server_protocol_uses"); got != "mixed 1/2" {
		t.Errorf("server_protocol_uses %q, want mixed 1/2", got)
	}
	if !strings.Contains(logs.String(), "uses=mixed servers_meta=1 servers_text=1 servers=2") {
		t.Errorf("log lacks the mixed pool:\n%s", logs)
	}
}

// TestServerProtocolAutoReplaced replaces a meta server by an old one at
// the same address (the first connection answers mn, then closes after
// one request; later ones answer ERROR): the next socket is sent text,
// and the change is logged.
func TestServerProtocolAutoReplaced(t *testing.T) {
	lines := make(chan string, 64)
	var mu sync.Mutex
	addr := probeServer(t, func(n int) string {
		mu.Lock()
		defer mu.Unlock()
		if n == 0 {
			return "MN\r\n"
		}
		return "ERROR\r\n"
	}, func(n int) int {
		if n == 0 {
			return 1
		}
		return 0
	}, lines)
	srv, logs := startLoggedProxy(t, "mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  server_failure_limit: 0\n  servers:\n    - "+addr+":1\n", "x.yml")
	c := dial(t, srv.Addr("mc").String())
	if got := c.do("get foo\r\n"); got != oneByteHits("foo") {
		t.Fatalf("get foo: %q", got)
	}
	if sent := <-lines; sent != "mg foo k f v\r\n" {
		t.Fatalf("the meta server was sent %q", sent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := c.do("get foo\r\n")
		if got == oneByteHits("foo") {
			break
		}
		if !strings.HasPrefix(got, "SERVER_ERROR backend failure") || time.Now().After(deadline) {
			t.Fatalf("get foo after the server was replaced: %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sent := <-lines; sent != "get foo\r\n" {
		t.Errorf("the old server was sent %q", sent)
	}
	if got := settingOf(t, c, "server_protocol_uses"); got != "text 0/1" {
		t.Errorf("server_protocol_uses %q, want text 0/1", got)
	}
	for _, want := range []string{`msg="server protocol changed" pool=mc server=` + addr + " meta=false",
		"uses=meta servers_meta=1", "uses=text servers_meta=0 servers_text=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// TestServerProtocolAutoMemcached runs real memcached under the default:
// its sockets speak meta, and gets, gets with cas, multi-gets and misses
// give the text replies.
func TestServerProtocolAutoMemcached(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	c := memcacheClient(t, "")
	if got := c.do("set foo 7 0 3\r\nbar\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	if got := c.do("get foo\r\n"); got != "VALUE foo 7 3\r\nbar\r\nEND\r\n" {
		t.Fatalf("get: %q", got)
	}
	if got := c.do("get nope\r\n"); got != "END\r\n" {
		t.Fatalf("get miss: %q", got)
	}
	if got := c.do("gets foo\r\n"); !regexp.MustCompile(`^VALUE foo 7 3 \d+\r\nbar\r\nEND\r\n$`).MatchString(got) {
		t.Fatalf("gets: %q", got)
	}
	if got := c.do("get foo nope foo\r\n"); got != "VALUE foo 7 3\r\nbar\r\nVALUE foo 7 3\r\nbar\r\nEND\r\n" {
		t.Fatalf("multi-get: %q", got)
	}
	if got := settingOf(t, c, "server_protocol"); got != "auto" {
		t.Errorf("server_protocol %q, want auto", got)
	}
	// The pool has 3 servers; each validated socket counts once it is used.
	if got := settingOf(t, c, "server_protocol_uses"); !regexp.MustCompile(`^meta [1-3]/3$`).MatchString(got) {
		t.Errorf("server_protocol_uses %q, want meta n/3", got)
	}
}

// TestServerProtocolAutoNearCache checks that a pool with a near cache,
// whose router wraps the sharded one, says what its servers speak as any
// auto pool does.
func TestServerProtocolAutoNearCache(t *testing.T) {
	lines := make(chan string, 16)
	addr := probeServer(t, always("MN\r\n"), nil, lines)
	srv, logs := startLoggedProxy(t, "mc:\n  listen: 127.0.0.1:0\n  timeout: 2000\n  near_cache: 1\n  servers:\n    - "+addr+":1\n", "x.yml")
	c := dial(t, srv.Addr("mc").String())
	if got := c.do("get foo\r\n"); got != oneByteHits("foo") {
		t.Fatalf("get foo: %q", got)
	}
	if got := settingOf(t, c, "server_protocol_uses"); got != "meta 1/1" {
		t.Errorf("server_protocol_uses %q, want meta 1/1", got)
	}
	if !strings.Contains(logs.String(), `msg="server protocol" pool=mc server_protocol=auto uses=meta `) {
		t.Errorf("log lacks the pool's protocol:\n%s", logs)
	}
}
