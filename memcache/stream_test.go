package memcache

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"shardproxy/codec"
)

// partRun is what a parser made of the long retrieval line data starts
// with: its parts and its errors, in order.
type partRun struct {
	wires  []string
	parts  []codec.Part
	keys   []string
	errs   []string
	n      int  // bytes of data the line used; 0: it does not end in data
	closed bool // an error closed the connection
	endErr bool // the line ended with an error, not with a part
}

func (r partRun) String() string {
	return fmt.Sprintf("wires=%q parts=%v errs=%q n=%d closed=%v", r.wires, r.parts, r.errs, r.n, r.closed)
}

// runParts feeds data to a fresh parser step bytes more at a time (all
// at once with step 0), cutting with ParsePart whenever ParseRequest
// finds too little, as the session does, until the line ends.
func runParts(t *testing.T, l codec.Options, data []byte, step int) partRun {
	t.Helper()
	p := dialect.NewRequestParser(l).(codec.PartParser)
	var run partRun
	off, avail := 0, len(data)
	if step > 0 {
		avail = step
	}
	for range 4*len(data) + 8 {
		buf := data[off:min(avail, len(data))]
		var req codec.Request
		n, err := p.ParseRequest(buf, &req)
		if errors.Is(err, codec.ErrIncomplete) {
			n, err = p.ParsePart(buf, &req)
		}
		var pe *codec.ProtocolError
		switch {
		case errors.Is(err, codec.ErrIncomplete):
			if n != 0 {
				t.Fatalf("incomplete with n = %d", n)
			}
			if avail >= len(data) {
				return run
			}
			avail += step
			continue
		case errors.As(err, &pe):
			checkProtocolError(t, buf, pe)
			run.errs = append(run.errs, pe.Reply)
			n = pe.N
			run.endErr = true
			if pe.Close {
				run.closed = true
				return run
			}
		case err != nil:
			t.Fatalf("error of type %T: %v", err, err)
		default:
			if req.Part == codec.PartWhole && off > 0 {
				t.Fatalf("a whole request inside a long line: %s", describeRequest(&req, n, nil))
			}
			run.endErr = false
			run.wires = append(run.wires, string(req.Wire))
			run.parts = append(run.parts, req.Part)
			for _, k := range req.Keys {
				run.keys = append(run.keys, string(k))
			}
		}
		if n <= 0 || n > len(buf) {
			t.Fatalf("n = %d for %d bytes", n, len(buf))
		}
		off += n
		if !p.InPart() {
			run.n = off
			return run
		}
	}
	t.Fatalf("no progress through %q", data)
	return run
}

// checkParts checks a long retrieval line cut into parts: wherever the
// reads split it, the same parts; each part a retrieval request the
// proxy could send (within the line's limit, keys within MaxKey); with no
// error, the parts' keys are the line's keys in order.
func checkParts(t *testing.T, l codec.Options, data []byte) {
	t.Helper()
	run := runParts(t, l, data, 0)
	for _, step := range []int{1, 7, 300} {
		if r := runParts(t, l, data, step); r.String() != run.String() || !slices.Equal(r.keys, run.keys) {
			t.Fatalf("%q read %d bytes at a time:\n %s\nat once:\n %s", data, step, r, run)
		}
	}
	np := newParser(l)
	for i, w := range run.wires {
		want := codec.PartMore
		if i == len(run.wires)-1 && run.n > 0 && !run.endErr {
			want = codec.PartLast
		}
		if run.parts[i] != want && (i > 0 || run.parts[i] != codec.PartWhole) {
			t.Fatalf("part %d of %s", i, run)
		}
		limit := np.maxLine + len("gats -9223372036854775808 \r\n")
		if isTouching(lookupCommand([]byte(strings.Fields(w + " x")[0]))) {
			limit = np.cmdLine
		}
		if len(w) > limit || !strings.HasSuffix(w, "\r\n") {
			t.Fatalf("part wire %q over %d bytes", w, limit)
		}
	}
	for _, k := range run.keys {
		if len(k) == 0 || len(k) > np.maxKey && !np.proxy || strings.ContainsAny(k, " \n\x00") {
			t.Fatalf("part key %q", k)
		}
	}
	if run.n == 0 || len(run.errs) > 0 {
		return
	}
	text := data[:run.n-1]
	text = bytes.TrimSuffix(text, []byte("\r"))
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	var want []string
	for _, f := range strings.Split(string(text), " ") {
		if f != "" {
			want = append(want, f)
		}
	}
	want = want[1:]
	if isTouching(lookupCommand([]byte(strings.Fields(run.wires[0])[0]))) {
		want = want[1:]
	}
	if !slices.Equal(run.keys, want) {
		t.Fatalf("%q: parts carry keys %q, the line %q", data, run.keys, want)
	}
}

func TestParts(t *testing.T) {
	small := codec.Options{MaxLine: 40}
	keys := func(n int, f string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, " "+f, i)
		}
		return b.String()
	}
	tests := []struct {
		name string
		l    codec.Options
		in   string
		want partRun
	}{
		{"get cut at the last space within the limit", small, "get" + keys(12, "k%02d") + "\r\n", partRun{
			wires: []string{"get k00 k01 k02 k03 k04 k05 k06 k07 k08\r\n", "get k09 k10 k11\r\n"},
			parts: []codec.Part{codec.PartMore, codec.PartLast},
		}},
		{"a line within the limit is whole", small, "get" + keys(9, "k%02d") + "\r\n", partRun{
			wires: []string{"get k00 k01 k02 k03 k04 k05 k06 k07 k08\r\n"},
			parts: []codec.Part{codec.PartWhole},
		}},
		{"gats carries its exptime, within MaxCommandLine with it", small, "gats 77" + keys(12, "k%02d") + "\r\n", partRun{
			wires: []string{"gats 77 k00 k01 k02 k03 k04 k05 k06\r\n", "gats 77 k07 k08 k09 k10 k11\r\n"},
			parts: []codec.Part{codec.PartMore, codec.PartLast},
		}},
		{"a key too long ends the reply and drops the line", codec.Options{MaxLine: 40, MaxKey: 5}, "get" + keys(12, "k%02d") + " toolongkey" + keys(12, "j%02d") + "\r\nget a\r\n", partRun{
			wires: []string{"get k00 k01 k02 k03 k04 k05 k06 k07 k08\r\n", "get\r\n"},
			parts: []codec.Part{codec.PartMore, codec.PartLast},
			errs:  []string{replyBadFormat},
		}},
		{"a NUL ends the keys", small, "get" + keys(12, "k%02d") + "\x00" + keys(12, "j%02d") + "\r\n", partRun{
			wires: []string{"get k00 k01 k02 k03 k04 k05 k06 k07 k08\r\n", "get k09 k10 k11\r\n", "get\r\n"},
			parts: []codec.Part{codec.PartMore, codec.PartMore, codec.PartLast},
		}},
		{"proxy errors: a key too long goes through", codec.Options{MaxLine: 40, MaxKey: 5, ProxyErrors: true}, "get" + keys(12, "k%02d") + " toolongkey\r\n", partRun{
			wires: []string{"get k00 k01 k02 k03 k04 k05 k06 k07 k08\r\n", "get k09 k10 k11 toolongkey\r\n"},
			parts: []codec.Part{codec.PartMore, codec.PartLast},
		}},
		{"other lines keep their limit", small, "set" + keys(12, "k%02d") + "\r\n", partRun{
			errs: []string{replyLineTooLong}, closed: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			for _, step := range []int{0, 1, 5} {
				got := runParts(t, tt.l, in, step)
				got.keys, got.n = nil, 0
				if got.String() != tt.want.String() {
					t.Fatalf("step %d:\n got %s\nwant %s", step, got, tt.want)
				}
			}
		})
	}
}

func TestPartsDefaults(t *testing.T) {
	// A 20,000-key get (188 KB) in parts within max_request_line; a gat's
	// parts within MaxCommandLine, which memcached reads whole.
	for _, verb := range []string{"get", "gets", "gat 0", "gats 10"} {
		var b strings.Builder
		b.WriteString(verb)
		for i := range 20000 {
			fmt.Fprintf(&b, " key:%05d", i)
		}
		b.WriteString("\r\n")
		checkParts(t, codec.Options{}, []byte(b.String()))
	}
}

func TestTrimPart(t *testing.T) {
	tests := []struct {
		reply string
		n     int
		ended bool
	}{
		{"END\r\n", 0, false},
		{"VALUE k 0 1\r\nx\r\nEND\r\n", 16, false},
		{"VALUE k 0 3\r\nEND\r\nEND\r\n", 18, false},
		{"SERVER_ERROR backend failure: timeout\r\n", 39, true},
		{"VALUE k 0 1\r\nx\r\nCLIENT_ERROR key too long\r\nEND\r\n", 43, false},
	}
	for _, tt := range tests {
		n, ended := dialect.TrimPart([]byte(tt.reply))
		if n != tt.n || ended != tt.ended {
			t.Errorf("TrimPart(%q) = %d, %v; want %d, %v", tt.reply, n, ended, tt.n, tt.ended)
		}
	}
}

// FuzzParts feeds long retrieval lines, made of the fuzzer's keys, to
// parsers with small limits, in reads of every size.
func FuzzParts(f *testing.F) {
	f.Add("get", []byte("k1 k22 k333 k4444"), uint8(30), uint8(5))
	f.Add("gat 10", []byte("a b\x00c dd"), uint8(40), uint8(3))
	f.Add("gets", []byte("toolongkeytoolongkey x"), uint8(200), uint8(8))
	f.Fuzz(func(t *testing.T, verb string, keys []byte, repeat, maxKey uint8) {
		if len(verb) > 20 || len(keys) > 4096 {
			return
		}
		line := []byte(verb)
		for range int(repeat) {
			line = append(append(line, ' '), keys...)
		}
		line = append(line, "\r\nget x\r\n"...)
		for _, l := range []codec.Options{
			{MaxLine: 40, MaxKey: int(maxKey)},
			{MaxLine: 64, MaxKey: int(maxKey), ProxyErrors: true},
			{MaxLine: 100},
		} {
			p := dialect.NewRequestParser(l)
			var req codec.Request
			_, err := p.ParseRequest(line, &req)
			if req.Part != codec.PartWhole || p.(codec.PartParser).InPart() ||
				errors.Is(err, codec.ErrIncomplete) {
				checkParts(t, l, line)
			}
		}
	})
}
