package memcache

import (
	"errors"
	"strings"
	"testing"

	"shardproxy/codec"
)

func replyReq(cmd int, mode codec.Mode) *codec.Request {
	return &codec.Request{Name: CommandName(cmd), Cmd: cmd, Mode: mode}
}

func TestParseReply(t *testing.T) {
	normal, quietMode := codec.ModeNormal, codec.ModeQuiet
	tests := []struct {
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
	for _, tt := range tests {
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

func TestParseReplyErrors(t *testing.T) {
	normal, quietMode := codec.ModeNormal, codec.ModeQuiet
	tests := []struct {
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
	for _, tt := range tests {
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

// TestParseReplyKeys: a retrieval reply whose VALUE keys are not the
// request's keys (in order, misses left out) is a desync.
func TestParseReplyKeys(t *testing.T) {
	req := replyReq(CmdGet, codec.ModeNormal)
	req.Keys = [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"VALUE a 0 1\r\nx\r\nVALUE c 0 1\r\ny\r\nEND\r\n", true},
		{"VALUE b 0 1\r\nx\r\nEND\r\n", true},
		{"END\r\n", true},
		{"VALUE d 0 1\r\nx\r\nEND\r\n", false},
		{"VALUE c 0 1\r\nx\r\nVALUE a 0 1\r\ny\r\nEND\r\n", false},
		{"VALUE a 0 1\r\nx\r\nVALUE a 0 1\r\ny\r\nEND\r\n", false},
	} {
		n, _, err := dialect.ParseReply([]byte(tc.in), req)
		if tc.ok && (err != nil || n != len(tc.in)) {
			t.Errorf("%q: %d, %v; want the whole reply", tc.in, n, err)
		}
		if !tc.ok && !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("%q: %d, %v; want ErrUnexpectedReply", tc.in, n, err)
		}
	}
}
