package memcache

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

// fuzzLimits are the parsers every fuzz input goes through: the defaults
// and small limits that the fuzzer can reach.
var fuzzLimits = []codec.Options{
	{},
	{MaxKey: 8, MaxLine: 64, MaxValue: 32, Deny: []string{"flush_all", "ms"}},
	{MetaGets: true, Deny: []string{"gets"}},
}

func FuzzRequest(f *testing.F) {
	_, inputs := codectest.ReadCases(f, "requests.txt")
	for _, in := range inputs {
		f.Add([]byte(in))
	}
	f.Add([]byte("get " + strings.Repeat("k ", 40) + "\r\n"))
	f.Add([]byte("gat 10 " + strings.Repeat("key ", 30) + "kkkkkkkkkkkk a\r\nget a\r\n"))
	f.Add([]byte("mg " + strings.Repeat("A", 12) + " b q k O123\r\nmn\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, l := range fuzzLimits {
			checkRequest(t, l, data)
		}
	})
}

func checkRequest(t *testing.T, l codec.Options, data []byte) {
	p := dialect.NewRequestParser(l)
	var req codec.Request
	n, err := p.ParseRequest(data, &req)
	if n < 0 || n > len(data) {
		t.Fatalf("n = %d for %d bytes", n, len(data))
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
		if pe.Forward {
			checkInvalidate(t, data, &req)
		}
		if p.(codec.PartParser).InPart() { // the error ends a long line's reply
			checkParts(t, l, data)
			return
		}
		for _, i := range codectest.PrefixLengths(len(data), 16) { // no prefix may parse as a request
			var r codec.Request
			if _, err := dialect.NewRequestParser(l).ParseRequest(data[:i], &r); err == nil {
				t.Fatalf("prefix %q parses, the whole %q is rejected: %v", data[:i], data, pe.Reply)
			}
		}
		return
	case err != nil:
		t.Fatalf("error of type %T: %v", err, err)
	}
	if req.Part != codec.PartWhole {
		checkParts(t, l, data)
		return
	}
	checkShape(t, &req, n)
	codectest.CheckSplit(t, dialect, l, &req, "gats 100 d1 d22 d333 d4444 d5 d66 d777\r\n")

	// The same request fed a byte at a time: incomplete until it is whole.
	for _, i := range codectest.PrefixLengths(n, 64) {
		var r codec.Request
		if _, err := dialect.NewRequestParser(l).ParseRequest(data[:i], &r); !errors.Is(err, codec.ErrIncomplete) {
			t.Fatalf("prefix %q of %q: %v, want incomplete", data[:i], data[:n], err)
		}
	}
	var again codec.Request
	if m, err := dialect.NewRequestParser(l).ParseRequest(data[:n], &again); err != nil || m != n || !sameRequest(&again, &req) {
		t.Fatalf("%q alone parses as %s, within %q as %s", data[:n], describeRequest(&again, m, err), data, describeRequest(&req, n, nil))
	}

	if req.Mode == codec.ModeRewrite {
		checkMetaGet(t, l, data[:n], &req)
		return
	}

	// What the proxy forwards is itself a request it accepts.
	var fwd codec.Request
	m, err := dialect.NewRequestParser(codec.Options{MaxValue: l.MaxValue}).ParseRequest(req.Wire, &fwd)
	if err != nil {
		t.Fatalf("wire %q of %q does not parse: %v", req.Wire, data[:n], err)
	}
	wantN := len(req.Wire)
	if req.Mode == codec.ModeQuiet {
		wantN -= len("mn\r\n")
	}
	if m != wantN || fwd.Name != req.Name || !equalKeys(fwd.Keys, req.Keys) || fwd.Route != req.Route {
		t.Fatalf("wire %q parses as %s, the request was %s", req.Wire, describeRequest(&fwd, m, nil), describeRequest(&req, n, nil))
	}
	if req.Mode != codec.ModeNoreply && fwd.Mode != req.Mode {
		t.Fatalf("wire %q has mode %s, the request %s", req.Wire, modeNames[fwd.Mode], modeNames[req.Mode])
	}
	if req.Mode == codec.ModeNoreply && fwd.Mode != codec.ModeNormal {
		t.Fatalf("wire %q still asks for noreply", req.Wire)
	}
}

// checkMetaGet checks a get or gets rewritten as mg: without MetaGets the
// same bytes are the same one-key request, and the wire is a meta get of
// that key asking for it back.
func checkMetaGet(t *testing.T, l codec.Options, data []byte, req *codec.Request) {
	l.MetaGets = false
	var text codec.Request
	n, err := dialect.NewRequestParser(l).ParseRequest(data, &text)
	if err != nil || n != len(data) || text.Name != req.Name || text.Route != codec.RouteKey || !equalKeys(text.Keys, req.Keys) {
		t.Fatalf("%q: rewritten as %s, as text %s", data, describeRequest(req, len(data), nil), describeRequest(&text, n, err))
	}
	if req.Cmd != CmdGet && req.Cmd != CmdGets {
		t.Fatalf("%q: a %s rewritten", data, req.Name)
	}
	var fwd codec.Request
	m, err := dialect.NewRequestParser(codec.Options{}).ParseRequest(req.Wire, &fwd)
	if err != nil || m != len(req.Wire) || fwd.Cmd != CmdMetaGet || !equalKeys(fwd.Keys, req.Keys) {
		t.Fatalf("wire %q of %q parses as %s", req.Wire, data, describeRequest(&fwd, m, err))
	}
}

func checkProtocolError(t *testing.T, data []byte, pe *codec.ProtocolError) {
	if pe.N <= 0 || pe.N > len(data) || pe.Discard < 0 {
		t.Fatalf("protocol error N=%d Discard=%d for %d bytes", pe.N, pe.Discard, len(data))
	}
	if pe.Reply != "" && (!strings.HasSuffix(pe.Reply, "\r\n") || strings.Count(pe.Reply, "\n") != 1) {
		t.Fatalf("reply %q is not one line", pe.Reply)
	}
	if pe.Discard > 0 && pe.Close {
		t.Fatalf("both Discard and Close")
	}
	if pe.Forward && (pe.Close || pe.Reply != "") {
		t.Fatalf("forward with close %v, reply %q", pe.Close, pe.Reply)
	}
}

// checkInvalidate checks the delete that stands for a rejected storage
// request: a delete (md for ms) of the request's key, which the parser
// accepts as such, shown to the client as memcached's error.
func checkInvalidate(t *testing.T, data []byte, req *codec.Request) {
	var fwd codec.Request
	m, err := dialect.NewRequestParser(codec.Options{}).ParseRequest(req.Wire, &fwd)
	if err != nil || m != len(req.Wire) || fwd.Cmd != req.Cmd || !equalKeys(fwd.Keys, req.Keys) ||
		(req.Cmd != CmdDelete && req.Cmd != CmdMetaDelete) || req.Route != codec.RouteKey {
		t.Fatalf("%.80q: forwards %s, which parses as %s", data, describeRequest(req, 0, nil), describeRequest(&fwd, m, err))
	}
	want := replyTooLarge
	if req.Mode == codec.ModeNoreply {
		want = ""
	}
	if got := string(dialect.AppendReply(nil, req, []byte("NOT_FOUND\r\n"), codec.ReplyMiss)); got != want {
		t.Fatalf("%.80q: the client sees %q", data, got)
	}
}

func checkShape(t *testing.T, req *codec.Request, n int) {
	if n == 0 || len(req.Wire) == 0 || req.Cmd <= 0 || req.Cmd >= numCmds || req.Name != cmdNames[req.Cmd] {
		t.Fatalf("bad request: %s", describeRequest(req, n, nil))
	}
	if cap(req.Buf) > 2*n+8 {
		t.Fatalf("req.Buf has capacity %d for a %d-byte request", cap(req.Buf), n)
	}
	want := map[codec.Route]func(int) bool{
		codec.RouteKey:   func(k int) bool { return k == 1 },
		codec.RouteMulti: func(k int) bool { return k > 1 },
		codec.RouteAll:   func(k int) bool { return k == 0 },
		codec.RouteLocal: func(k int) bool { return k == 0 },
	}[req.Route]
	if want == nil || !want(len(req.Keys)) {
		t.Fatalf("route %s with %d keys", routeNames[req.Route], len(req.Keys))
	}
	for _, k := range req.Keys {
		if len(k) == 0 || len(k) > DefaultMaxKey {
			t.Fatalf("key %q", k)
		}
	}
}

// sameRequest reports whether two parse results are the same request.
func sameRequest(a, b *codec.Request) bool {
	return a.Name == b.Name && a.Cmd == b.Cmd && a.Route == b.Route && a.Mode == b.Mode &&
		a.Close == b.Close && a.Arg == b.Arg && bytes.Equal(a.Wire, b.Wire) && equalKeys(a.Keys, b.Keys)
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

// fuzzCmds are the commands whose replies FuzzReply frames.
var fuzzCmds = []int{
	CmdGet, CmdGets, CmdGat, CmdGats, CmdSet, CmdCAS, CmdIncr, CmdDecr, CmdTouch, CmdDelete,
	CmdFlushAll, CmdVerbosity, CmdVersion, CmdMetaGet, CmdMetaSet, CmdMetaDelete,
	CmdMetaArithmetic, CmdMetaDebug, CmdMetaNoop,
}

func FuzzReply(f *testing.F) {
	prefixes, inputs := codectest.ReadCases(f, "replies.txt")
	for i, in := range inputs {
		req := replyCase(f, prefixes[i])
		for j, c := range fuzzCmds {
			if c == req.Cmd {
				f.Add(uint8(j), req.Mode == codec.ModeQuiet, []byte(in))
			}
		}
	}
	f.Fuzz(func(t *testing.T, cmd uint8, quietMode bool, data []byte) {
		req := replyReq(fuzzCmds[int(cmd)%len(fuzzCmds)], codec.ModeNormal)
		if quietMode {
			req.Mode = codec.ModeQuiet
		}
		valueAt(data, 0, []byte("k")) // any bytes: it must not panic
		// In pieces, resumed, the reply frames as at once; a retrieval's
		// also with the keys its VALUE lines name, and keys missed between.
		codectest.CheckResumeSplits(t, dialect, req, data)
		if isRetrieval(req.Cmd) {
			keyed := *req
			keyed.Keys = valueKeys(data)
			codectest.CheckResumeSplits(t, dialect, &keyed, data)
		}
		n, kind, ok := codectest.CheckReply(t, dialect, req, data, "memcache: ")
		if !ok {
			return
		}
		if shown := dialect.AppendReply(nil, req, data[:n], kind); len(shown) > n {
			t.Fatalf("AppendReply shows %d bytes of a %d-byte reply", len(shown), n)
		}
		if isRetrieval(req.Cmd) && kind != codec.ReplyError && kind != codec.ReplyFatal {
			checkValueWalk(t, data[:n], kind)
		}
	})
}

// FuzzMetaGetReply checks the reply to a get or gets sent as mg: what
// ParseReply frames, AppendReply shows as the text reply memcached gives
// a get, which the text framing takes whole with the same kind.
func FuzzMetaGetReply(f *testing.F) {
	for _, in := range []string{
		"VA 3 kfoo f5\r\nbar\r\n", "EN\r\n", "EN kfoo\r\n", "VA 0 kfoo f0 c99\r\n\r\n",
		"SERVER_ERROR out of memory\r\n", "ERROR\r\n", "VA 3 kbar f1\r\nbar\r\n", "VA 1 kZm9v b f0\r\nz\r\n",
	} {
		f.Add(false, []byte(in))
		f.Add(true, []byte(in))
	}
	f.Fuzz(func(t *testing.T, gets bool, data []byte) {
		in := "get foo\r\n"
		if gets {
			in = "gets foo\r\n"
		}
		req, _, err := parse(t, codec.Options{MetaGets: true}, in)
		if err != nil || req.Mode != codec.ModeRewrite {
			t.Fatalf("%q: %v, mode %s", in, err, modeNames[req.Mode])
		}
		codectest.CheckResumeSplits(t, dialect, req, data)
		n, kind, ok := codectest.CheckReply(t, dialect, req, data, "memcache: ")
		if !ok {
			return
		}
		shown := dialect.AppendReply(nil, req, data[:n], kind)
		head, body, tail := dialect.AppendReplyHead([]byte("x"), req, data[:n], kind)
		if parts := string(head[1:]) + string(body) + tail; parts != string(shown) {
			t.Fatalf("%q shows %q, in parts %q", data[:n], shown, parts)
		}
		text, _, _ := parse(t, codec.Options{}, in)
		m, textKind, err := dialect.ParseReply(shown, text)
		if err != nil || m != len(shown) || textKind != kind {
			t.Fatalf("%q shows %q: as a text reply %d of %d bytes, kind %s (was %s), %v",
				data[:n], shown, m, len(shown), kindNames[textKind], kindNames[kind], err)
		}
		if kind == codec.ReplyOK && !bytes.HasPrefix(shown, []byte("VALUE foo ")) {
			t.Fatalf("hit %q shows %q", data[:n], shown)
		}
	})
}

// valueKeys returns the keys that the "VALUE " lines in data name, each
// after a key that misses: the keys of a get that data may answer.
func valueKeys(data []byte) [][]byte {
	var keys [][]byte
	for rest := data; ; {
		_, after, ok := bytes.Cut(rest, []byte("VALUE "))
		if !ok {
			return keys
		}
		end := bytes.IndexAny(after, " \r\n")
		if end < 0 {
			end = len(after)
		}
		if end > 0 {
			keys = append(keys, []byte("miss"), after[:end])
		}
		rest = after[end:]
	}
}

// checkValueWalk checks that Merge's block walk agrees with ParseReply.
func checkValueWalk(t *testing.T, raw []byte, kind codec.ReplyKind) {
	off, blocks := 0, 0
	for {
		line, ok := bytes.CutPrefix(raw[off:], []byte("VALUE "))
		if !ok {
			break
		}
		key, _, _ := bytes.Cut(line, []byte(" "))
		end, ok := valueAt(raw, off, key)
		if !ok {
			t.Fatalf("walk of %q: no block for key %q at %d", raw, key, off)
		}
		off, blocks = end, blocks+1
	}
	if string(raw[off:]) != "END\r\n" || (blocks == 0) != (kind == codec.ReplyMiss) {
		t.Fatalf("walk of %q stops at %d after %d blocks (kind %s)", raw, off, blocks, kindNames[kind])
	}
}

// FuzzValueHeader checks valueHeader, the one-pass read of a VALUE line,
// against the general path: what it accepts, readLine and parseValueLine
// accept with the same line end, key and length, and its key index is the
// first of keys[k:] that matches.
func FuzzValueHeader(f *testing.F) {
	f.Add([]byte("VALUE foo 0 3\r\nbar\r\nEND\r\n"), "foo", uint8(0))
	f.Add([]byte("VALUE b 4294967295 100 18446744073709551615\r\n"), "a b c", uint8(0))
	f.Add([]byte("VALUE b 1 0000000001 2\r\n"), "a b b", uint8(2))
	f.Add([]byte("VALUE k\n 1 2\r\n"), "k", uint8(0)) // the line ends inside the key
	f.Add([]byte("VALUE k 1  2\r\n"), "k", uint8(0))
	f.Add([]byte("VALUE k 1 1073741825\r\n"), "k", uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, keyList string, k uint8) {
		if strings.Contains(keyList, "\n") {
			return // keys are a request line's tokens (see valueHeader)
		}
		var keys [][]byte
		for key := range strings.SplitSeq(keyList, " ") {
			keys = append(keys, []byte(key))
		}
		start := int(k) % (len(keys) + 1)
		kk, next, size, ok := valueHeader(data, 0, keys, start)
		if !ok {
			return
		}
		line, lineEnd, err := readLine(data, 0)
		if err != nil || lineEnd != next {
			t.Fatalf("%q: valueHeader ends the line at %d, readLine at %d (%v)", data, next, lineEnd, err)
		}
		key, n, err := parseValueLine(line)
		if err != nil || n != size || !bytes.Equal(key, keys[kk]) {
			t.Fatalf("%q: valueHeader reads key %q, length %d; parseValueLine %q, %d (%v)", data, keys[kk], size, key, n, err)
		}
		for i := start; i < kk; i++ {
			if bytes.Equal(keys[i], key) {
				t.Fatalf("%q: valueHeader takes key %d, but key %d matches first", data, kk, i)
			}
		}
	})
}
