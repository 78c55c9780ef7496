package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

// fuzzOptions are the parsers every fuzz input goes through: the defaults,
// and small limits with a password that the fuzzer can reach.
var fuzzOptions = []codec.Options{
	{},
	{MaxKey: 8, MaxLine: 64, MaxValue: 32, Deny: []string{"flush_all", "getdel", "client|id"}, Password: "pw", DB: 1},
	{Keyspace: true, Deny: []string{"flushall"}, ServerConfig: true},
}

func FuzzRequest(f *testing.F) {
	_, inputs := codectest.ReadCases(f, "requests.txt")
	for _, in := range inputs {
		f.Add([]byte(in))
	}
	_, sessions := codectest.ReadCases(f, "sessions.txt")
	for _, in := range sessions {
		f.Add([]byte(in))
	}
	for _, in := range validRequests {
		f.Add([]byte(in))
	}
	f.Add([]byte(mb(append([]string{"MGET"}, strings.Fields(strings.Repeat("k ", 40))...)...)))
	f.Add([]byte("AUTH pw\r\n" + mb("MSET", "a", "1", "b", "2")))
	f.Add([]byte(mb("SCAN", "8194", "MATCH", "k*", "COUNT", "10", "TYPE", "string")))
	f.Add([]byte("SCAN -1 COUNT 5\r\n"))
	f.Add([]byte(mb("FUNCTION", "LIST", "WITHCODE")))
	f.Add([]byte(mb("CONFIG", "SET", "hz", "10", "tls-port", "1")))
	f.Add([]byte("config get maxmemory*\r\n"))
	f.Add([]byte(mb("HELLO", "3") + mb("DEBUG", "PROTOCOL", "push") + "debug object k\r\n"))
	f.Add([]byte(mb("DEBUG", "DIGEST-VALUE", "a", "b") + "DEBUG SLEEP 0\r\n" + "debug segfault\r\n"))
	f.Add([]byte(mb("CLIENT", "REPLY", "OFF") + "client reply skip\r\n" + mb("CLIENT", "INFO")))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, o := range fuzzOptions {
			checkRequest(t, o, data)
			checkStream(t, o, data)
		}
	})
}

// checkRequest checks one ParseRequest of data by a fresh parser.
func checkRequest(t *testing.T, o codec.Options, data []byte) {
	fresh := func() codec.RequestParser { return dialect.NewRequestParser(o) }
	var req codec.Request
	p := fresh().(*parser)
	n, err := p.ParseRequest(data, &req)
	if n < 0 || n > len(data) {
		t.Fatalf("n = %d for %d bytes", n, len(data))
	}
	// Bounded memory: the session keeps no more than its limits allow.
	if cap(p.args) > keepArgs || cap(p.keyPos) > keepArgs || cap(p.reply) > keepReply || cap(p.inline) > 2*p.maxLine+64 {
		t.Fatalf("parser scratch: args %d, keys %d, reply %d, inline %d", cap(p.args), cap(p.keyPos), cap(p.reply), cap(p.inline))
	}
	var pe *codec.ProtocolError
	switch {
	case errors.Is(err, codec.ErrIncomplete):
		if n != 0 {
			t.Fatalf("incomplete with n = %d", n)
		}
		return
	case errors.As(err, &pe):
		checkProtocolError(t, data, pe)
		for _, i := range codectest.PrefixLengths(len(data), 16) { // no prefix may parse as a request
			var r codec.Request
			if _, err := fresh().ParseRequest(data[:i], &r); err == nil {
				t.Fatalf("prefix %q parses, the whole %q is rejected: %q", data[:i], data, pe.Reply)
			}
		}
		return
	case err != nil:
		t.Fatalf("error of type %T: %v", err, err)
	}
	checkShape(t, &req, n)
	// A backend connection is authenticated: sub-requests parse as on one.
	codectest.CheckSplit(t, dialect, codec.Options{MaxValue: o.MaxValue, MaxKey: o.MaxKey}, &req,
		mb("MSET", "d1", "v1", "d22", "v22", "d333", "v333", "d4444", "v4444", "d5", "v5"))

	// Every strict prefix of the request is incomplete, and the request
	// alone parses as within data.
	for _, i := range codectest.PrefixLengths(n, 64) {
		var r codec.Request
		if _, err := fresh().ParseRequest(data[:i], &r); !errors.Is(err, codec.ErrIncomplete) {
			t.Fatalf("prefix %q of %q: %v, want incomplete", data[:i], data[:n], err)
		}
	}
	var again codec.Request
	if m, err := fresh().ParseRequest(data[:n], &again); err != nil || m != n || !sameRequest(&again, &req) {
		t.Fatalf("%q alone parses as %s, within %q as %s", data[:n], describeRequest(&again, m, err), data, describeRequest(&req, n, nil))
	}
	checkWire(t, o, &req, n)
}

// checkWire checks that what the proxy forwards is a well-formed multibulk
// frame (redcon's reader agrees) that parses as the same request.
func checkWire(t *testing.T, o codec.Options, req *codec.Request, n int) {
	ok, args, _, left, err := redcon.ReadNextCommand(req.Wire, nil)
	if !ok || err != nil || len(left) != 0 || len(args) == 0 {
		t.Fatalf("wire %q of %s is no multibulk frame: %v", req.Wire, describeRequest(req, n, nil), err)
	}
	name, _, _ := strings.Cut(req.Name, "|")
	if !equalFold(args[0], name) {
		t.Fatalf("wire %q names %q, the request %s", req.Wire, args[0], req.Name)
	}
	if req.Route == codec.RouteLocal {
		// What the session reads of a local request again: an accepted
		// CLIENT REPLY has a mode, and the arguments add up.
		if (ClientReply(req) != 0) != (req.Name == "client|reply") {
			t.Fatalf("CLIENT REPLY's mode of %s: %d", describeRequest(req, n, nil), ClientReply(req))
		}
		if got, want := argvLen(req.Wire), argsLen(args); got != want {
			t.Fatalf("argvLen of %q: %d, want %d", req.Wire, got, want)
		}
		return // its answer depends on the session's state
	}
	var fwd codec.Request
	fo := codec.Options{MaxValue: o.MaxValue, MaxKey: o.MaxKey, Keyspace: o.Keyspace, ServerConfig: o.ServerConfig} // a backend connection is authenticated
	m, err := dialect.NewRequestParser(fo).ParseRequest(req.Wire, &fwd)
	if err != nil || m != len(req.Wire) || fwd.Name != req.Name || fwd.Route != req.Route || !equalKeys(fwd.Keys, req.Keys) {
		t.Fatalf("wire %q parses as %s, the request was %s", req.Wire, describeRequest(&fwd, m, err), describeRequest(req, n, nil))
	}
}

func checkProtocolError(t *testing.T, data []byte, pe *codec.ProtocolError) {
	if pe.N <= 0 || pe.N > len(data) || pe.Discard != 0 {
		t.Fatalf("protocol error N=%d Discard=%d for %d bytes", pe.N, pe.Discard, len(data))
	}
	if pe.Reply != "" && (!strings.HasSuffix(pe.Reply, "\r\n") || strings.Count(pe.Reply, "\n") != 1 || pe.Reply[0] != '-') {
		t.Fatalf("reply %q is not one error line", pe.Reply)
	}
	if pe.Reply == "" && !pe.Close && strings.TrimLeft(string(data[:pe.N]), " \t\r\n\v\f*-0123456789") != "" {
		t.Fatalf("silently swallowed %q", data[:pe.N])
	}
}

func checkShape(t *testing.T, req *codec.Request, n int) {
	scan := req.Route == codec.RouteServer
	if n == 0 || len(req.Wire) == 0 || req.Cmd <= 0 || CommandName(req.Cmd) != req.Name ||
		req.Mode != codec.ModeNormal && !(scan && req.Mode == codec.ModeRewrite) {
		t.Fatalf("bad request: %s", describeRequest(req, n, nil))
	}
	if cap(req.Buf) > 8*n+64+20 { // a SCAN's server cursor may be longer than the client's
		t.Fatalf("req.Buf has capacity %d for a %d-byte request", cap(req.Buf), n)
	}
	want := map[codec.Route]func(int) bool{
		codec.RouteKey:   func(k int) bool { return k == 1 },
		codec.RouteMulti: func(k int) bool { return k > 1 },
		codec.RouteSame:  func(int) bool { return true },
		codec.RouteAll:   func(k int) bool { return k == 0 },
		codec.RouteAny:   func(k int) bool { return k == 0 },
		codec.RouteLocal: func(k int) bool { return k == 0 },
		codec.RouteBlock: func(int) bool { return true }, // none when numkeys or STREAMS is wrong
		codec.RoutePin:   func(k int) bool { return k == 0 || req.Pin == codec.PinWatch },
		codec.RouteServer: func(k int) bool {
			return k == 0 && req.Cmd == cmdSCAN && req.Target >= 0 && req.Target < MaxScanServers
		},
	}[req.Route]
	if (req.Route == codec.RoutePin) != (req.Pin != codec.PinNone) {
		t.Fatalf("route %s with pin %d", routeNames[req.Route], req.Pin)
	}
	if want == nil || !want(len(req.Keys)) {
		t.Fatalf("route %s with %d keys", routeNames[req.Route], len(req.Keys))
	}
}

// sameRequest reports whether two parse results are the same request.
func sameRequest(a, b *codec.Request) bool {
	return a.Name == b.Name && a.Cmd == b.Cmd && a.Route == b.Route && a.Mode == b.Mode &&
		a.Close == b.Close && bytes.Equal(a.Wire, b.Wire) && equalKeys(a.Keys, b.Keys)
}

func equalKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// checkStream feeds data to one session's parser as the proxy does, all at
// once and then in pieces: what the client gets and what is forwarded must
// not depend on how the bytes arrive.
func checkStream(t *testing.T, o codec.Options, data []byte) {
	whole := simulate(o, data, len(data))
	step := 1 // every byte on its own: quadratic, so only for short inputs
	if len(data) > 512 {
		step = 13
	}
	if pieces := simulate(o, data, step); pieces != whole {
		t.Fatalf("%q in %d-byte pieces:\n%s\nat once:\n%s", data, step, pieces, whole)
	}
}

// idPattern matches the session ids in HELLO and CLIENT ID answers.
var idPattern = regexp.MustCompile(`(id\\r\\n:|local=":)[0-9]+`)

// simulate runs a session over data arriving chunk bytes at a time and
// describes every outcome.
func simulate(o codec.Options, data []byte, chunk int) string {
	p := dialect.NewRequestParser(o)
	var out strings.Builder
	var buf []byte
	for off := 0; off < len(data); {
		end := min(off+chunk, len(data))
		buf = append(buf, data[off:end]...)
		off = end
		for len(buf) > 0 {
			var req codec.Request
			n, err := p.ParseRequest(buf, &req)
			var pe *codec.ProtocolError
			switch {
			case errors.Is(err, codec.ErrIncomplete):
				n = -1
			case errors.As(err, &pe):
				fmt.Fprintf(&out, "reject %q close=%v\n", pe.Reply, pe.Close)
				if pe.Close {
					return out.String()
				}
				n = pe.N
			case err != nil:
				return out.String() + "error " + err.Error()
			default:
				out.WriteString(idPattern.ReplaceAllString(describeRequest(&req, n, nil), "${1}ID") + "\n")
				if req.Close {
					return out.String()
				}
			}
			if n < 0 {
				break
			}
			buf = buf[n:]
		}
	}
	if len(buf) > 0 {
		fmt.Fprintf(&out, "waiting with %d bytes\n", len(buf))
	}
	return out.String()
}

func FuzzReply(f *testing.F) {
	_, inputs := codectest.ReadCases(f, "replies.txt")
	for _, in := range inputs {
		f.Add([]byte(in))
	}
	for _, r := range validReplies {
		if len(r.in) < 1024 {
			f.Add([]byte(r.in))
		}
	}
	f.Add([]byte("*20\r\n" + strings.Repeat("$3\r\nabc\r\n", 19) + "*2\r\n+" + strings.Repeat("s", 100) + "\r\n:1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// In pieces, resumed, the reply frames as at once.
		codectest.CheckResumeSplits(t, dialect, nil, data)
		n, kind, ok := codectest.CheckReply(t, dialect, nil, data, "resp: ")
		if !ok {
			return
		}
		// A reference framer written apart (recursive, for shallow
		// replies) agrees; redcon's reader, which Merge uses on framed
		// RESP2 replies, agrees on those.
		if m, resp3, ok := refFrame(data[:n], 0); ok && m != n {
			t.Fatalf("%q: the reference frames %d bytes, ParseReply %d", data[:n], m, n)
		} else if ok && !resp3 {
			if m, r := redcon.ReadNextRESP(data[:n]); m != n || r.Type == 0 {
				t.Fatalf("redcon reads %d bytes of the %d-byte reply %q", m, n, data[:n])
			}
		}
		if shown := dialect.AppendReply(nil, nil, data[:n], kind); !bytes.Equal(shown, data[:n]) {
			t.Fatalf("AppendReply shows %q of %q", shown, data[:n])
		}
		wantKind := codec.ReplyOK
		switch {
		case data[0] == '-':
			wantKind = errorKind(data[1 : n-2])
		case data[0] == '!':
			wantKind = errorKind(data[bytes.IndexByte(data, '\n')+1 : n-2])
		case bytes.HasPrefix(data, []byte("$-1\r\n")) || bytes.HasPrefix(data, []byte("*-1\r\n")) ||
			bytes.HasPrefix(data, []byte("_\r\n")):
			wantKind = codec.ReplyMiss
		}
		if kind != wantKind {
			t.Fatalf("%q: kind %s, want %s", data[:n], kindNames[kind], kindNames[wantKind])
		}
	})
}

// refFrame is a reference framer for FuzzReply, written apart from
// parseReply: recursive, up to depth 100 (ok false deeper, or on any
// malformed or cut reply). It returns the reply's length and whether it
// holds a RESP3 type.
func refFrame(b []byte, depth int) (n int, resp3, ok bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if depth > 100 || i < 1 || bytes.IndexByte(b[:i], '\n') >= 0 {
		return 0, false, false
	}
	t, line, n := b[0], string(b[1:i]), i+2
	resp3 = strings.IndexByte("+-:$*", t) < 0
	size, err := strconv.ParseInt(line, 10, 64)
	if err == nil && (line != "0" && strings.HasPrefix(line, "0") || strings.HasPrefix(line, "-0") || strings.HasPrefix(line, "+")) {
		err = strconv.ErrSyntax
	}
	switch t {
	case '+', '-':
		return n, false, true
	case ':':
		return n, false, err == nil
	case '_':
		return n, true, line == ""
	case '#':
		return n, true, line == "t" || line == "f"
	case ',':
		_, ferr := strconv.ParseFloat(line, 64)
		return n, true, ferr == nil || errors.Is(ferr, strconv.ErrRange)
	case '(':
		_, bok := new(big.Int).SetString(line, 10)
		return n, true, bok && !strings.HasPrefix(line, "+")
	case '$', '!', '=':
		if err != nil || size == -1 && t == '$' {
			return n, resp3, err == nil
		}
		if size < 0 || int64(len(b)) < int64(n)+size+2 || string(b[n+int(size):n+int(size)+2]) != "\r\n" {
			return 0, false, false
		}
		if t == '=' && (size < 4 || b[n+3] != ':') {
			return 0, false, false
		}
		return n + int(size) + 2, resp3, true
	case '*', '~', '%', '|', '>':
		if err != nil || size == -1 && t == '*' {
			return n, resp3, err == nil
		}
		if size < 0 || size > int64(len(b)) {
			return 0, false, false
		}
		count := size
		switch t {
		case '%':
			count = 2 * size
		case '|':
			count = 2*size + 1
		}
		for range count {
			m, r3, ok := refFrame(b[n:], depth+1)
			if !ok {
				return 0, false, false
			}
			n += m
			resp3 = resp3 || r3
		}
		return n, resp3, true
	}
	return 0, false, false
}

// FuzzHeader checks shortHeader, the one-pass read of a count or length
// line, against the general path: what it accepts, headerLine and parseInt
// accept with the same '\r' and number.
func FuzzHeader(f *testing.F) {
	f.Add([]byte("*2\r\n"), uint16(0))
	f.Add([]byte("$0\r\n\r\n"), uint16(0))
	f.Add([]byte("$01\r\n"), uint16(0))
	f.Add([]byte("$123456789012345678\r\n"), uint16(0))
	f.Add([]byte("$1234567890123456789\r\n"), uint16(0))
	f.Add([]byte("$-1\r\n"), uint16(0))
	f.Add([]byte("$12\r"), uint16(0))
	f.Add([]byte("$12345\r\n"), uint16(3))
	f.Add([]byte("\r0\r0"), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint16) {
		p := newParser(codec.Options{MaxLine: int(maxLine)})
		v, r, ok := p.shortHeader(data, 0)
		if !ok {
			return
		}
		lr, err := p.headerLine(data, 0, "too big")
		if err != nil || lr != r {
			t.Fatalf("%q (maxLine %d): shortHeader ends the line at %d, headerLine at %d (%v)", data, p.maxLine, r, lr, err)
		}
		if n, ok := parseInt(data[1:r]); !ok || n != v {
			t.Fatalf("%q: shortHeader reads %d, parseInt %d (%v)", data, v, n, ok)
		}
	})
}

// argsLen adds up args' lengths.
func argsLen(args [][]byte) int {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	return n
}
