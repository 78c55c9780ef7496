package lua_test

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// The request and response methods of memcached's V2 proxy, and its
// mutators and inspectors, end to end: what the client sees and what the
// backend receives, as memcached 1.6.45's proxy gives them (observed on
// it with the same requests).

// tap forwards connections to addr and records what the proxy sends.
type tap struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// sent returns what reached the backend since the last call, without the
// version checks of new connections.
func (tp *tap) sent() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	s := strings.ReplaceAll(tp.buf.String(), "version\r\n", "")
	tp.buf.Reset()
	return s
}

func (tp *tap) Write(p []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.buf.Write(p)
}

// tapRelay starts a relay to addr and returns its port and its record.
func tapRelay(t testing.TB, addr string) (int, *tap) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				cl.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, cl, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(io.MultiWriter(tp, up), cl); up.Close() }()
			go func() { defer wg.Done(); io.Copy(cl, up); cl.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, tp
}

// step is one request of a test: what the client sends, what it must get
// back, and what the backend must receive ("-" for anything).
type step struct{ send, reply, backend string }

func runSteps(t *testing.T, c *client, tp *tap, steps []step) {
	t.Helper()
	for _, s := range steps {
		if got := c.do(s.send); got != s.reply {
			t.Errorf("%q:\n got %q\nwant %q", s.send, got, s.reply)
		}
		if got := tp.sent(); s.backend != "-" && got != s.backend {
			t.Errorf("%q: backend got %q, want %q", s.send, got, s.backend)
		}
	}
}

func TestV2RequestMethods(t *testing.T) {
	mc := memcached(t, 1)
	port, tp := tapRelay(t, mc[0].Addr)
	addr, _ := testdataRoutes(t, "v2_methods.lua", map[int]int{11211: port}, "")
	d := dial(t, mc[0].Addr)
	d.do("ms c/match/x 3 T0\r\nabc\r\n")
	d.do("ms c/resm/x 3 F5\r\nabc\r\n")
	c := dial(t, addr)
	tail := `|;ERR has_flag(): meta flag must be a single character;false` + "\r\n"
	runSteps(t, c, tp, []step{
		// raw_line, raw_value, token_int(0 .. ntokens+1), flag_token_int
		{"mg c/meth/k N-5 T30 Oabc v k X12345678901234567890123 7\r\n",
			`SERVER_ERROR "mg c/meth/k N-5 T30 Oabc v k X12345678901234567890123 7";nil|nil nil nil nil nil nil nil nil nil 7 nil|N=true,-5|T=true,30|O=true|v=false|X=false` + tail, ""},
		{"ms c/meth/k 5 T30 F7\r\nhello\r\n",
			`SERVER_ERROR "ms c/meth/k 5 T30 F7";"hello\r\n"|nil nil nil 5 nil nil nil|N=false|T=true,30|O=false|v=false|X=false` + tail, ""},
		{"set c/meth/k 1 2 5\r\nhello\r\n",
			`SERVER_ERROR "set c/meth/k 1 2 5";"hello\r\n"|nil nil nil 1 2 5 nil|N=false|T=false|O=false|v=false|X=false` + tail, ""},
		{"gat 10 c/meth/k\r\n", `SERVER_ERROR "gat 10 c/meth/k";nil|nil nil 10 nil nil|N=false|T=false|O=false|v=false|X=false` + tail, ""},
		// flag edits: what reaches the backend, byte for byte
		{"mg c/fadd/send v\r\n", "CLIENT_ERROR bad command line format\r\n", "mg c/fadd/send v T30 Ostr F1.5\r\n"},
		{"mg c/fset/send T10 N v\r\n", "CLIENT_ERROR bad token in command line format\r\n", "mg c/fset/send T99 N v Oxy\r\n"},
		{"mg c/fset/send v\r\n", "CLIENT_ERROR bad token in command line format\r\n", "mg c/fset/send v T99 N Oxy\r\n"},
		{"mg c/frep/send T10 v k\r\n", "CLIENT_ERROR invalid flag\r\n", "mg c/frep/send N7 f k Y\r\n"},
		{"mg c/fdel/send v T10\r\n", "EN\r\n", "mg c/fdel/send\r\n"},
		{"mg c/fdel/send T10 v\r\n", "EN\r\n", "mg c/fdel/send\r\n"},
		{"ms c/fadd/send 2 T0\r\nhi\r\n", "CLIENT_ERROR bad command line format\r\n", "ms c/fadd/send 2 T0 v Ostr F1.5\r\nhi\r\n"},
		// a text request has no flags: flag_set appends its token anyway
		{"get c/text/send\r\n", "END\r\n", "get c/text/send T30\r\n"},
		{"set c/text/send 0 0 2\r\nhi\r\n", "STORED\r\n", "set c/text/send 0 0 2 T30\r\nhi\r\n"},
		{"touch c/text/send 10\r\n", "TOUCHED\r\n", "touch c/text/send 10 T30\r\n"},
		{"mg c/fadd v\r\n", `SERVER_ERROR truefalsefalsetrue|ERR request: meta flag must be a single character|ERR request: invalid flag, must be A-Z,a-z|ERR request: invalid flag argument|true|mg c/fadd v T30 Ostr F1.5` + "\r\n", ""},
		{"mg c/fdel T1 v\r\n", "SERVER_ERROR truefalsetrue|mg c/fdel;2\r\n", ""},
		{"mg c/match/go v\r\n", `SERVER_ERROR true|false,"key in response does not match request key"|false,"request opaque does not match response opaque"|true|false,"opaque in request but not in response";false|false,"opaque in request but not in response";false|ERR bad argument #2 to (anonymous) (mcp.response expected)` + "\r\n", "-"},
		{"mg c/resm/go v\r\n", `SERVER_ERROR "VA 3 f5 t-1 s3 kc/resm/x O55\r\nabc\r\n"|true"VA 3    t-1 s3 kc/resm/x O55\r\nabc\r\n","   t-1 s3 kc/resm/x O55"|falsetrue"VA 3    t-1 s3 kc/resm/x    \r\nabc\r\n"|false;ERR request: meta flag must be a single character;ERR request: invalid flag, must be A-Z,a-z|false|;nil,true,0,nil` + "\r\n", "-"},
		// flag_blank's spaces reach the client
		{"mg c/blankret v\r\n", "VA 3    t-1 kc/resm/x\r\nabc\r\n", "-"},
		// rctx:request_new and response_new: u = 2, both made in the generator
		{"mg c/newobj v\r\n", `SERVER_ERROR ERR rctx request new: object count limit reached;ERR rctx request new: object count limit reached|"",0,nil,true,0` + "\r\n", ""},
		// an empty request cannot be queued
		{"mg c/newobj/sendreq v\r\n", "SERVER_ERROR lua failure\r\n", ""},
	})
	// a closed or empty response sends the client nothing, as memcached does
	for _, k := range []string{"c/resm/ret", "c/newobj/retres"} {
		if got := c.do("mg " + k + " v\r\nmn\r\n"); got != "MN\r\n" {
			t.Errorf("%s: %q", k, got)
		}
	}
}
