package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// getReplies are a hit of one key and a multi-get of eight keys, half
// hits, in each protocol: the replies the load generator reads most.
var getReplies = []struct {
	name, proto string
	keys        int
	reply       string
}{
	{"text/one", "text", 1, "VALUE k0 0 32\r\n" + strings.Repeat("v", 32) + "\r\nEND\r\n"},
	{"text/eight", "text", 8, multiText()},
	{"meta/one", "meta", 1, "VA 32 kk0\r\n" + strings.Repeat("v", 32) + "\r\n"},
	{"resp/one", "resp", 1, "$32\r\n" + strings.Repeat("v", 32) + "\r\n"},
	{"resp/eight", "resp", 8, multiRESP()},
}

func multiText() string {
	var b strings.Builder
	for i := 0; i < 8; i += 2 {
		b.WriteString("VALUE k" + itoa(i) + " 0 32\r\n" + strings.Repeat("v", 32) + "\r\n")
	}
	return b.String() + "END\r\n"
}

func multiRESP() string {
	var b strings.Builder
	b.WriteString("*8\r\n")
	for i := range 8 {
		if i%2 == 0 {
			b.WriteString("$32\r\n" + strings.Repeat("v", 32) + "\r\n")
		} else {
			b.WriteString("$-1\r\n")
		}
	}
	return b.String()
}

// readGetLoop returns a function that reads reply once per call through the
// protocol's readGet, from a reader reset to the reply's start.
func readGetLoop(tb testing.TB, proto string, nkeys int, reply string) func() {
	p := protocols[proto]()
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = []byte("k" + itoa(i))
	}
	wire := []byte(reply)
	src := bytes.NewReader(wire)
	r := bufio.NewReaderSize(src, readBufferSize)
	hits := 0
	hit := func(int, []byte) { hits++ }
	return func() {
		src.Reset(wire)
		r.Reset(src)
		if err := p.readGet(r, keys, hit); err != nil {
			tb.Fatalf("readGet: %v", err)
		}
	}
}

func BenchmarkReadGet(b *testing.B) {
	for _, tt := range getReplies {
		b.Run(tt.name, func(b *testing.B) {
			read := readGetLoop(b, tt.proto, tt.keys, tt.reply)
			b.ReportAllocs()
			b.SetBytes(int64(len(tt.reply)))
			for b.Loop() {
				read()
			}
		})
	}
}

// TestReadGetAllocs pins the load generator's reply readers to no
// allocation per request.
func TestReadGetAllocs(t *testing.T) {
	for _, tt := range getReplies {
		t.Run(tt.name, func(t *testing.T) {
			read := readGetLoop(t, tt.proto, tt.keys, tt.reply)
			read() // the scratch buffer grows once
			if n := testing.AllocsPerRun(100, read); n != 0 {
				t.Errorf("%.1f allocations per read, want 0", n)
			}
		})
	}
}
