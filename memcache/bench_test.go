package memcache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

var (
	benchGet      = []byte("get user:1234567890\r\n")
	benchSet      = []byte("set user:1234567890 0 3600 100\r\n" + strings.Repeat("v", 100) + "\r\n")
	benchMultiGet = []byte("get" + strings.Repeat(" user:1234567890", 100) + "\r\n")
	benchMetaGet  = []byte("mg dXNlcjoxMjM0NTY3ODkw b v f t q\r\n")
	benchValue    = []byte("VALUE user:1234567890 0 100\r\n" + strings.Repeat("v", 100) + "\r\nEND\r\n")
	benchQuiet    = []byte("VA 100 f0 t-1\r\n" + strings.Repeat("v", 100) + "\r\nMN\r\n")
)

func BenchmarkParseGet(b *testing.B)      { codectest.BenchParse(b, dialect, benchGet) }
func BenchmarkParseSet100(b *testing.B)   { codectest.BenchParse(b, dialect, benchSet) }
func BenchmarkParseMultiGet(b *testing.B) { codectest.BenchParse(b, dialect, benchMultiGet) }
func BenchmarkParseMetaGet(b *testing.B)  { codectest.BenchParse(b, dialect, benchMetaGet) }

func BenchmarkParseReplyValue(b *testing.B) {
	codectest.BenchReply(b, dialect, replyReq(CmdGet, codec.ModeNormal), benchValue)
}

// BenchmarkParseReplyMultiValue parses one server's part of a 100-key
// multi-get over 4 servers: 25 hits of 100 bytes, checked against the keys.
func BenchmarkParseReplyMultiValue(b *testing.B) {
	req := replyReq(CmdGet, codec.ModeNormal)
	var raw []byte
	for i := range 25 {
		key := fmt.Sprintf("user:%010d", i)
		req.Keys = append(req.Keys, []byte(key))
		raw = fmt.Appendf(raw, "VALUE %s 0 100\r\n%s\r\n", key, strings.Repeat("v", 100))
	}
	codectest.BenchReply(b, dialect, req, append(raw, "END\r\n"...))
}

// resumeGet returns a get of n keys and its reply, a short value for
// every key: 39 bytes a block.
func resumeGet(n int) (*codec.Request, []byte) {
	req := replyReq(CmdGet, codec.ModeNormal)
	var reply []byte
	for i := range n {
		key := fmt.Sprintf("key:%07d", i)
		req.Keys = append(req.Keys, []byte(key))
		reply = fmt.Appendf(reply, "VALUE %s 0 8\r\nvalue123\r\n", key)
	}
	return req, append(reply, "END\r\n"...)
}

// BenchmarkResumeReply frames the reply to a 10k- and a 100k-key get
// arriving in 16 KiB reads (resumed after each) and at once: the time per
// key must not grow with the reply.
func BenchmarkResumeReply(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		req, reply := resumeGet(n)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			codectest.BenchResume(b, dialect, req, reply, n)
		})
	}
}

// BenchmarkParseGetAsMeta parses a get that server_protocol meta sends as mg.
func BenchmarkParseGetAsMeta(b *testing.B) {
	p := dialect.NewRequestParser(codec.Options{MetaGets: true})
	var req codec.Request
	b.ReportAllocs()
	for b.Loop() {
		req.Reset()
		if _, err := p.ParseRequest(benchGet, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplyGetAsMeta frames and rewrites the mg reply to a get: a
// 100-byte hit, shown to the client as text.
func BenchmarkReplyGetAsMeta(b *testing.B) {
	req, _, err := parse(b, codec.Options{MetaGets: true}, string(benchGet))
	if err != nil {
		b.Fatal(err)
	}
	reply := []byte("VA 100 k" + string(req.Keys[0]) + " f0\r\n" + strings.Repeat("v", 100) + "\r\n")
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		n, kind, err := dialect.ParseReply(reply, req)
		if err != nil {
			b.Fatal(err)
		}
		dst = dialect.AppendReply(dst[:0], req, reply[:n], kind)
	}
}

func BenchmarkParseReplyQuietMeta(b *testing.B) {
	codectest.BenchReply(b, dialect, replyReq(CmdMetaGet, codec.ModeQuiet), benchQuiet)
}

// splitBench is a 100-key get over 4 servers (keys placed at random, as a
// hash would), split once, with every key's reply a hit of 100 bytes.
type splitBench struct {
	req     codec.Request
	targets []int
	scratch codec.SplitScratch
	replies []codec.Reply
}

func newSplitBench(b *testing.B) *splitBench {
	const keys, servers = 100, 4
	rng := rand.New(rand.NewPCG(1, 2))
	in := []byte("get")
	for i := range keys {
		in = fmt.Appendf(in, " sb1f2e3d4c:%d", rng.IntN(10000)*100+i) // distinct
	}
	in = append(in, "\r\n"...)
	sb := &splitBench{}
	if _, err := dialect.NewRequestParser(codec.Options{}).ParseRequest(in, &sb.req); err != nil {
		b.Fatal(err)
	}
	sb.targets = make([]int, len(sb.req.Keys))
	for i := range sb.targets {
		sb.targets[i] = rng.IntN(servers)
	}
	subs, _, owners := dialect.Split(&sb.req, sb.targets, &sb.scratch)
	sb.replies = make([]codec.Reply, len(subs))
	for j, s := range subs {
		var raw []byte
		for _, k := range s.Keys {
			raw = fmt.Appendf(raw, "VALUE %s 0 100\r\n%s\r\n", k, strings.Repeat("v", 100))
		}
		sb.replies[j] = codec.Reply{Raw: append(raw, "END\r\n"...)}
	}
	dst := dialect.Merge(nil, &sb.req, subs, owners, sb.replies)
	if got := bytes.Count(dst, []byte("VALUE ")); got != len(sb.req.Keys) {
		b.Fatalf("merged %d values of %d", got, len(sb.req.Keys))
	}
	return sb
}

// BenchmarkSplitMerge splits a 100-key get over 4 servers into reused
// storage and merges the servers' replies: the proxy's own work on a
// multi-get besides parsing and placement.
func BenchmarkSplitMerge(b *testing.B) {
	sb := newSplitBench(b)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		subs, _, owners := dialect.Split(&sb.req, sb.targets, &sb.scratch)
		dst = dialect.Merge(dst[:0], &sb.req, subs, owners, sb.replies)
	}
}

// BenchmarkSplit is BenchmarkSplitMerge's split alone.
func BenchmarkSplit(b *testing.B) {
	sb := newSplitBench(b)
	b.ReportAllocs()
	for b.Loop() {
		dialect.Split(&sb.req, sb.targets, &sb.scratch)
	}
}

// BenchmarkMerge is BenchmarkSplitMerge's merge alone.
func BenchmarkMerge(b *testing.B) {
	sb := newSplitBench(b)
	subs, _, owners := dialect.Split(&sb.req, sb.targets, &sb.scratch)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst = dialect.Merge(dst[:0], &sb.req, subs, owners, sb.replies)
	}
}

// TestZeroAllocs pins the hot paths at zero allocations once the request's
// storage has grown.
func TestZeroAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	// A Lua pool's clients are parsed with memcached proxy's words and wire.
	for _, opts := range []codec.Options{{}, {ProxyErrors: true, ProxyWire: true}} {
		p := dialect.NewRequestParser(opts)
		var req codec.Request
		for _, in := range [][]byte{benchGet, benchSet, benchMultiGet, benchMetaGet, []byte("set k 0 0 1 noreply\r\nx\r\n")} {
			p.ParseRequest(in, &req) // grow req.Buf, req.Keys and the token list
			allocs := testing.AllocsPerRun(100, func() {
				req.Reset()
				if _, err := p.ParseRequest(in, &req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("ParseRequest(%.20q...) with %+v allocates %.1f times", in, opts, allocs)
			}
		}
	}
	replies := []struct {
		req *codec.Request
		in  []byte
	}{
		{replyReq(CmdGet, codec.ModeNormal), benchValue},
		{replyReq(CmdMetaGet, codec.ModeQuiet), benchQuiet},
		{replyReq(CmdSet, codec.ModeNormal), []byte("STORED\r\n")},
		{replyReq(CmdIncr, codec.ModeNormal), []byte("12345\r\n")},
	}
	for _, r := range replies {
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, err := dialect.ParseReply(r.in, r.req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("ParseReply(%.20q...) allocates %.1f times", r.in, allocs)
		}
	}
	dst := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		dst = dialect.AppendReply(dst[:0], replies[1].req, benchQuiet, codec.ReplyOK)
	})
	if allocs != 0 {
		t.Errorf("AppendReply allocates %.1f times", allocs)
	}
	getReq, long := resumeGet(100_000)
	var st codec.ReplyState
	allocs = testing.AllocsPerRun(5, func() {
		if n, _, err := codectest.ResumeInReads(dialect, getReq, long, &st); err != nil || n != len(long) {
			t.Fatalf("%d of %d bytes: %v", n, len(long), err)
		}
	})
	if allocs != 0 {
		t.Errorf("ResumeReply of a %d-byte multi-get reply in %d-byte reads allocates %.1f times", len(long), codectest.ReadSize, allocs)
	}
}
