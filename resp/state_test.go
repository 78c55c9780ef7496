package resp

import (
	"bytes"
	"testing"

	"shardproxy/codec"
)

// session feeds requests to one parser and returns each local answer.
func session(t *testing.T, p codec.RequestParser, reqs ...string) []string {
	t.Helper()
	var out []string
	for _, in := range reqs {
		var req codec.Request
		req.Reset()
		if _, err := p.ParseRequest([]byte(in), &req); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		out = append(out, string(dialect.AppendLocal(nil, &req, testEnv{})))
	}
	return out
}

// TestStateMoves checks that a client's name, protocol and authentication
// move to a new parser with its saved state, and that a change of
// credentials leaves it unauthenticated there.
func TestStateMoves(t *testing.T) {
	opts := codec.Options{Password: "secret"}
	old := dialect.NewRequestParser(opts)
	session(t, old, mb("HELLO", "3", "AUTH", "default", "secret", "SETNAME", "app"))
	state := old.(codec.StateSaver).AppendState([]byte("x"))[1:]

	moved := dialect.NewRequestParser(opts)
	if err := moved.(codec.StateSaver).RestoreState(state); err != nil {
		t.Fatal(err)
	}
	got := session(t, moved, mb("CLIENT", "GETNAME"))[0]
	if got != "$3\r\napp\r\n" {
		t.Fatalf("CLIENT GETNAME after the move: %q", got)
	}
	var req codec.Request
	req.Reset()
	moved.ParseRequest([]byte(mb("GET", "k")), &req)
	if req.Route != codec.RouteKey || req.Proto != 3 {
		t.Fatalf("GET after the move: route %v proto %d, want a key route under RESP3", req.Route, req.Proto)
	}
	if again := moved.(codec.StateSaver).AppendState(nil); !bytes.Equal(again, state) {
		t.Fatalf("saved again: %q, want %q", again, state)
	}

	other := dialect.NewRequestParser(codec.Options{Password: "changed"})
	if err := other.(codec.StateSaver).RestoreState(state); err != nil {
		t.Fatal(err)
	}
	req.Reset()
	_, err := other.ParseRequest([]byte(mb("GET", "k")), &req)
	if pe, ok := err.(*codec.ProtocolError); !ok || !bytes.HasPrefix([]byte(pe.Reply), []byte("-NOAUTH")) {
		t.Fatalf("GET under new credentials: %v, want NOAUTH", err)
	}
}

// TestStateRefused checks that bytes that are no saved state are refused.
func TestStateRefused(t *testing.T) {
	p := dialect.NewRequestParser(codec.Options{}).(codec.StateSaver)
	for _, b := range []string{"", "\x01\x00", "\x02\x00\x00xxxxxxxx", "\x01\x04\x00xxxxxxxx", "\x01\x00\x02xxxxxxxx"} {
		if p.RestoreState([]byte(b)) == nil {
			t.Errorf("%q: restored", b)
		}
	}
}

// FuzzState checks that any bytes are refused or restored, and that a
// restored state saves back to the same bytes.
func FuzzState(f *testing.F) {
	f.Add([]byte("\x01\x01\x03xxxxxxxxname"))
	f.Add([]byte("\x01\x00\x00xxxxxxxx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := dialect.NewRequestParser(codec.Options{}).(codec.StateSaver)
		if p.RestoreState(b) != nil {
			return
		}
		got := p.AppendState(nil)
		if !bytes.Equal(got[3+8:], b[3+8:]) || got[2] != b[2] {
			t.Fatalf("saved %q from %q", got, b)
		}
	})
}

// FuzzClientFilter checks that any arguments of CLIENT LIST or KILL are
// read or refused with an error reply, and that a request's wire, whatever
// it holds, gives its arguments back without a panic.
func FuzzClientFilter(f *testing.F) {
	f.Add("TYPE normal ID 3", true)
	f.Add("ID 1 2 3", false)
	f.Add("1.2.3.4:5", true)
	f.Add("SKIPME no USER default ADDR a LADDR b", true)
	f.Fuzz(func(t *testing.T, args string, kill bool) {
		p := dialect.NewRequestParser(codec.Options{}).(*parser)
		bs := bytes.Fields([]byte(args))
		if _, errReply := p.parseClientFilter(bs, kill); errReply != "" && (errReply[0] != '-' || !bytes.HasSuffix([]byte(errReply), []byte("\r\n"))) {
			t.Fatalf("%q: error reply %q", args, errReply)
		}
		wireArgs([]byte(args))
	})
}
