package memcache

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
	"shardproxy/internal/testserver"
)

// The parity tests run the real memcached (1.6.18 is the reference) and
// check that the proxy answers a client as memcached would. They need the
// memcached binary; go test -short leaves them out.

const parityTimeout = 5 * time.Second

func startMemcached(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("memcached"); err != nil && !testing.Short() {
		t.Fatalf("memcached not found in PATH: install it (apt-get install memcached) or run go test -short")
	}
	return testserver.StartMemcached(t).Addr
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, parityTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(parityTimeout))
	return c
}

// memcachedFirstLine sends in (and "version\r\n" unless raw) on a new
// connection and returns memcached's first reply line, or closed=true
// when memcached hung up without a word.
func memcachedFirstLine(t *testing.T, addr, in string, raw bool) (line string, closed bool) {
	t.Helper()
	c := dial(t, addr)
	if !raw {
		in += "version\r\n"
	}
	if _, err := io.WriteString(c, in); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if errors.Is(err, io.EOF) && line == "" {
		return "", true
	}
	if err != nil {
		t.Fatalf("reading memcached's answer to %q: %v", in, err)
	}
	return strings.TrimSuffix(line, "\r\n"), false
}

// hidden stands for "no reply of its own": the client sees the answer to
// its next request first (here: VERSION).
const hidden = "<hidden>"

// proxyFirstLine is what the parser makes a client see first for in.
func proxyFirstLine(t *testing.T, in string) (line string, closed bool) {
	t.Helper()
	req, _, err := parse(t, codec.Options{}, in)
	if err == nil {
		t.Fatalf("parser accepts %q", in)
	}
	pe := codectest.ProtocolError(t, err)
	if pe.Forward { // what the client sees whatever the server answers
		pe = &codec.ProtocolError{Reply: string(dialect.AppendReply(nil, req, []byte("NF\r\n"), codec.ReplyMiss))}
	}
	switch {
	case pe.Reply == "" && pe.Close:
		return "", true
	case pe.Reply == "":
		return hidden, false
	}
	line, _, _ = strings.Cut(pe.Reply, "\r\n")
	return line, pe.Close
}

func TestParityErrors(t *testing.T) {
	addr := startMemcached(t)
	key251 := strings.Repeat("k", 251)
	big := strings.Repeat("v", 2000000)
	tests := []struct {
		name string
		in   string
		raw  bool // send in alone (memcached must see no further newline)
	}{
		{"empty line", "\r\n", false},
		{"bare newline", "\n", false},
		{"one letter", "x\r\n", false},
		{"unknown verb", "foo bar\r\n", false},
		{"upper case verb", "GET a\r\n", false},
		{"unknown meta verb", "mz a\r\n", false},
		{"get without key", "get\r\n", false},
		{"get key too long", "get " + key251 + "\r\n", false},
		{"gat without exptime", "gat\r\n", false},
		{"gat bad exptime", "gat x a\r\n", false},
		{"gat exptime out of range", "gat 99999999999999999999 a\r\n", false},
		{"set too few tokens", "set k 0 0\r\n", false},
		{"set too many tokens", "set k 0 0 1 noreply x\r\n", false},
		{"set key too long", "set " + key251 + " 0 0 1\r\na\r\n", false},
		{"set bad flags", "set k x 0 1\r\na\r\n", false},
		{"set negative flags", "set k -1 0 1\r\na\r\n", false},
		{"set bad exptime", "set k 0 x 1\r\na\r\n", false},
		{"set negative length", "set k 0 0 -1\r\n", false},
		{"set length 2^31", "set k 0 0 2147483648\r\n", false},
		{"set length INT_MAX", "set k 0 0 2147483647\r\n", false},
		{"set length not a number", "set k 0 0 x\r\n", false},
		{"set too large", "set k 0 0 2000000\r\n" + big + "\r\n", false},
		{"set too large noreply", "set k 0 0 2000000 noreply\r\n" + big + "\r\n", false},
		{"set bad data chunk", "set k 0 0 1\r\nab\r\n", false},
		{"cas without unique", "cas k 0 0 1\r\na\r\n", false},
		{"cas bad unique", "cas k 0 0 1 x\r\na\r\n", false},
		{"incr without delta", "incr k\r\n", false},
		{"incr bad delta", "incr k x\r\n", false},
		{"incr negative delta", "incr k -1\r\n", false},
		{"incr delta 2^64", "incr k 18446744073709551616\r\n", false},
		{"incr noreply as delta", "incr k noreply\r\n", false},
		{"decr key too long", "decr " + key251 + " 1\r\n", false},
		{"touch without exptime", "touch k\r\n", false},
		{"touch bad exptime", "touch k x\r\n", false},
		{"touch bad exptime noreply", "touch k x noreply\r\n", false},
		{"delete without key", "delete\r\n", false},
		{"delete hold time", "delete k 1\r\n", false},
		{"delete hold time noreply", "delete k 1 noreply\r\n", false},
		{"delete 0 0", "delete k 0 0\r\n", false},
		{"delete too many tokens", "delete k a b c\r\n", false},
		{"delete key too long", "delete " + key251 + "\r\n", false},
		{"flush_all bad delay", "flush_all x\r\n", false},
		{"flush_all too many tokens", "flush_all 1 2 3\r\n", false},
		{"verbosity without level", "verbosity\r\n", false},
		{"verbosity bad level", "verbosity x\r\n", false},
		{"verbosity noreply only", "verbosity noreply\r\n", false},
		{"verbosity too many tokens", "verbosity 1 2 3\r\n", false},
		{"mg without key", "mg\r\n", false},
		{"mg key too long", "mg " + key251 + " v\r\n", false},
		{"md without key", "md\r\n", false},
		{"ma without key", "ma\r\n", false},
		{"me without key", "me\r\n", false},
		{"ms without length", "ms k\r\n", false},
		{"ms bad length", "ms k x\r\nhi\r\n", false},
		{"ms negative length", "ms k -1\r\n", false},
		{"ms key too long", "ms " + key251 + " 2\r\nhi\r\n", false},
		{"ms too many flags", "ms k 2" + strings.Repeat(" T1", 17) + "\r\nhi\r\n", false},
		{"ms too large", "ms k 2000000\r\n" + big + "\r\n", false},
		{"ms bad data chunk", "ms k 2\r\nhix\r\n", false},
		{"HTTP", "POST / HTTP/1.1\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantClosed := memcachedFirstLine(t, addr, tt.in, tt.raw)
			got, gotClosed := proxyFirstLine(t, tt.in)
			switch {
			case got == hidden:
				if !strings.HasPrefix(want, "VERSION ") {
					t.Errorf("proxy hides its reply, memcached says %q", want)
				}
			case gotClosed && got == "":
				if !wantClosed {
					t.Errorf("proxy closes silently, memcached says %q", want)
				}
			case got != want || wantClosed:
				t.Errorf("proxy says %q (close %v), memcached says %q (closed %v)", got, gotClosed, want, wantClosed)
			}
		})
	}
}

// TestParityDivergences pins down, against the real server, where the proxy
// deliberately answers differently.
func TestParityDivergences(t *testing.T) {
	addr := startMemcached(t)
	tests := []struct {
		name      string
		in        string
		raw       bool
		memcached string // first line; "" = closes silently
		proxy     string // first line of the ProtocolError reply
	}{
		// The proxy bounds every non-retrieval line to 2048 bytes whether or
		// not its newline came in the same read; memcached only checks lines
		// still without a newline, and closes silently.
		{"long line with newline", "set k 0 0 1" + strings.Repeat(" ", 2040) + "\r\na\r\n", false, "STORED", "CLIENT_ERROR line too long"},
		{"long line without newline", strings.Repeat("x", 2049), true, "", "CLIENT_ERROR line too long"},
		// memcached truncates the length to int32 (4294967297 -> 1); the
		// proxy refuses any length outside 0..INT_MAX-2 and reads on, the
		// value as commands, as memcached does after a length it refuses.
		{"length wrapping int32", "set k 0 0 4294967297\r\na\r\n", false, "STORED", "CLIENT_ERROR bad command line format"},
		// memcached reads a rejected line's value as commands ("ERROR"
		// after the first line); the proxy swallows it. First lines agree.
		{"rejected value swallowed", "set k x 0 3\r\nabc\r\n", false, "CLIENT_ERROR bad command line format", "CLIENT_ERROR bad command line format"},
		// Admin commands: named error instead of memcached's own handling.
		{"shutdown", "shutdown\r\n", false, "ERROR: shutdown not enabled", "CLIENT_ERROR shutdown is not supported by this proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, closed := memcachedFirstLine(t, addr, tt.in, tt.raw)
			if (tt.memcached == "") != closed || want != tt.memcached {
				t.Errorf("memcached now says %q (closed %v), expected %q: update the note", want, closed, tt.memcached)
			}
			if got, _ := proxyFirstLine(t, tt.in); got != tt.proxy {
				t.Errorf("proxy says %q, want %q", got, tt.proxy)
			}
		})
	}
	t.Run("rejected value swallowed, whole stream", func(t *testing.T) {
		c := dial(t, addr)
		io.WriteString(c, "set k x 0 3\r\nabc\r\nversion\r\n")
		r := bufio.NewReader(c)
		r.ReadString('\n')
		if second, _ := r.ReadString('\n'); second != "ERROR\r\n" {
			t.Errorf("memcached's second line: %q, expected ERROR (the value run as a command)", second)
		}
		pe := codectest.ProtocolError(t, func() error { _, _, err := parse(t, codec.Options{}, "set k x 0 3\r\n"); return err }())
		if pe.Discard != 5 || pe.Close {
			t.Errorf("proxy: discard %d close %v, want the value swallowed", pe.Discard, pe.Close)
		}
	})
}

// backendReply sends wire to a backend and frames the reply to req.
func backendReply(t *testing.T, c net.Conn, r *bufio.Reader, req *codec.Request, wire []byte) codec.Reply {
	t.Helper()
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for {
		n, kind, err := dialect.ParseReply(buf, req)
		if err == nil {
			if n != len(buf) {
				t.Fatalf("reply to %q has %d bytes left over: %q", wire, len(buf)-n, buf[n:])
			}
			return codec.Reply{Raw: buf, Kind: kind}
		}
		if !errors.Is(err, codec.ErrIncomplete) {
			t.Fatalf("reply to %q: %v (have %q)", wire, err, buf)
		}
		b, err := r.ReadByte()
		if err != nil {
			t.Fatalf("reading reply to %q: %v (have %q)", wire, err, buf)
		}
		buf = append(buf, b)
	}
}

// directReply sends in to memcached, then "mn" to mark the end of its
// reply, and returns the reply.
func directReply(t *testing.T, c net.Conn, r *bufio.Reader, in string) []byte {
	t.Helper()
	io.WriteString(c, in+"mn\r\n")
	var reply []byte
	for !bytes.HasSuffix(reply, []byte("MN\r\n")) {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%q: direct: %v", in, err)
		}
		reply = append(reply, line...)
	}
	return reply[:len(reply)-len("MN\r\n")]
}

// TestParityForwarded runs one script on two fresh servers: directly on one
// (what a client of memcached sees) and through the dialect on the other
// (parse, send Wire, frame with ParseReply, show with AppendReply, split
// and merge multi-key reads over two "backends" on the same server). The
// client must see the same bytes.
func TestParityForwarded(t *testing.T) {
	direct := dial(t, startMemcached(t))
	directR := bufio.NewReader(direct)
	proxied := dial(t, startMemcached(t))
	proxiedR := bufio.NewReader(proxied)
	script := []string{
		"set a 5 0 3\r\nabc\r\n",
		"set b 0 0 1 noreply\r\nx\r\n",
		"get a\r\n",
		"get a b missing a\r\n",
		"gets a b\r\n",
		"gat 100 a b\r\n",
		"gats 100 missing\r\n",
		"add a 0 0 1\r\nz\r\n",
		"replace missing 0 0 1\r\nz\r\n",
		"append a 0 0 2\r\nde\r\n",
		"prepend a 0 0 1 noreply\r\n_\r\n",
		"cas a 0 0 1 1\r\nq\r\n",
		"incr n 1\r\n",
		"set n 0 0 2\r\n10\r\n",
		"incr n 5\r\n",
		"decr n 100 noreply\r\n",
		"get n a\r\n",
		"incr a 1\r\n",
		"touch a 100\r\n",
		"touch missing 1 noreply\r\n",
		"delete missing\r\n",
		"delete b 0\r\n",
		"delete n noreply\r\n",
		"set " + strings.Repeat("k", 250) + " 1 0 1\r\nL\r\n",
		"get " + strings.Repeat("k", 250) + " a\r\n",
		"mg a v f\r\n",
		"mg a v q\r\n",
		"mg missing v q\r\n",
		"mg missing v\r\n",
		"mg a q z\r\n",
		"mg a v v\r\n",
		"mg Zm9v b v\r\n",
		"ms Zm9v 2 b\r\nhi\r\n",
		"mg Zm9v b v k\r\n",
		"get foo\r\n",
		"mg Zm9 b\r\n",
		"ms c 2 q\r\nhi\r\n",
		"ms c 2 q ME\r\nhi\r\n",
		"ms c 2 z\r\nhi\r\n",
		"ms c 4 T0 F3\r\n\r\n\r\n\r\n",
		"mg c v f\r\n",
		"md missing q\r\n",
		"md c q\r\n",
		"ma cnt N0 J5 v\r\n",
		"ma cnt q\r\n",
		"ma cnt v\r\n",
		"me missing\r\n",
		"flush_all 0 foo\r\n",
		"get a cnt\r\n",
		"set a 0 0 1\r\n1\r\n",
		"flush_all noreply\r\n",
		"get a\r\n",
	}
	for _, in := range script {
		want := directReply(t, direct, directR, in)

		req := mustParse(t, in)
		var got []byte
		switch req.Route {
		case codec.RouteKey:
			r := backendReply(t, proxied, proxiedR, req, req.Wire)
			got = dialect.AppendReply(nil, req, r.Raw, r.Kind)
		case codec.RouteMulti:
			targets := make([]int, len(req.Keys))
			for i := range targets {
				targets[i] = i % 2
			}
			subs, _, owners := dialect.Split(req, targets, nil)
			var replies []codec.Reply
			for _, s := range subs {
				replies = append(replies, backendReply(t, proxied, proxiedR, s, s.Wire))
			}
			got = dialect.Merge(nil, req, subs, owners, replies)
		case codec.RouteAll:
			r := backendReply(t, proxied, proxiedR, req, req.Wire)
			got = dialect.Merge(nil, req, []*codec.Request{req}, nil, []codec.Reply{r})
		default:
			t.Fatalf("%q routes %s", in, routeNames[req.Route])
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q:\n proxy shows %q\nmemcached   %q", in, got, want)
		}
	}
}

// TestParityBase64Keys checks that the proxy routes a base64 key ("b") on
// the bytes memcached stores it under.
func TestParityBase64Keys(t *testing.T) {
	c := dial(t, startMemcached(t))
	r := bufio.NewReader(c)
	for _, tok := range []string{"Zm9v", "!Zm9v!", "Zm9vYg==", "Zg==Zm9v", "Zg=A", "Zm9", "====", "YWJj/+8=", "QUJD.REVG"} {
		t.Run(tok, func(t *testing.T) {
			req := mustParse(t, "mg "+tok+" b v\r\n")
			key := req.Keys[0]
			io.WriteString(c, "ms "+tok+" 1 b\r\nx\r\n")
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if string(key) == tok { // the proxy could not decode it
				if line != "CLIENT_ERROR error decoding key\r\n" {
					t.Errorf("proxy routes %q raw, memcached stored it: %q", tok, line)
				}
				return
			}
			if line != "HD\r\n" {
				t.Fatalf("memcached: %q", line)
			}
			// Read it back under the proxy's key, itself base64 encoded.
			enc := base64.StdEncoding.EncodeToString(key)
			io.WriteString(c, "mg "+enc+" b v\r\n")
			if line, _ = r.ReadString('\n'); line != "VA 1\r\n" {
				t.Errorf("proxy key %q (%s) misses on memcached: %q", key, enc, line)
			}
			r.ReadString('\n')
			io.WriteString(c, "md "+enc+" b\r\n") // leave no state for the next key
			r.ReadString('\n')
		})
	}
}

// TestParityMetaGets runs gets and sets directly on one memcached and, on
// another, with every one-key get and gets sent as mg (codec.Options
// MetaGets): the client must see the same bytes, cas values aside (each
// server counts its own).
func TestParityMetaGets(t *testing.T) {
	direct := dial(t, startMemcached(t))
	directR := bufio.NewReader(direct)
	proxied := dial(t, startMemcached(t))
	proxiedR := bufio.NewReader(proxied)
	long := strings.Repeat("k", 250)
	big := strings.Repeat("v", 300<<10)
	script := []string{
		"get a\r\n",
		"gets a\r\n",
		"set a 5 0 3\r\nabc\r\n",
		"get a\r\n",
		"gets a\r\n",
		"set e 4294967295 0 0\r\n\r\n",
		"get e\r\n",
		"set crlf 0 0 4\r\n\r\n\r\n\r\n",
		"get crlf\r\n",
		"set " + long + " 1 0 1\r\nL\r\n",
		"get " + long + "\r\n",
		"gets " + long + "\r\n",
		"get " + long + "k\r\n",
		"set big 7 0 " + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n",
		"get big\r\n",
		"get a e missing\r\n",
		"gat 100 a\r\n",
		"ms TDE= 1 b\r\nz\r\n", // base64 "L1": memcached returns its key in base64
		"get L1\r\n",
		"gets L1\r\n",
		"delete a\r\n",
		"get a\r\n",
		"gets a\r\n",
	}
	casField := regexp.MustCompile(`(?m)^(VALUE \S+ \d+ \d+) \d+\r$`)
	for _, in := range script {
		want := directReply(t, direct, directR, in)

		req, n, err := parse(t, codec.Options{MetaGets: true}, in)
		var got []byte
		switch {
		case err != nil:
			got = []byte(codectest.ProtocolError(t, err).Reply)
		case n != len(in):
			t.Fatalf("%q: parsed %d bytes", in, n)
		case req.Route == codec.RouteMulti:
			subs, _, owners := dialect.Split(req, make([]int, len(req.Keys)), nil)
			r := backendReply(t, proxied, proxiedR, subs[0], subs[0].Wire)
			got = dialect.Merge(nil, req, subs, owners, []codec.Reply{r})
		default:
			rewritten := (req.Cmd == CmdGet || req.Cmd == CmdGets) && len(req.Keys) == 1
			if rewritten != (req.Mode == codec.ModeRewrite) || rewritten != bytes.HasPrefix(req.Wire, []byte("mg ")) {
				t.Fatalf("%q: mode %s, wire %.40q", in, modeNames[req.Mode], req.Wire)
			}
			r := backendReply(t, proxied, proxiedR, req, req.Wire)
			got = dialect.AppendReply(nil, req, r.Raw, r.Kind)
		}
		got = casField.ReplaceAll(got, []byte("$1 CAS\r"))
		want = casField.ReplaceAll(want, []byte("$1 CAS\r"))
		if !bytes.Equal(got, want) {
			t.Errorf("%.60q:\n proxy shows %.200q\nmemcached   %.200q", in, got, want)
		}
	}
}
