package memcache

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"shardproxy/codec"
)

// joinedRun parses "get <key>" for each key, as a socket's run of one-key
// gets to join.
func joinedRun(t testing.TB, cmd string, keys []string) []*codec.Request {
	t.Helper()
	d := &Dialect{}
	var run []*codec.Request
	for _, k := range keys {
		req := &codec.Request{}
		if _, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(cmd+" "+k+"\r\n"), req); err != nil {
			t.Fatalf("parse %s %q: %v", cmd, k, err)
		}
		if d.JoinClass(req) == 0 {
			t.Fatalf("%s %q: not joinable", cmd, k)
		}
		run = append(run, req)
	}
	return run
}

// frameJoined frames buf as the reply to run joined, as a socket's reader
// does: ParseJoined for all but the last, ResumeReply for the last. It
// returns each request's reply and the bytes taken.
func frameJoined(buf []byte, run []*codec.Request) (replies []string, taken int, err error) {
	d := &Dialect{}
	for i := range run {
		var n int
		if i == len(run)-1 {
			var st codec.ReplyState
			if n, _, err = d.ResumeReply(buf[taken:], run[i], &st); err != nil {
				return replies, taken, err
			}
			replies = append(replies, string(buf[taken:taken+n]))
		} else {
			var raw int
			var tail string
			if n, raw, tail, _, err = d.ParseJoined(buf[taken:], run[i:]); err != nil {
				return replies, taken, err
			}
			if n > len(buf)-taken || raw > len(buf)-taken || n < 0 || raw < 0 {
				return replies, taken, fmt.Errorf("part of %d bytes (raw %d) beyond %d", n, raw, len(buf)-taken)
			}
			replies = append(replies, string(buf[taken:taken+raw])+tail)
		}
		taken += n
	}
	return replies, taken, nil
}

func TestJoinedRequest(t *testing.T) {
	d := &Dialect{}
	run := joinedRun(t, "gets", []string{"a", "bb", "c"})
	if got := string(d.AppendJoined([]byte("x"), run)); got != "xgets a bb c\r\n" {
		t.Errorf("joined %q", got)
	}
	for _, in := range []string{"get a b\r\n", "set a 0 0 1\r\nx\r\n", "mg a v\r\n", "gat 0 a\r\n", "version\r\n"} {
		req := &codec.Request{}
		if _, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(in), req); err != nil {
			t.Fatal(err)
		}
		if d.JoinClass(req) != 0 {
			t.Errorf("%q: joinable", in)
		}
	}
	get, gets := joinedRun(t, "get", []string{"a"})[0], joinedRun(t, "gets", []string{"a"})[0]
	if d.JoinClass(get) == d.JoinClass(gets) {
		t.Error("get and gets join")
	}
}

// TestParseJoined: each key gets the reply memcached gives its get alone.
func TestParseJoined(t *testing.T) {
	keys := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		name, reply string
		want        []string // "" where framing must fail
	}{
		{"all miss", "END\r\n", []string{"END\r\n", "END\r\n", "END\r\n", "END\r\n"}},
		{"hits", "VALUE a 1 1\r\nA\r\nVALUE c 3 1\r\nC\r\nVALUE d 4 2\r\nDD\r\nEND\r\n",
			[]string{"VALUE a 1 1\r\nA\r\nEND\r\n", "END\r\n", "VALUE c 3 1\r\nC\r\nEND\r\n", "VALUE d 4 2\r\nDD\r\nEND\r\n"}},
		{"last only", "VALUE d 0 0\r\n\r\nEND\r\n", []string{"END\r\n", "END\r\n", "END\r\n", "VALUE d 0 0\r\n\r\nEND\r\n"}},
		{"error", "VALUE a 0 1\r\nA\r\nSERVER_ERROR out of memory\r\n",
			[]string{"VALUE a 0 1\r\nA\r\nEND\r\n", "SERVER_ERROR out of memory\r\n", "SERVER_ERROR out of memory\r\n", "SERVER_ERROR out of memory\r\n"}},
		{"stray block", "VALUE z 0 1\r\nZ\r\nEND\r\n", []string{""}},
		{"block out of order", "VALUE c 0 1\r\nC\r\nVALUE b 0 1\r\nB\r\nEND\r\n", []string{"END\r\n", "END\r\n", "VALUE c 0 1\r\nC\r\nEND\r\n", ""}},
		{"not a reply", "STORED\r\n", []string{""}},
		{"bad terminator", "VALUE a 0 1\r\nAXX", []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := joinedRun(t, "get", keys)
			got, taken, err := frameJoined([]byte(tc.reply), run)
			want := tc.want
			if want[len(want)-1] == "" {
				want = want[:len(want)-1]
				if err == nil || errors.Is(err, codec.ErrIncomplete) {
					t.Errorf("framed %q (%v), want a desync", got, err)
				}
			} else if err != nil || taken != len(tc.reply) {
				t.Errorf("took %d of %d bytes: %v", taken, len(tc.reply), err)
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("replies\n%q\nwant\n%q", got, want)
			}
			// Cut short anywhere, the reply frames as far as it goes
			// and then asks for more (or finds the desync).
			for cut := range len(tc.reply) {
				part, _, err := frameJoined([]byte(tc.reply[:cut]), run)
				if len(want) == len(keys) && !errors.Is(err, codec.ErrIncomplete) {
					t.Fatalf("cut at %d: %q, %v", cut, part, err)
				}
				if len(part) > len(got) || strings.Join(part, "|") != strings.Join(got[:len(part)], "|") {
					t.Fatalf("cut at %d: %q, want a prefix of %q", cut, part, got)
				}
			}
		})
	}
}

// FuzzJoinedReply: a joined reply built as memcached builds it frames into
// the reply each get would have alone, however it is cut; any bytes at
// all frame without a panic or a part beyond the buffer.
func FuzzJoinedReply(f *testing.F) {
	f.Add("a b c", uint16(5), []byte("xyz"), []byte("VALUE a 0 1\r\nx\r\nEND\r\n"))
	f.Add("k", uint16(1), []byte(""), []byte("SERVER_ERROR x\r\n"))
	f.Add("k1 k2", uint16(2), []byte("\r\nEND\r\n"), []byte("VALUE k2 0 7\r\n\r\nEND\r\n\r\nEND\r\n"))
	f.Fuzz(func(t *testing.T, keyList string, hits uint16, value, data []byte) {
		var keys []string
		for _, k := range strings.Fields(keyList) {
			if len(k) <= DefaultMaxKey && printable(k) && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		if len(keys) < 2 || len(keys) > 16 {
			return
		}
		run := joinedRun(t, "get", keys)
		frameJoined(data, run) // must not panic, nor take bytes it was not given

		var reply strings.Builder
		var want []string
		for i, k := range keys {
			if hits&(1<<i) == 0 {
				want = append(want, "END\r\n")
				continue
			}
			block := fmt.Sprintf("VALUE %s %d %d\r\n%s\r\n", k, i, len(value), value)
			reply.WriteString(block)
			want = append(want, block+"END\r\n")
		}
		reply.WriteString("END\r\n")
		got, taken, err := frameJoined([]byte(reply.String()), run)
		if err != nil || taken != reply.Len() || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%q framed as %q (took %d of %d: %v), want %q", reply.String(), got, taken, reply.Len(), err, want)
		}
		cut := int(hits>>8) % reply.Len()
		part, _, err := frameJoined([]byte(reply.String()[:cut]), run)
		if !errors.Is(err, codec.ErrIncomplete) {
			t.Fatalf("cut at %d: %q, %v", cut, part, err)
		}
		if len(part) > len(got) || strings.Join(part, "|") != strings.Join(got[:len(part)], "|") {
			t.Fatalf("cut at %d: %q, want a prefix of %q", cut, part, got)
		}
	})
}

// printable reports whether k holds only printable ASCII other than space.
func printable(k string) bool {
	for i := range len(k) {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}
