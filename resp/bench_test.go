package resp

import (
	"fmt"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

var (
	benchKey    = "user:1234567890"
	benchGet    = []byte(mb("GET", benchKey))
	benchSet    = []byte(mb("SET", benchKey, strings.Repeat("v", 100)))
	benchMGet   = []byte(mb(append([]string{"MGET"}, strings.Fields(strings.Repeat(benchKey+" ", 100))...)...))
	benchInline = []byte("GET " + benchKey + "\r\n")
	benchPing   = []byte(mb("PING"))
	benchBulk   = []byte("$100\r\n" + strings.Repeat("v", 100) + "\r\n")
	benchArray  = []byte("*100\r\n" + strings.Repeat("$100\r\n"+strings.Repeat("v", 100)+"\r\n", 99) + "$-1\r\n")
)

func BenchmarkParseGet(b *testing.B)       { codectest.BenchParse(b, dialect, benchGet) }
func BenchmarkParseSet100(b *testing.B)    { codectest.BenchParse(b, dialect, benchSet) }
func BenchmarkParseMGet100(b *testing.B)   { codectest.BenchParse(b, dialect, benchMGet) }
func BenchmarkParseInlineGet(b *testing.B) { codectest.BenchParse(b, dialect, benchInline) }
func BenchmarkParsePing(b *testing.B)      { codectest.BenchParse(b, dialect, benchPing) }

func BenchmarkParseReplyBulk(b *testing.B)  { codectest.BenchReply(b, dialect, nil, benchBulk) }
func BenchmarkParseReplyArray(b *testing.B) { codectest.BenchReply(b, dialect, nil, benchArray) }

// resumeArray returns an array reply of n short bulk strings: 14 bytes
// an element, as an LRANGE or a big MGET answers.
func resumeArray(n int) []byte {
	reply := fmt.Appendf(nil, "*%d\r\n", n)
	for range n {
		reply = append(reply, "$8\r\nvalue123\r\n"...)
	}
	return reply
}

// BenchmarkResumeReply frames an array of 10k, 100k and 400k short bulk
// strings arriving in 16 KiB reads (resumed after each) and at once: the
// time per element must not grow with the reply (the 400k-element reply
// took 579 ms to frame in pieces when each read framed it from its start,
// 5 ms at once).
func BenchmarkResumeReply(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 400_000} {
		reply := resumeArray(n)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			codectest.BenchResume(b, dialect, nil, reply, n)
		})
	}
}

func BenchmarkSplitMergeMGet100(b *testing.B) {
	var req codec.Request
	if _, err := dialect.NewRequestParser(codec.Options{}).ParseRequest(benchMGet, &req); err != nil {
		b.Fatal(err)
	}
	targets := make([]int, len(req.Keys))
	for i := range targets {
		targets[i] = i % 4
	}
	replies := make([]codec.Reply, 4)
	for i := range replies {
		replies[i] = codec.Reply{Raw: []byte("*25\r\n" + strings.Repeat("$3\r\nabc\r\n", 25))}
	}
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		subs, _, owners := dialect.Split(&req, targets, nil)
		dst = dialect.Merge(dst[:0], &req, subs, owners, replies)
	}
}

// TestZeroAllocs pins the hot paths at zero allocations once the request's
// storage has grown.
func TestZeroAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	p := dialect.NewRequestParser(codec.Options{})
	var req codec.Request
	for _, in := range [][]byte{benchGet, benchSet, benchMGet, benchInline, benchPing, []byte(mb("DEL", "a", "b", "c"))} {
		p.ParseRequest(in, &req) // grow req.Buf, req.Keys and the parser's scratch
		allocs := testing.AllocsPerRun(100, func() {
			req.Reset()
			if _, err := p.ParseRequest(in, &req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("ParseRequest(%.20q...) allocates %.1f times", in, allocs)
		}
	}
	for _, in := range [][]byte{benchBulk, benchArray, []byte("+OK\r\n"), []byte(":1\r\n"), []byte("-ERR x\r\n"), []byte("$-1\r\n")} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, err := dialect.ParseReply(in, nil); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("ParseReply(%.20q...) allocates %.1f times", in, allocs)
		}
	}
	dst := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		dst = dialect.AppendReply(dst[:0], &req, benchBulk, codec.ReplyOK)
	})
	if allocs != 0 {
		t.Errorf("AppendReply allocates %.1f times", allocs)
	}
	long := resumeArray(100_000)
	var st codec.ReplyState
	allocs = testing.AllocsPerRun(5, func() {
		if n, _, err := codectest.ResumeInReads(dialect, nil, long, &st); err != nil || n != len(long) {
			t.Fatalf("%d of %d bytes: %v", n, len(long), err)
		}
	})
	if allocs != 0 {
		t.Errorf("ResumeReply of a %d-byte array in %d-byte reads allocates %.1f times", len(long), codectest.ReadSize, allocs)
	}
}

// BenchmarkMergeInfo merges three servers' INFO everything (not a hot
// path: it shows what one INFO costs the proxy).
func BenchmarkMergeInfo(b *testing.B) {
	a, c := bulkReply(readInfo(b, "everything_a.txt")), bulkReply(readInfo(b, "everything_b.txt"))
	replies := []codec.Reply{a, c, a}
	req := &codec.Request{Cmd: cmdINFO, Route: codec.RouteAll}
	b.ReportAllocs()
	var out []byte
	for range b.N {
		out = dialect.Merge(out[:0], req, nil, nil, replies)
	}
}
