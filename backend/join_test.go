package backend_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// recorder is a relay to addr that keeps every byte sent to the server.
type recorder struct {
	addr string
	mu   sync.Mutex
	up   strings.Builder
}

func startRecorder(t *testing.T, addr string) *recorder {
	t.Helper()
	r := &recorder{}
	r.addr = testserver.Fake(t, func(nc net.Conn) {
		up, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer up.Close()
		go io.Copy(nc, up)
		buf := make([]byte, 64<<10)
		for {
			n, err := nc.Read(buf)
			if n > 0 {
				r.mu.Lock()
				r.up.Write(buf[:n])
				r.mu.Unlock()
				up.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	})
	return r
}

// take returns what the server was sent since the last take, without the
// socket's validation.
func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.ReplaceAll(r.up.String(), "version\r\n", "")
	r.up.Reset()
	return s
}

// stageAll sends reqs as one batch, as a client's read of pipelined
// requests is, and returns the replies in order.
func stageAll(t *testing.T, b *backend.Backend, reqs ...string) []codec.Reply {
	t.Helper()
	var wg sync.WaitGroup
	calls := make([]backend.Call, len(reqs))
	var bt backend.Batch
	for i, r := range reqs {
		wg.Add(1)
		calls[i] = backend.Call{Req: request(t, r), Done: func(*backend.Call) { wg.Done() }}
		b.Stage(&calls[i], 0, &bt)
	}
	bt.Flush()
	return replies(t, &wg, calls)
}

// directly sends each request alone to memcached at addr and returns
// its reply: what memcached answers the request by itself.
func directly(t *testing.T, addr string, reqs ...string) []string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	var out []string
	for _, req := range reqs {
		if _, err := nc.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		var reply strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%q: %v", req, err)
			}
			reply.WriteString(line)
			if strings.HasPrefix(line, "VALUE ") {
				f := strings.Fields(line)
				data := make([]byte, atoi(t, f[3])+2)
				if _, err := io.ReadFull(r, data); err != nil {
					t.Fatal(err)
				}
				reply.Write(data)
				continue
			}
			if !strings.HasPrefix(req, "get") || line == "END\r\n" || strings.Contains(line, "ERROR") {
				break
			}
		}
		out = append(out, reply.String())
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a length: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestJoinedGets: the one-key gets of a batch reach memcached as one
// multi-get per run (a run ends at another command, at a key it already
// holds, and between get and gets), and each call gets what memcached
// answers the get alone, hits big and small, misses and cas alike.
func TestJoinedGets(t *testing.T) {
	srv := testserver.StartMemcached(t, "-I", "2m")
	big := strings.Repeat("b", 300<<10) // beyond a reply the socket carves from its arena
	directly(t, srv.Addr,
		"set a 1 0 2\r\nva\r\n", "set c 3 0 2\r\nvc\r\n",
		"set big 0 0 "+itoa(len(big))+"\r\n"+big+"\r\n", "delete x\r\n")
	reqs := []string{
		"get a\r\n", "get b\r\n", "get c\r\n",
		"get a\r\n",
		"gets a\r\n", "gets c\r\n",
		"set x 0 0 2\r\nxx\r\n",
		"get x\r\n", "get big\r\n", "get nope\r\n",
		"gets nope\r\n",
	}
	want := directly(t, srv.Addr, reqs...)

	rec := startRecorder(t, srv.Addr)
	b := backend.New(backend.Config{Addr: rec.addr, Dialect: mc, Timeout: 5 * time.Second})
	defer b.Close()
	if r := stageAll(t, b, "get a\r\n"); string(r[0].Raw) != want[0] { // the socket is up: the next batch goes as one write
		t.Fatalf("first get: %q", r[0].Raw)
	}
	rec.take()
	got := stageAll(t, b, reqs...)
	for i, r := range got {
		if string(r.Raw) != want[i] || r.Err != nil {
			t.Errorf("%q: got %q (%v), want %q", reqs[i], abbrev(string(r.Raw)), r.Err, abbrev(want[i]))
		}
	}
	for i, kind := range []codec.ReplyKind{codec.ReplyOK, codec.ReplyMiss, codec.ReplyOK, codec.ReplyOK} {
		if got[i].Kind != kind {
			t.Errorf("%q: kind %v, want %v", reqs[i], got[i].Kind, kind)
		}
	}
	sent := "get a b c\r\nget a\r\ngets a c\r\nset x 0 0 2\r\nxx\r\nget x big nope\r\ngets nope\r\n"
	if s := rec.take(); s != sent {
		t.Errorf("memcached was sent\n%q\nwant\n%q", s, sent)
	}
	// RequestBytes counts the requests as they were made, joined or not.
	if n, want := b.Stats().RequestBytes.Load(), len("get a\r\n")+len(strings.Join(reqs, "")); n != int64(want) {
		t.Errorf("request bytes %d, want %d", n, want)
	}
}

// TestJoinedReplyErrors: an error line ends a joined reply, and every get
// still unanswered gets it; the socket goes on. A block no joined key
// still unanswered asked for is a desync: every call from there fails.
func TestJoinedReplyErrors(t *testing.T) {
	reqs := []string{"get a\r\n", "get b\r\n", "get c\r\n", "set z 0 0 1\r\nz\r\n", "get d\r\n"}
	t.Run("error", func(t *testing.T) {
		oom := "SERVER_ERROR out of memory writing get response\r\n"
		addr := script(t, 3, // "get a b c", the set, "get d"
			"VALUE a 0 1\r\n1\r\n"+oom, "STORED\r\n", "VALUE d 0 1\r\n4\r\nEND\r\n")
		b := backend.New(backend.Config{Addr: addr, Dialect: mc, Timeout: 5 * time.Second})
		defer b.Close()
		got := stageAll(t, b, reqs...)
		want := []string{"VALUE a 0 1\r\n1\r\nEND\r\n", oom, oom, "STORED\r\n", "VALUE d 0 1\r\n4\r\nEND\r\n"}
		kinds := []codec.ReplyKind{codec.ReplyOK, codec.ReplyError, codec.ReplyError, codec.ReplyOK, codec.ReplyOK}
		for i, r := range got {
			if string(r.Raw) != want[i] || r.Kind != kinds[i] || r.Err != nil {
				t.Errorf("%q: got %q, kind %v (%v), want %q, kind %v", reqs[i], r.Raw, r.Kind, r.Err, want[i], kinds[i])
			}
		}
	})
	t.Run("stray block", func(t *testing.T) {
		addr := script(t, 3, "VALUE zz 0 1\r\n1\r\nEND\r\n", "STORED\r\n", "END\r\n")
		b := backend.New(backend.Config{Addr: addr, Dialect: mc, Timeout: 5 * time.Second})
		defer b.Close()
		for i, r := range stageAll(t, b, reqs...) {
			if causeOf(r) != "parsing" {
				t.Errorf("%q: got %q (%v), want a parsing failure", reqs[i], r.Raw, r.Err)
			}
		}
	})
}
