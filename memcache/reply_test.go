package memcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

func replyReq(cmd int, mode codec.Mode) *codec.Request {
	return &codec.Request{Name: CommandName(cmd), Cmd: cmd, Mode: mode}
}

const normal, quietMode = codec.ModeNormal, codec.ModeQuiet

// validReplies are well-formed replies, how much of in they are and what
// AppendReply shows of them.
var validReplies = []struct {
	name  string
	cmd   int
	mode  codec.Mode
	in    string
	n     int // 0 means len(in)
	kind  codec.ReplyKind
	shown string // what AppendReply shows; "" means in[:n]
}{
	{"get miss", CmdGet, normal, "END\r\n", 0, codec.ReplyMiss, ""},
	{"get hit", CmdGet, normal, "VALUE k 0 3\r\nabc\r\nEND\r\n", 0, codec.ReplyOK, ""},
	{"get hits", CmdGet, normal, "VALUE a 1 1\r\nx\r\nVALUE b 4294967295 0\r\n\r\nEND\r\n", 0, codec.ReplyOK, ""},
	{"get value holds END", CmdGet, normal, "VALUE k 0 7\r\nEND\r\n\r\n\r\nEND\r\n", 0, codec.ReplyOK, ""},
	{"get then more", CmdGet, normal, "END\r\nSTORED\r\n", 5, codec.ReplyMiss, ""},
	{"gets hit", CmdGets, normal, "VALUE k 0 1 12345\r\nx\r\nEND\r\n", 0, codec.ReplyOK, ""},
	{"gat hit", CmdGat, normal, "VALUE k 0 1\r\nx\r\nEND\r\n", 0, codec.ReplyOK, ""},
	{"gats miss", CmdGats, normal, "END\r\n", 0, codec.ReplyMiss, ""},
	{"get client error", CmdGet, normal, "CLIENT_ERROR bad command line format\r\n", 0, codec.ReplyError, ""},
	{"get error after values", CmdGet, normal, "VALUE k 0 1\r\nx\r\nSERVER_ERROR out of memory writing get response\r\n", 0, codec.ReplyError, ""},
	{"set stored", CmdSet, normal, "STORED\r\n", 0, codec.ReplyOK, ""},
	{"add not stored", CmdAdd, normal, "NOT_STORED\r\n", 0, codec.ReplyOK, ""},
	{"cas exists", CmdCAS, normal, "EXISTS\r\n", 0, codec.ReplyOK, ""},
	{"cas not found", CmdCAS, normal, "NOT_FOUND\r\n", 0, codec.ReplyMiss, ""},
	{"set too large", CmdSet, normal, "SERVER_ERROR object too large for cache\r\n", 0, codec.ReplyError, ""},
	{"set noreply shows nothing", CmdSet, codec.ModeNoreply, "STORED\r\n", 0, codec.ReplyOK, "-"},
	{"delete deleted", CmdDelete, normal, "DELETED\r\n", 0, codec.ReplyOK, ""},
	{"delete not found", CmdDelete, normal, "NOT_FOUND\r\n", 0, codec.ReplyMiss, ""},
	{"touch touched", CmdTouch, normal, "TOUCHED\r\n", 0, codec.ReplyOK, ""},
	{"incr number", CmdIncr, normal, "18446744073709551615\r\n", 0, codec.ReplyOK, ""},
	{"decr zero", CmdDecr, normal, "0\r\n", 0, codec.ReplyOK, ""},
	{"incr not found", CmdIncr, normal, "NOT_FOUND\r\n", 0, codec.ReplyMiss, ""},
	{"incr non-numeric", CmdIncr, normal, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", 0, codec.ReplyError, ""},
	{"flush_all", CmdFlushAll, normal, "OK\r\n", 0, codec.ReplyOK, ""},
	{"verbosity", CmdVerbosity, normal, "OK\r\n", 0, codec.ReplyOK, ""},
	{"version", CmdVersion, normal, "VERSION 1.6.18\r\n", 0, codec.ReplyOK, ""},
	{"mn", CmdMetaNoop, normal, "MN\r\n", 0, codec.ReplyOK, ""},
	{"error", CmdDelete, normal, "ERROR\r\n", 0, codec.ReplyFatal, ""},
	{"mg value", CmdMetaGet, normal, "VA 2 t-1 f0\r\nhi\r\n", 0, codec.ReplyOK, ""},
	{"mg empty value", CmdMetaGet, normal, "VA 0\r\n\r\n", 0, codec.ReplyOK, ""},
	{"mg header", CmdMetaGet, normal, "HD O123 kfoo\r\n", 0, codec.ReplyOK, ""},
	{"mg miss", CmdMetaGet, normal, "EN\r\n", 0, codec.ReplyMiss, ""},
	{"mg old response", CmdMetaGet, normal, "OK\r\n", 0, codec.ReplyOK, ""},
	{"mg error", CmdMetaGet, normal, "CLIENT_ERROR invalid flag\r\n", 0, codec.ReplyError, ""},
	{"ms stored", CmdMetaSet, normal, "HD\r\n", 0, codec.ReplyOK, ""},
	{"ms not stored", CmdMetaSet, normal, "NS\r\n", 0, codec.ReplyOK, ""},
	{"ms exists", CmdMetaSet, normal, "EX c5\r\n", 0, codec.ReplyOK, ""},
	{"ms not found", CmdMetaSet, normal, "NF\r\n", 0, codec.ReplyMiss, ""},
	{"md deleted", CmdMetaDelete, normal, "HD\r\n", 0, codec.ReplyOK, ""},
	{"md not found", CmdMetaDelete, normal, "NF O1\r\n", 0, codec.ReplyMiss, ""},
	{"ma value", CmdMetaArithmetic, normal, "VA 2 c7\r\n10\r\n", 0, codec.ReplyOK, ""},
	{"ma not found", CmdMetaArithmetic, normal, "NF\r\n", 0, codec.ReplyMiss, ""},
	{"me", CmdMetaDebug, normal, "ME k exp=-1 la=1 cas=19 fetch=no cls=1 size=61\r\n", 0, codec.ReplyOK, ""},
	{"me miss", CmdMetaDebug, normal, "EN\r\n", 0, codec.ReplyMiss, ""},
	{"quiet mg miss", CmdMetaGet, quietMode, "MN\r\n", 0, codec.ReplyMiss, "-"},
	{"quiet mg hit", CmdMetaGet, quietMode, "VA 1 q\r\nx\r\nMN\r\n", 0, codec.ReplyOK, "VA 1 q\r\nx\r\n"},
	{"quiet mg value holds MN", CmdMetaGet, quietMode, "VA 4\r\nMN\r\n\r\nMN\r\n", 0, codec.ReplyOK, "VA 4\r\nMN\r\n\r\n"},
	{"quiet mg error", CmdMetaGet, quietMode, "CLIENT_ERROR invalid flag\r\nMN\r\n", 0, codec.ReplyError, "CLIENT_ERROR invalid flag\r\n"},
	{"quiet ms stored", CmdMetaSet, quietMode, "MN\r\n", 0, codec.ReplyOK, "-"},
	{"quiet ms not stored", CmdMetaSet, quietMode, "NS\r\nMN\r\n", 0, codec.ReplyOK, "NS\r\n"},
	{"quiet md not found", CmdMetaDelete, quietMode, "NF\r\nMN\r\n", 0, codec.ReplyMiss, "NF\r\n"},
	{"quiet then more", CmdMetaArithmetic, quietMode, "MN\r\nVA 1\r\n", 4, codec.ReplyOK, "-"},
}

func TestParseReply(t *testing.T) {
	for _, tt := range validReplies {
		t.Run(tt.name, func(t *testing.T) {
			req := replyReq(tt.cmd, tt.mode)
			n, kind, err := dialect.ParseReply([]byte(tt.in), req)
			want := tt.n
			if want == 0 {
				want = len(tt.in)
			}
			if err != nil || n != want || kind != tt.kind {
				t.Fatalf("ParseReply(%q) = %d, %s, %v; want %d, %s", tt.in, n, kindNames[kind], err, want, kindNames[tt.kind])
			}
			shown := string(dialect.AppendReply(nil, req, []byte(tt.in[:n]), kind))
			wantShown := tt.shown
			switch wantShown {
			case "":
				wantShown = tt.in[:n]
			case "-":
				wantShown = ""
			}
			if shown != wantShown {
				t.Errorf("AppendReply shows %q, want %q", shown, wantShown)
			}
			checkReplyPrefixes(t, req, tt.in[:n])
		})
	}
}

// checkReplyPrefixes checks that every strict prefix of a valid reply is
// incomplete.
func checkReplyPrefixes(t *testing.T, req *codec.Request, in string) {
	t.Helper()
	for i := range len(in) {
		if n, _, err := dialect.ParseReply([]byte(in[:i]), req); !errors.Is(err, codec.ErrIncomplete) || n != 0 {
			t.Fatalf("prefix %q of %q: %d, %v; want ErrIncomplete", in[:i], in, n, err)
		}
	}
}

// invalidReplies are malformed replies and the errors they get.
var invalidReplies = []struct {
	name string
	cmd  int
	mode codec.Mode
	in   string
	want error
}{
	{"garbage", CmdGet, normal, "HELLO\r\n", ErrUnexpectedReply},
	{"bare newline", CmdGet, normal, "END\n", ErrReplyLineEnding},
	{"empty line", CmdSet, normal, "\r\n", ErrUnexpectedReply},
	{"line too long", CmdGet, normal, strings.Repeat("x", MaxReplyLine+2), ErrReplyLineTooLong},
	{"line too long with newline", CmdGet, normal, "VALUE " + strings.Repeat("x", MaxReplyLine) + " 0 1\r\n", ErrReplyLineTooLong},
	{"value length past 32 bits", CmdGet, normal, "VALUE k 0 4294967293\r\n", ErrValueLength},
	{"value length over 1 GiB", CmdGet, normal, "VALUE k 0 1073741825\r\n", ErrValueLength},
	{"value length overflows", CmdGet, normal, "VALUE k 0 99999999999999999999999\r\n", ErrBadValueLine},
	{"value length negative", CmdGet, normal, "VALUE k 0 -1\r\n", ErrBadValueLine},
	{"value line short", CmdGet, normal, "VALUE k 0\r\n", ErrBadValueLine},
	{"value line long", CmdGet, normal, "VALUE k 0 1 2 3\r\n", ErrBadValueLine},
	{"value line double space", CmdGet, normal, "VALUE k  0 1\r\n", ErrBadValueLine},
	{"value bad flags", CmdGets, normal, "VALUE k x 1\r\n", ErrBadValueLine},
	{"value bad cas", CmdGets, normal, "VALUE k 0 1 x\r\n", ErrBadValueLine},
	{"value bad cas and length", CmdGets, normal, "VALUE k 0 4294967293 x\r\n", ErrBadValueLine},
	{"value line bare", CmdGet, normal, "VALUE\r\n", ErrBadValueLine},
	{"value line key only", CmdGet, normal, "VALUE k\r\n", ErrBadValueLine},
	{"value line empty key", CmdGet, normal, "VALUE  0 1\r\n", ErrBadValueLine},
	{"value line trailing space", CmdGets, normal, "VALUE k 0 1 \r\n", ErrBadValueLine},
	{"value line trailing space after cas", CmdGets, normal, "VALUE k 0 1 2 \r\n", ErrBadValueLine},
	{"value data too long", CmdGet, normal, "VALUE k 0 1\r\nxy\r\nEND\r\n", ErrValueTerminator},
	{"no END", CmdGet, normal, "VALUE k 0 1\r\nx\r\nSTORED\r\n", ErrUnexpectedReply},
	{"set answered by a value", CmdSet, normal, "VALUE k 0 1\r\n", ErrUnexpectedReply},
	{"delete answered STORED", CmdDelete, normal, "STORED\r\n", ErrUnexpectedReply},
	{"touch answered DELETED", CmdTouch, normal, "DELETED\r\n", ErrUnexpectedReply},
	{"incr not a number", CmdIncr, normal, "12a\r\n", ErrUnexpectedReply},
	{"incr too big", CmdIncr, normal, "18446744073709551616\r\n", ErrUnexpectedReply},
	{"version without text", CmdVersion, normal, "VERSION\r\n", ErrUnexpectedReply},
	{"flush_all answered END", CmdFlushAll, normal, "END\r\n", ErrUnexpectedReply},
	{"ERRORS is not ERROR", CmdSet, normal, "ERRORS\r\n", ErrUnexpectedReply},
	{"mg answered NS", CmdMetaGet, normal, "NS\r\n", ErrUnexpectedReply},
	{"mg answered HDX", CmdMetaGet, normal, "HDX\r\n", ErrUnexpectedReply},
	{"mg value too long", CmdMetaGet, normal, "VA 4294967293\r\n", ErrValueLength},
	{"mg value no size", CmdMetaGet, normal, "VA\r\n", ErrBadValueLine},
	{"mg value bad size", CmdMetaGet, normal, "VA x t1\r\n", ErrBadValueLine},
	{"mg value bad terminator", CmdMetaGet, normal, "VA 1\r\nxyz\r\n", ErrValueTerminator},
	{"me answered HD", CmdMetaDebug, normal, "HD\r\n", ErrUnexpectedReply},
	{"me without key", CmdMetaDebug, normal, "ME\r\n", ErrUnexpectedReply},
	{"quiet two replies", CmdMetaGet, quietMode, "HD\r\nHD\r\nMN\r\n", ErrUnexpectedReply},
	{"quiet garbage", CmdMetaSet, quietMode, "STORED\r\nMN\r\n", ErrUnexpectedReply},
	{"stats is never forwarded", CmdStats, normal, "END\r\n", ErrNoReply},
	{"no command", 0, normal, "END\r\n", ErrNoReply},
}

func TestParseReplyErrors(t *testing.T) {
	for _, tt := range invalidReplies {
		t.Run(tt.name, func(t *testing.T) {
			n, _, err := dialect.ParseReply([]byte(tt.in), replyReq(tt.cmd, tt.mode))
			if !errors.Is(err, tt.want) || n != 0 {
				t.Errorf("ParseReply(%q) = %d, %v; want %v", tt.in, n, err, tt.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "memcache: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestHandshake(t *testing.T) {
	reqs := dialect.Handshake(codec.HandshakeOptions{})
	if len(reqs) != 1 || string(reqs[0].Wire) != "version\r\n" || reqs[0].Cmd != CmdVersion {
		t.Fatalf("Handshake = %+v", reqs)
	}
	n, kind, err := dialect.ParseReply([]byte("VERSION 1.6.18\r\n"), reqs[0])
	if err != nil || n != 16 || kind != codec.ReplyOK {
		t.Errorf("version reply: %d, %s, %v", n, kindNames[kind], err)
	}
	reqs = dialect.Handshake(codec.HandshakeOptions{Meta: true})
	if len(reqs) != 2 || string(reqs[1].Wire) != "mn\r\n" {
		t.Fatalf("Handshake(Meta) = %+v", reqs)
	}
	if _, kind, err := dialect.ParseReply([]byte("MN\r\n"), reqs[1]); err != nil || kind != codec.ReplyOK {
		t.Errorf("mn reply MN: %s, %v", kindNames[kind], err)
	}
	if _, kind, err := dialect.ParseReply([]byte("ERROR\r\n"), reqs[1]); err != nil || kind == codec.ReplyOK {
		t.Errorf("mn reply ERROR (memcached 1.5): %s, %v; want a failed handshake", kindNames[kind], err)
	}
}

func TestRegistered(t *testing.T) {
	d, ok := codec.Lookup("memcache")
	if !ok || d.Name() != "memcache" {
		t.Fatalf("codec.Lookup(memcache) = %v, %v", d, ok)
	}
}

// parseReplyKeysCases are replies to a get of a, b and c, and whether
// their keys are the request's.
var parseReplyKeysCases = []struct {
	in string
	ok bool
}{
	{"VALUE a 0 1\r\nx\r\nVALUE c 0 1\r\ny\r\nEND\r\n", true},
	{"VALUE b 0 1\r\nx\r\nEND\r\n", true},
	{"END\r\n", true},
	{"VALUE d 0 1\r\nx\r\nEND\r\n", false},
	{"VALUE c 0 1\r\nx\r\nVALUE a 0 1\r\ny\r\nEND\r\n", false},
	{"VALUE a 0 1\r\nx\r\nVALUE a 0 1\r\ny\r\nEND\r\n", false},
}

// TestParseReplyKeys: a retrieval reply whose VALUE keys are not the
// request's keys (in order, misses left out) is a desync.
func TestParseReplyKeys(t *testing.T) {
	req := replyReq(CmdGet, codec.ModeNormal)
	req.Keys = [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, tc := range parseReplyKeysCases {
		n, _, err := dialect.ParseReply([]byte(tc.in), req)
		if tc.ok && (err != nil || n != len(tc.in)) {
			t.Errorf("%q: %d, %v; want the whole reply", tc.in, n, err)
		}
		if !tc.ok && !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("%q: %d, %v; want ErrUnexpectedReply", tc.in, n, err)
		}
	}
}

// multiGet returns a get of n keys and the reply to it: a hit for every
// other key (the others missed), a value of size bytes each, then END.
func multiGet(n, size int) (*codec.Request, string) {
	req := replyReq(CmdGet, codec.ModeNormal)
	var b strings.Builder
	for i := range n {
		key := fmt.Sprintf("key:%07d", i)
		req.Keys = append(req.Keys, []byte(key))
		if i%2 == 0 {
			fmt.Fprintf(&b, "VALUE %s %d %d\r\n%s\r\n", key, i, size, strings.Repeat("v", size))
		}
	}
	b.WriteString("END\r\n")
	return req, b.String()
}

// resumeCase is a reply TestResumeReply feeds in pieces.
type resumeCase struct {
	name string
	req  *codec.Request
	in   string
}

// longResumeCases are replies that arrive in many reads.
func longResumeCases() []resumeCase {
	get, getReply := multiGet(2000, 8)
	big, bigReply := multiGet(5, 40000)
	_, wrongKeys := multiGet(300, 3)
	wrongKeys = strings.Replace(wrongKeys, "VALUE key:0000200 ", "VALUE key:0000100 ", 1)
	noKeys := replyReq(CmdGets, normal)
	rewrite := replyReq(CmdGet, codec.ModeRewrite)
	rewrite.Keys = [][]byte{[]byte("foo")}
	return []resumeCase{
		{"multi-get", get, getReply},
		{"multi-get then more", get, getReply + "END\r\n"},
		{"multi-get of big values", big, bigReply},
		{"multi-get with keys out of order", get, wrongKeys},
		{"multi-get ended by an error", get, strings.TrimSuffix(getReply, "END\r\n") + "SERVER_ERROR out of memory writing get response\r\n"},
		{"multi-get without keys", noKeys, strings.Repeat("VALUE k 0 3 77\r\nabc\r\n", 500) + "END\r\n"},
		{"get as mg, big value", rewrite, "VA 40000 kfoo f3\r\n" + strings.Repeat("v", 40000) + "\r\n"},
		{"mg, big value", replyReq(CmdMetaGet, normal), "VA 40000 f3\r\n" + strings.Repeat("v", 40000) + "\r\n"},
		{"quiet mg, big value", replyReq(CmdMetaGet, quietMode), "VA 40000\r\n" + strings.Repeat("v", 40000) + "\r\nMN\r\n"},
	}
}

// TestResumeReply feeds every reply of this file and of replies.txt to
// ResumeReply in pieces, a byte at a time and in random sizes: every
// answer is ParseReply's.
func TestResumeReply(t *testing.T) {
	var cases []resumeCase
	for _, r := range validReplies {
		cases = append(cases, resumeCase{r.name, replyReq(r.cmd, r.mode), r.in})
	}
	for _, r := range invalidReplies {
		cases = append(cases, resumeCase{r.name, replyReq(r.cmd, r.mode), r.in})
	}
	prefixes, inputs := codectest.ReadCases(t, "replies.txt")
	for i, in := range inputs {
		cases = append(cases, resumeCase{fmt.Sprintf("replies.txt %d %s", i+1, prefixes[i]), replyCase(t, prefixes[i]), in})
	}
	keyed := replyReq(CmdGet, normal)
	keyed.Keys = [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, tc := range parseReplyKeysCases {
		cases = append(cases, resumeCase{"keys " + tc.in, keyed, tc.in})
	}
	cases = append(cases, longResumeCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			if len(data) <= 64<<10 {
				codectest.CheckResume(t, dialect, tc.req, data, codectest.ByteCuts(len(data)))
			}
			rng := rand.New(rand.NewPCG(uint64(len(data)), 2))
			for _, most := range []int{2, 16, 1024, 16 << 10} {
				codectest.CheckResume(t, dialect, tc.req, data, codectest.RandomCuts(len(data), most, rng))
			}
		})
	}
}

// TestResumeReplyState checks where ResumeReply stops: a retrieval reply
// at the VALUE block cut short, with the next key to match; any other
// reply nowhere (it is framed again from its start).
func TestResumeReplyState(t *testing.T) {
	keyed := replyReq(CmdGet, normal)
	keyed.Keys = [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}
	reply := "VALUE a 0 1\r\nx\r\nVALUE c 0 3\r\nabc\r\nEND\r\n"
	noKeys := replyReq(CmdGet, normal)
	tests := []struct {
		name string
		req  *codec.Request
		in   string
		want codec.ReplyState
	}{
		{"first line cut", keyed, reply[:5], codec.ReplyState{}},
		{"first value cut", keyed, reply[:14], codec.ReplyState{}},
		{"second line cut", keyed, reply[:20], codec.ReplyState{Off: 16, Index: 1}},
		{"second value cut", keyed, reply[:32], codec.ReplyState{Off: 16, Index: 1}},
		{"END cut", keyed, reply[:len(reply)-1], codec.ReplyState{Off: 34, Index: 3}},
		{"no keys", noKeys, reply[:len(reply)-1], codec.ReplyState{Off: 34}},
		{"mg value cut", replyReq(CmdMetaGet, normal), "VA 3\r\nab", codec.ReplyState{}},
		{"quiet MN cut", replyReq(CmdMetaGet, quietMode), "VA 1\r\nx\r\nM", codec.ReplyState{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st codec.ReplyState
			if !isRetrieval(tc.req.Cmd) {
				st = codec.ReplyState{Off: 1, Index: 1, Left: 1} // not looked at, and zeroed
			}
			n, _, err := dialect.ResumeReply([]byte(tc.in), tc.req, &st)
			if !errors.Is(err, codec.ErrIncomplete) || n != 0 || st != tc.want {
				t.Fatalf("%q: %d, %v, state %+v; want incomplete, state %+v", tc.in, n, err, st, tc.want)
			}
		})
	}
	// A state that does not belong to buf (longer than it, or past the
	// request's keys) is not trusted.
	for _, st := range []codec.ReplyState{{Off: 100}, {Off: 3, Index: 9}, {Off: -1}, {Index: -1}} {
		if n, kind, err := dialect.ResumeReply([]byte("END\r\n"), keyed, &st); n != 5 || kind != codec.ReplyMiss || err != nil || st != (codec.ReplyState{}) {
			t.Fatalf("with a foreign state: %d, %s, %v, state %+v", n, kindNames[kind], err, st)
		}
	}
}

// TestReplyNeeded checks the length an unfinished reply announces: that
// of a value block longer than codec.HintAbove by itself, nothing for a
// short one however far into a long multi-get it is.
func TestReplyNeeded(t *testing.T) {
	get, small := multiGet(4000, 8)
	big, bigReply := multiGet(3, 40000)
	block := len("VALUE key:0000000 0 40000\r\n") + 40000 + 2
	tests := []struct {
		name string
		req  *codec.Request
		in   string
		cut  int
		want int
	}{
		{"big value", big, bigReply, 100, block + len("END\r\n")},
		{"second big value", big, bigReply, block + 100, 2*block + len("END\r\n")},
		{"short value far into a multi-get", get, small, 20000, 0},
		{"big meta value", replyReq(CmdMetaGet, normal), "VA 40000\r\n" + strings.Repeat("v", 40000) + "\r\n", 100, 40012},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, resume := range []bool{false, true} {
				var st codec.ReplyState
				if resume { // framed up to where the first call stopped
					dialect.ResumeReply([]byte(tc.in[:tc.cut/2]), tc.req, &st)
				}
				_, _, err := dialect.ResumeReply([]byte(tc.in[:tc.cut]), tc.req, &st)
				if !errors.Is(err, codec.ErrIncomplete) || codec.Needed(err) != tc.want {
					t.Fatalf("resumed %v: %v, needs %d; want %d", resume, err, codec.Needed(err), tc.want)
				}
			}
		})
	}
}
