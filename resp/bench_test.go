package resp

import (
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
}
