package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
)

func TestAuth(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.mu.Lock()
	fc.password = "s3cret"
	fc.mu.Unlock()
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)[:1]})
	want := "-CLUSTERDOWN shardproxy has no cluster slot map: " + fc.nodes[0].addr +
		": cluster: ping refused: NOAUTH Authentication required.\r\n"
	if got := do(t, c, "GET", "k"); got != want {
		t.Fatalf("without the password:\n got %q\nwant %q", got, want)
	}
	withPass := newTestCluster(t, Config{Seeds: seedsOf(fc), Node: backend.Config{
		Handshake: codec.HandshakeOptions{Password: "s3cret"}}})
	if got := do(t, withPass, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("with the password: %q", got)
	}
}

func TestSlotsFallback(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.mu.Lock()
	fc.noShards = true
	fc.mu.Unlock()
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	if got := do(t, c, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if m := c.Map(); m == nil || len(m.Shards) != 2 || m.Covered() != Slots {
		t.Fatalf("map %+v", m)
	}
}

// A server that is no cluster node: clear errors, no crash, and the
// refresher keeps trying.
func TestNotACluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for {
					args, err := readCommand(r)
					if err != nil {
						return
					}
					reply := "+PONG\r\n"
					if strings.EqualFold(args[0], "cluster") {
						reply = "-ERR This instance has cluster support disabled\r\n"
					}
					io.WriteString(nc, reply)
				}
			}()
		}
	}()
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	c := newTestCluster(t, Config{Seeds: []string{ln.Addr().String()}, Logger: log, RefreshInterval: 100 * time.Millisecond})
	want := "-CLUSTERDOWN shardproxy has no cluster slot map: " + ln.Addr().String() +
		": cluster: node replied -ERR This instance has cluster support disabled\r\n"
	if got := do(t, c, "GET", "k"); got != want {
		t.Fatalf("GET:\n got %q\nwant %q", got, want)
	}
	waitFor(t, "a second refresh", func() bool { return c.Stats().RefreshFailures >= 2 })
	if got := do(t, c, "SET", "k", "v"); got != want {
		t.Fatalf("SET: %q", got)
	}
	if got := do(t, c, "FLUSHDB"); got != want {
		t.Fatalf("FLUSHDB: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "level=ERROR msg=\"cluster has no slot map\""); n != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "cluster support disabled") {
		t.Fatalf("log lacks the reason:\n%s", logs.String())
	}
}

// Seeds that are down are skipped.
func TestDeadSeed(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	fc := newFakeCluster(t, 1)
	c := newTestCluster(t, Config{Seeds: []string{dead, fc.nodes[0].addr}})
	if got := do(t, c, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
}

// A node that leaves the map is closed once idle; requests follow the map.
func TestNodeRetired(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)[:1], RefreshInterval: time.Hour})
	do(t, c, "SET", keyIn(9000, "n"), "v") // node 1
	if st := c.Stats(); st.Nodes != 2 {
		t.Fatalf("Nodes = %d", st.Nodes)
	}
	fc.mu.Lock()
	for s := range fc.owner {
		fc.owner[s] = 0
	}
	fc.nodes[1].replica = 0 // node 1 becomes node 0's replica
	fc.mu.Unlock()
	if got := do(t, c, "GET", keyIn(9000, "n")); got != bulkString("v") {
		t.Fatalf("GET: %q", got)
	}
	waitFor(t, "the refresh after MOVED", func() bool { return c.Stats().Masters == 1 })
	if st := c.Stats(); st.Nodes != 1 {
		t.Fatalf("Nodes = %d after node 1 left the masters (read_from master: replicas get no node)", st.Nodes)
	}
}

// Requests that arrive before the first map wait for it.
func TestParkedUntilFirstMap(t *testing.T) {
	fc := newFakeCluster(t, 1)
	gate := make(chan struct{})
	fc.mu.Lock()
	fc.inject = func(_ *fakeNode, args []string, _ bool) string {
		if args[0] == "CLUSTER" {
			fc.mu.Unlock()
			<-gate
			fc.mu.Lock()
		}
		return ""
	}
	fc.mu.Unlock()
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	r := make(result, 1)
	c.Route(request(t, "SET", "k", "v"), 1, r)
	select {
	case got := <-r:
		t.Fatalf("answered before the map: %q", got)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if got := <-r; got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
}

func TestStartMap(t *testing.T) {
	fc := newFakeCluster(t, 2)
	first := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	do(t, first, "SET", "k", "v")
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	// A reload's cluster starts from the running map, even with no live seed.
	c := newTestCluster(t, Config{Seeds: []string{dead}, Start: first.Map()})
	if got := do(t, c, "GET", "k"); got != bulkString("v") {
		t.Fatalf("GET: %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Seeds: []string{"nohost"}},
		{Seeds: []string{"127.0.0.1:1"}, Node: backend.Config{Handshake: codec.HandshakeOptions{DB: 2}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
	for _, s := range []string{"", "master", "prefer_replica", "replica"} {
		rf, err := ParseReadFrom(s)
		if err != nil || (s != "" && rf.String() != s) {
			t.Errorf("ParseReadFrom(%q) = %v, %v", s, rf, err)
		}
	}
	if _, err := ParseReadFrom("slave"); err == nil {
		t.Error("ParseReadFrom(slave): no error")
	}
}

func TestClosed(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	do(t, c, "SET", "k", "v")
	c.Close()
	if got := do(t, c, "GET", "k"); got != "-ERR cluster: closed\r\n" {
		t.Fatalf("after Close: %q", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Nodes that drop their connections under load (with ASK pairs in flight):
// every request gets its reply or an -ERR naming the node, never a hang,
// another request's reply, or a race.
func TestNodesDropConnections(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	fc.mu.Lock()
	fc.migrating[300] = 1
	fc.mu.Unlock()
	tag := keyIn(300, "t")
	// The slot map is loaded before the drops begin: a map never loaded
	// answers -CLUSTERDOWN, which is another test's case.
	first := make(result, 1)
	c.Route(request(t, "SET", "k", "v"), 0, first)
	if out := <-first; out != "+OK\r\n" {
		t.Fatalf("SET before the drops: %q", out)
	}
	stop := make(chan struct{})
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			for _, n := range fc.nodes {
				n.drop()
			}
		}
	}()
	var wg sync.WaitGroup
	var oks, errs atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 400 {
				k := fmt.Sprintf("k%d-%d", g, i)
				if i%2 == 0 {
					k = fmt.Sprintf("{%s}%d-%d", tag, g, i)
				}
				r := make(result, 1)
				c.Route(request(t, "SET", k, "v"), uint32(g), r)
				select {
				case out := <-r:
					switch {
					case out == "+OK\r\n":
						oks.Add(1)
					case strings.HasPrefix(out, "-ERR node 127.0.0.1:"):
						errs.Add(1)
					default:
						t.Errorf("SET %s: %q", k, out)
						return
					}
				case <-time.After(10 * time.Second):
					t.Errorf("SET %s: no reply within 10s", k)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-dropped
	t.Logf("%d replies, %d errors", oks.Load(), errs.Load())
	if oks.Load() == 0 {
		t.Fatal("no request succeeded")
	}
}
