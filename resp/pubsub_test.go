package resp

import (
	"bytes"
	"strings"
	"testing"

	"shardproxy/codec"
)

// Frames as redis-server 7.0.15 sends them on a subscribed connection
// (observed with SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, PUBLISH, SPUBLISH,
// PING and an unsubscribe with nothing held).
var pushFrames = []struct {
	frame string
	want  Push
}{
	{"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n", Push{Kind: PushSubscribe, Name: []byte("a"), Count: 1}},
	{"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n", Push{Kind: PushPunsubscribe}},
	{"*3\r\n$7\r\nmessage\r\n$2\r\nc1\r\n$5\r\nhello\r\n", Push{Kind: PushMessage, Name: []byte("c1")}},
	{"*4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$2\r\npq\r\n$1\r\ny\r\n", Push{Kind: PushPmessage, Name: []byte("p*"), Channel: []byte("pq")}},
	{"*3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$2\r\nhi\r\n", Push{Kind: PushSmessage, Name: []byte("s1")}},
	{"*2\r\n$4\r\npong\r\n$0\r\n\r\n", Push{Kind: PushPong, Name: []byte{}}},
	{"-NOPERM this user has no permissions to access the 'x' channel\r\n", Push{Error: []byte("NOPERM this user has no permissions to access the 'x' channel")}},
}

func TestReadPush(t *testing.T) {
	for _, tc := range pushFrames {
		got, err := ReadPush([]byte(tc.frame))
		if err != nil || got.Kind != tc.want.Kind || !bytes.Equal(got.Name, tc.want.Name) ||
			!bytes.Equal(got.Channel, tc.want.Channel) || got.Count != tc.want.Count || !bytes.Equal(got.Error, tc.want.Error) {
			t.Errorf("ReadPush(%q) = %+v, %v; want %+v", tc.frame, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "+OK\r\n", ":1\r\n", "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n$1\r\n1\r\n",
		"*2\r\n$7\r\nmessage\r\n$1\r\na\r\n", "*3\r\n$5\r\nother\r\n$1\r\na\r\n:1\r\n", "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\nX"} {
		if p, err := ReadPush([]byte(bad)); err == nil {
			t.Errorf("ReadPush(%q) = %+v, want an error", bad, p)
		}
	}
}

func TestAppendSubscription(t *testing.T) {
	if got, want := string(AppendSubscription(nil, PushUnsubscribe, nil, 0, 0)), "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"; got != want {
		t.Errorf("nil name: %q, want %q", got, want)
	}
	if got, want := string(AppendSubscription(nil, PushPsubscribe, []byte("p*"), 3, 0)), "*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	// RESP3, as redis-server 7.0.15 sends them after HELLO 3 (observed).
	if got, want := string(AppendSubscription(nil, PushUnsubscribe, nil, 0, proto3)), ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"; got != want {
		t.Errorf("RESP3 nil name: %q, want %q", got, want)
	}
	if got, want := string(AppendSubscription(nil, PushSsubscribe, []byte("sc"), 1, proto3)), ">3\r\n$10\r\nssubscribe\r\n$2\r\nsc\r\n:1\r\n"; got != want {
		t.Errorf("RESP3: %q, want %q", got, want)
	}
	req := &codec.Request{Wire: []byte("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n")}
	if got, want := string(AppendPong(nil, req)), "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"; got != want {
		t.Errorf("PING hi: %q, want %q", got, want)
	}
}

// TestAppendMessage: a RESP3 client gets a server's RESP2 frame as the
// push frame redis-server 7.0.15 sends a RESP3 client (observed).
func TestAppendMessage(t *testing.T) {
	tests := []struct{ frame, resp3 string }{
		{"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nm1\r\n", ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nm1\r\n"},
		{"*4\r\n$8\r\npmessage\r\n$2\r\nx*\r\n$2\r\nxy\r\n$2\r\nm2\r\n", ">4\r\n$8\r\npmessage\r\n$2\r\nx*\r\n$2\r\nxy\r\n$2\r\nm2\r\n"},
		{"*3\r\n$8\r\nsmessage\r\n$2\r\nsc\r\n$2\r\nm3\r\n", ">3\r\n$8\r\nsmessage\r\n$2\r\nsc\r\n$2\r\nm3\r\n"},
	}
	for _, tc := range tests {
		if got := string(AppendMessage(nil, []byte(tc.frame), 0)); got != tc.frame {
			t.Errorf("RESP2 %q: %q", tc.frame, got)
		}
		if got := string(AppendMessage(nil, []byte(tc.frame), proto3)); got != tc.resp3 {
			t.Errorf("RESP3 %q: %q, want %q", tc.frame, got, tc.resp3)
		}
	}
	if HasSubscribedMode(proto3) || !HasSubscribedMode(0) {
		t.Error("HasSubscribedMode: only RESP2 has a subscribed mode")
	}
}

func TestMergePubsub(t *testing.T) {
	d := &Dialect{}
	tests := []struct {
		cmd     string
		replies []string
		want    string
	}{
		{"pubsub|numsub", []string{"*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:0\r\n", "*4\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:5\r\n"},
			"*4\r\n$1\r\na\r\n:3\r\n$1\r\nb\r\n:5\r\n"},
		{"pubsub|channels", []string{"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "*0\r\n", "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"},
			"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"},
		{"pubsub|numpat", []string{":2\r\n", ":3\r\n", ":0\r\n"}, ":3\r\n"},
		{"pubsub|numsub", []string{"*2\r\n$1\r\na\r\n:1\r\n", "*2\r\n$1\r\nb\r\n:1\r\n"},
			"-ERR the servers' replies to PUBSUB NUMSUB disagree or are not what it answers\r\n"},
	}
	for _, tc := range tests {
		req := &codec.Request{Name: tc.cmd, Cmd: lookup(tc.cmd)}
		var replies []codec.Reply
		for _, r := range tc.replies {
			replies = append(replies, codec.Reply{Raw: []byte(r)})
		}
		if got := string(d.Merge(nil, req, nil, nil, replies)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// FuzzReadPush: no panic; a frame read as a confirmation is written
// back by AppendSubscription as the same bytes, when the server wrote it
// in the canonical form; a RESP3 client's form of any frame ReadPush
// takes (AppendSubscription's, AppendMessage's) is one whole push frame
// of the same elements.
func FuzzReadPush(f *testing.F) {
	for _, tc := range pushFrames {
		f.Add([]byte(tc.frame))
	}
	f.Add([]byte("*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:-1\r\n"))
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, err := ReadPush(frame)
		if err != nil {
			return
		}
		switch p.Kind {
		case PushSubscribe, PushUnsubscribe, PushPsubscribe, PushPunsubscribe, PushSsubscribe, PushSunsubscribe:
			again := AppendSubscription(nil, p.Kind, p.Name, int(p.Count), 0)
			q, err := ReadPush(again)
			if err != nil || q.Kind != p.Kind || !bytes.Equal(q.Name, p.Name) || q.Count != p.Count {
				t.Fatalf("round trip of %q: %q -> %+v %v", frame, again, q, err)
			}
			checkPush(t, AppendSubscription(nil, p.Kind, p.Name, int(p.Count), proto3), again, p.Name == nil)
		case PushMessage, PushPmessage, PushSmessage:
			checkPush(t, AppendMessage(nil, frame, proto3), frame, false)
		}
	})
}

// TestParsePubSub checks the routes and keys of the pub/sub commands:
// the channels or patterns are the keys, PUBLISH goes by its channel.
func TestParsePubSub(t *testing.T) {
	tests := []struct {
		in    string
		route codec.Route
		sub   codec.Sub
		keys  []string
	}{
		{mb("SUBSCRIBE", "a", "b"), codec.RouteSubscribe, codec.SubSubscribe, []string{"a", "b"}},
		{mb("unsubscribe"), codec.RouteSubscribe, codec.SubUnsubscribe, nil},
		{mb("PSUBSCRIBE", "p*"), codec.RouteSubscribe, codec.SubPsubscribe, []string{"p*"}},
		{mb("PUNSUBSCRIBE", "p*", "q*"), codec.RouteSubscribe, codec.SubPunsubscribe, []string{"p*", "q*"}},
		{mb("SSUBSCRIBE", "{t}a", "{t}b"), codec.RouteSubscribe, codec.SubSsubscribe, []string{"{t}a", "{t}b"}},
		{mb("SUNSUBSCRIBE"), codec.RouteSubscribe, codec.SubSunsubscribe, nil},
		{mb("PUBLISH", "ch", "msg"), codec.RouteKey, codec.SubNone, []string{"ch"}},
		{mb("SPUBLISH", "ch", "msg"), codec.RouteKey, codec.SubNone, []string{"ch"}},
		{mb("PUBSUB", "NUMSUB", "a"), codec.RouteAll, codec.SubNone, nil},
	}
	for _, tc := range tests {
		req, n, err := parse(t, codec.Options{}, tc.in)
		if err != nil {
			t.Fatalf("%q refused: %s", tc.in, describeRequest(req, n, err))
		}
		var keys []string
		for _, k := range req.Keys {
			keys = append(keys, string(k))
		}
		if req.Route != tc.route || req.Sub != tc.sub || strings.Join(keys, " ") != strings.Join(tc.keys, " ") {
			t.Errorf("%q: %s sub %d", tc.in, describeRequest(req, n, nil), req.Sub)
		}
	}
}

// checkPush checks that push, a RESP3 client's form of the RESP2 frame
// resp2, is one whole push frame of the same elements: the bytes after
// its header are resp2's, but for its null name (null).
func checkPush(t *testing.T, push, resp2 []byte, null bool) {
	t.Helper()
	n, kind, err := (&Dialect{}).ParseReply(push, nil)
	if err != nil || n != len(push) || kind == codec.ReplyError || push[0] != '>' {
		t.Fatalf("%q (of %q): not one push frame: %d %v %v", push, resp2, n, kind, err)
	}
	want := resp2[1:]
	if null {
		want = bytes.Replace(want, []byte("$-1\r\n"), []byte("_\r\n"), 1) // the name is the first null
	}
	if !bytes.Equal(push[1:], want) {
		t.Fatalf("%q is not %q as a push", push, resp2)
	}
}

// TestUndoState: a HELLO, AUTH or CLIENT SETNAME the session refuses
// after parsing it (RESP2's subscribed mode) changes nothing; UndoState
// reaches back only to the last request.
func TestUndoState(t *testing.T) {
	p := newParser(codec.Options{Password: "pw"})
	step := func(in string) *codec.Request {
		t.Helper()
		var req codec.Request
		if _, err := p.ParseRequest([]byte(in), &req); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		return &req
	}
	step(mb("AUTH", "pw"))
	step(mb("CLIENT", "SETNAME", "first"))
	step(mb("HELLO", "3", "SETNAME", "second"))
	p.UndoState()
	if req := step(mb("PING")); req.Proto != 0 || string(p.name) != "first" || !p.authed {
		t.Fatalf("after an undone HELLO 3: proto %d, name %q, authed %t", req.Proto, p.name, p.authed)
	}
	p.UndoState() // PING changed nothing: nothing to undo
	if string(p.name) != "first" || !p.authed {
		t.Fatalf("UndoState after PING: name %q, authed %t", p.name, p.authed)
	}
	step(mb("HELLO", "3"))
	if req := step(mb("PING")); req.Proto != proto3 {
		t.Fatalf("HELLO 3 kept: proto %d", req.Proto)
	}
	step(mb("RESET"))
	p.UndoState()
	if req := step(mb("PING")); req.Proto != proto3 || !p.authed {
		t.Fatalf("after an undone RESET: proto %d, authed %t", req.Proto, p.authed)
	}
}
