package resp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// The parity tests run the real redis-server (7.0.15 is the reference) and
// check that a client sees from the proxy what it sees from Redis. They
// need the redis-server binary; go test -short leaves them out.

const (
	parityTimeout = 5 * time.Second
	// hangWait is how long a connection that got no complete request must
	// stay silent and open to count as waiting for more input.
	hangWait = 300 * time.Millisecond
	probe    = "PING\r\n"
)

func startRedis(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil && !testing.Short() {
		t.Fatalf("redis-server not found in PATH: install it (apt-get install redis-server) or run go test -short")
	}
	return testserver.StartRedis(t, args...).Addr
}

func dialRedis(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, parityTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// transcript is what a client sees after sending its input (and a PING
// probe): the bytes, and whether the server then closed the connection or
// sat waiting for the rest of a request.
type transcript struct {
	out    string
	closed bool
	hung   bool
}

// redisTranscript sends in and the probe to a fresh connection.
func redisTranscript(t *testing.T, addr, in string) transcript {
	t.Helper()
	c := dialRedis(t, addr)
	c.SetWriteDeadline(time.Now().Add(parityTimeout))
	go io.WriteString(c, in+probe) // the server may close before reading it all
	var got transcript
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(parityTimeout)
	for {
		wait := deadline
		if time.Now().Add(hangWait).Before(wait) {
			wait = time.Now().Add(hangWait)
		}
		c.SetReadDeadline(wait)
		n, err := c.Read(buf)
		got.out += string(buf[:n])
		switch {
		case err == nil:
			if strings.HasSuffix(got.out, "+PONG\r\n") {
				return got
			}
		case errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset"):
			got.closed = true
			return got
		case errors.Is(err, os.ErrDeadlineExceeded):
			got.hung = true
			return got
		default:
			t.Fatal(err)
		}
	}
}

// miniProxy is the dialect driving a real backend the way the proxy does
// for one client: requests parsed by one parser, local and refused ones
// answered, the others' Wire sent to the backend and its reply framed by
// ParseReply.
type miniProxy struct {
	t       *testing.T
	backend net.Conn
	r       *bufio.Reader
}

func newMiniProxy(t *testing.T, addr string) *miniProxy {
	c := dialRedis(t, addr)
	return &miniProxy{t: t, backend: c, r: bufio.NewReader(c)}
}

// forward sends wire and returns the backend's reply.
func (m *miniProxy) forward(wire []byte) []byte {
	m.t.Helper()
	m.backend.SetDeadline(time.Now().Add(parityTimeout))
	if _, err := m.backend.Write(wire); err != nil {
		m.t.Fatal(err)
	}
	var buf []byte
	for {
		n, _, err := dialect.ParseReply(buf, nil)
		if err == nil {
			if n != len(buf) {
				m.t.Fatalf("reply to %q has bytes left over: %q", wire, buf[n:])
			}
			return buf
		}
		if !errors.Is(err, codec.ErrIncomplete) {
			m.t.Fatalf("reply to %q: %v (have %q)", wire, err, buf)
		}
		chunk := make([]byte, 64<<10)
		n, err = m.r.Read(chunk)
		if err != nil {
			m.t.Fatalf("reading the reply to %q: %v", wire, err)
		}
		buf = append(buf, chunk[:n]...)
	}
}

// transcript runs in and the probe through a new session.
func (m *miniProxy) transcript(o codec.Options, in string) transcript {
	m.t.Helper()
	p := dialect.NewRequestParser(o)
	buf := []byte(in + probe)
	var got transcript
	for len(buf) > 0 {
		var req codec.Request
		n, err := p.ParseRequest(buf, &req)
		var pe *codec.ProtocolError
		switch {
		case errors.Is(err, codec.ErrIncomplete):
			got.hung = true
			return got
		case errors.As(err, &pe):
			got.out += pe.Reply
			if pe.Close {
				got.closed = true
				return got
			}
			buf = buf[pe.N:]
			continue
		case err != nil:
			m.t.Fatal(err)
		case req.Route == codec.RouteLocal:
			got.out += string(dialect.AppendLocal(nil, &req, testEnv{}))
		default:
			got.out += string(m.forward(req.Wire))
		}
		if req.Close {
			got.closed = true
			return got
		}
		buf = buf[n:]
	}
	// Like redisTranscript: an open connection whose probe got no PONG
	// counts as waiting.
	got.hung = !strings.HasSuffix(got.out, "+PONG\r\n")
	return got
}

func TestParity(t *testing.T) {
	plain := startRedis(t)
	withAuth := startRedis(t, "--requirepass", "sekret")
	backend := newMiniProxy(t, startRedis(t))
	authOpts := codec.Options{Password: "sekret"}
	// Longer than the 64 KiB limit by more than redis-server's 16 KiB
	// reads, so that it sees the limit crossed before any line end.
	long := strings.Repeat("x", 200000)
	tests := []struct {
		name string
		in   string
		auth bool // against the server with requirepass, the parser with Password
	}{
		// Framing.
		{"multibulk", mb("SET", "k", "v") + mb("GET", "k") + mb("DEL", "k"), false},
		{"inline", "SET k v\r\nget k\nDEL k\r\n", false},
		{"inline quotes", `SET "a b" 'c d'` + "\r\n" + `GET "a b"` + "\r\n" + `ECHO "\x41\n\"\q" 'it\'s'` + "\r\nECHO \"\\x41\\n\"\r\nDEL \"a b\"\r\n", false},
		{"inline quote inside a word", `ECHO a"b c"` + "\r\n", false},
		{"inline white space", " \t ECHO \v\f x\r\n", false},
		{"inline CR inside", "ECHO a\rb\r\n", false},
		{"blank lines and empty multibulks", "\r\n\n   \r\n*0\r\n*-1\r\n" + mb("ECHO", "x"), false},
		{"header byte after CR not checked", "*2\rX$4\r\nECHO\r\n$1\r\nx\r\n", false},
		{"bulk CRLF not checked", "*2\r\n$4\r\nECHOxx$1\r\nxyz", false},
		{"binary arguments", mb("ECHO", "a\r\n\x00b"), false},
		{"NUL in inline never ends", "PING\x00\r\n", false},
		{"NUL in count line never ends", "*1\x00\r\n", false},
		{"incomplete multibulk", "*2\r\n$4\r\nECHO\r\n", false},
		{"http post", "POST / HTTP/1.1\r\nHost: x\r\n", false},
		{"http host", "Host: example.com\r\n", false},
		// Protocol errors, which close the connection.
		{"count not a number", "*x\r\n", false},
		{"count with plus", "*+1\r\n", false},
		{"count leading zero", "*01\r\n", false},
		{"count line ended by LF", "*1\n$4\r\nPING\r\n", false},
		{"count line too long", "*" + long, false},
		{"expected dollar", "*1\r\nx3\r\n", false},
		{"expected dollar got CR", "*2\r\n\r\n\r\n", false},
		{"bulk length negative", "*1\r\n$-1\r\n", false},
		{"bulk length not a number", "*1\r\n$1x\r\n", false},
		{"bulk length over proto-max-bulk-len", "*1\r\n$600000000\r\n", false},
		{"bulk length line too long", "*1\r\n$" + long, false},
		{"inline too long", long, false},
		{"unbalanced double quote", "ECHO \"a\r\n", false},
		{"unbalanced single quote", "ECHO 'a\r\n", false},
		{"closing quote then a letter", "ECHO \"a\"b\r\n", false},
		{"unauthenticated count", "*11\r\n", true},
		{"unauthenticated bulk", "*1\r\n$16385\r\n", true},
		{"authenticated big request", "AUTH sekret\r\n" + mb("ECHO", strings.Repeat("y", 20000)), true},
		// Command errors, which do not.
		{"unknown command", mb("FOO", "a", "b") + "foo\r\n" + mb("foo", "a\r\n") + mb(""), false},
		{"unknown command long args", mb("foo", strings.Repeat("a", 100), strings.Repeat("b", 100), "c"), false},
		{"unknown command NUL in args", mb("fo\x00o", "a\x00b"), false},
		{"unknown subcommand", "OBJECT foo\r\nclient NOPE x\r\nclient|id\r\nclient id|x\r\n", false},
		{"arity", mb("GET") + mb("CLIENT", "SETNAME") + "object\r\nECHO\r\nPING a b\r\n", false},
		{"mset odd", mb("MSET", "a", "1", "b"), false},
		{"select", "SELECT 0\r\nSELECT x\r\nSELECT -1\r\nSELECT 99999999999\r\n", false},
		{"hello errors", "HELLO 4\r\nHELLO x\r\nHELLO 2 foo\r\nHELLO 2 SETNAME\r\nHELLO 2 SETNAME \"a b\"\r\n", false},
		{"client name", "CLIENT GETNAME\r\nCLIENT SETNAME app\r\nCLIENT GETNAME\r\nCLIENT SETNAME \"a b\"\r\nCLIENT SETNAME \"\"\r\nCLIENT GETNAME\r\n", false},
		{"ping echo quit", "PING\r\nPING hi\r\nECHO x\r\nQUIT\r\n", false},
		// Authentication.
		{"noauth", "GET k\r\nPING\r\nFOO\r\nGET\r\nKEYS\r\n", true},
		{"auth", "AUTH nope\r\nAUTH default nope\r\nAUTH a b c\r\nAUTH sekret\r\nGET k\r\nAUTH nope\r\nGET k\r\n", true},
		{"hello auth", "HELLO 2\r\nHELLO 2 AUTH default nope\r\nAUTH\r\n", true},
		{"quit before auth", "QUIT\r\n", true},
		{"reset", "AUTH sekret\r\nRESET\r\nGET k\r\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, o := plain, codec.Options{}
			if tc.auth {
				addr, o = withAuth, authOpts
			}
			want := redisTranscript(t, addr, tc.in)
			got := backend.transcript(o, tc.in)
			if got != want {
				t.Errorf("proxy:\n  %q closed=%v hung=%v\nredis-server:\n  %q closed=%v hung=%v",
					got.out, got.closed, got.hung, want.out, want.closed, want.hung)
			}
		})
	}
}

// TestParityDivergences pins down, against the real server, where the proxy
// deliberately answers differently.
func TestParityDivergences(t *testing.T) {
	plain := startRedis(t)
	backend := newMiniProxy(t, startRedis(t))
	tests := []struct {
		name  string
		in    string
		redis string // the start of redis-server's transcript
		proxy string // the start of the proxy's
	}{
		// Redis 7 allows INT_MAX arguments; the proxy keeps Redis 6's
		// limit of 1024*1024.
		{"count over 1M", "*1048577\r\n", "", "-ERR Protocol error: invalid multibulk length\r\n"},
		// Commands that need every server or a connection of their own.
		{"keys", "KEYS *\r\n", "*", "-ERR KEYS is not supported by shardproxy: it needs every server\r\n"},
		// twemproxy's wording, which drop-in clients know.
		{"auth without password", "AUTH x\r\n", "-ERR AUTH <password> called without any password configured", "-ERR Client sent AUTH, but no password is set\r\n"},
		// RESP3 with the proxy's identity.
		{"hello 3", "HELLO 3\r\n", "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n", "%7\r\n$6\r\nserver\r\n$10\r\nshardproxy\r\n"},
		// One database per pool.
		{"select another db", "SELECT 1\r\n", "+OK\r\n", "-ERR SELECT 1 is not supported by shardproxy: this pool serves db 0 only\r\n"},
		// The proxy's own identity.
		{"hello", "HELLO\r\n", "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n", "*14\r\n$6\r\nserver\r\n$10\r\nshardproxy\r\n"},
		{"info", "INFO\r\n", "$", "$32\r\n# Proxy\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := redisTranscript(t, plain, tc.in)
			got := backend.transcript(codec.Options{}, tc.in)
			if !strings.HasPrefix(want.out, tc.redis) {
				t.Errorf("redis-server now says %q, expected %q: update the note", want.out, tc.redis)
			}
			if !strings.HasPrefix(got.out, tc.proxy) {
				t.Errorf("proxy says %q, want %q", got.out, tc.proxy)
			}
		})
	}
}

// TestParityKeys checks the proxy's key extraction against redis-server's
// COMMAND GETKEYS.
func TestParityKeys(t *testing.T) {
	c := newMiniProxy(t, startRedis(t))
	for _, tc := range keySamples {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			raw := c.forward([]byte(mb(append([]string{"COMMAND", "GETKEYS"}, tc.args...)...)))
			var want []string
			if _, r := redcon.ReadNextRESP(raw); r.Type == redcon.Array {
				r.ForEach(func(k redcon.RESP) bool {
					want = append(want, k.String())
					return true
				})
			}
			if !slices.Equal(want, tc.keys) {
				t.Errorf("redis-server's keys %q (%q), the test expects %q", want, raw, tc.keys)
			}
		})
	}
}

// TestParityCommandTable checks commands_gen.go against the installed
// redis-server: the same commands with the same arity and key positions.
func TestParityCommandTable(t *testing.T) {
	c := newMiniProxy(t, startRedis(t))
	raw := c.forward([]byte(mb("COMMAND")))
	_, all := redcon.ReadNextRESP(raw)
	seen := 0
	var check func(e redcon.RESP)
	check = func(e redcon.RESP) {
		var f []redcon.RESP
		e.ForEach(func(x redcon.RESP) bool { f = append(f, x); return true })
		name := strings.ToLower(f[0].String())
		cmd := commandOf(lookup(name))
		seen++
		switch {
		case cmd == nil:
			t.Errorf("%s is missing from the table: go generate ./resp/", name)
		case cmd.arity != int(f[1].Int()) || cmd.first != int(f[3].Int()) || cmd.last != int(f[4].Int()) || cmd.step != int(f[5].Int()):
			t.Errorf("%s: table has %d %d %d %d, the server %s %s %s %s: go generate ./resp/",
				name, cmd.arity, cmd.first, cmd.last, cmd.step, f[1].Data, f[3].Data, f[4].Data, f[5].Data)
		}
		if len(f) > 9 {
			f[9].ForEach(func(s redcon.RESP) bool { check(s); return true })
		}
	}
	all.ForEach(func(e redcon.RESP) bool { check(e); return true })
	extras := 1 // client|setinfo, and DEBUG's subcommands, which COMMAND does not list
	for _, c := range commandTable {
		if strings.HasPrefix(c.name, "debug|") {
			extras++
		}
	}
	if seen+extras != len(commandTable) {
		t.Errorf("server has %d commands, the table %d (with %d extra)", seen, len(commandTable), extras)
	}
}
