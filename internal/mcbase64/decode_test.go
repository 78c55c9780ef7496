package mcbase64

import (
	"encoding/base64"
	"testing"
)

// decodeTests are memcached's decodings of base64 keys; they seed
// FuzzDecode too.
var decodeTests = []struct {
	name string
	in   string
	want string // "" means it does not decode
}{
	{"one block", "Zm9v", "foo"},
	{"two pad", "Zm9vYg==", "foob"},
	{"one pad", "Zm9vYmE=", "fooba"},
	{"one byte", "Zg==", "f"},
	{"binary", "AAEC/+8=", "\x00\x01\x02\xff\xef"},
	{"empty", "", ""},
	{"no alphabet byte", "!!!!", ""},
	{"not a multiple of four", "Zm9", ""},
	{"others skipped", "!Zm9v!", "foo"},
	{"spaces and line ends skipped", "Z m\r\n9\tv", "foo"},
	{"others between padding", "Zg= =", "f"},
	{"others after padding", "Zg==!", "f"},
	{"trailing bits ignored", "Zm==", "f"},
	// Padding rules.
	{"four pad", "====", ""},
	{"three pad", "Z===", ""},
	{"three pad in a later block", "Zm9vZ===", ""},
	{"four pad after a block", "Zm9v====", ""},
	{"stops after the padded block", "Zg==Zm9v", "f"},
	{"stops after a one-pad block", "Zm9vYmE=Zg==", "fooba"},
	{"pad counts where it stands", "Zg=A", "f\x00"},
	{"pad first", "==Zg", "\x00"},
	{"pad around", "=Zg=", "\x01"},
	{"the count spans what follows the padded block", "Zg==Zm9", ""},
	{"a pad alone", "=", ""},
}

func TestDecode(t *testing.T) {
	for _, tt := range decodeTests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, len(tt.in)/4*3)
			if got := string(dst[:Decode(dst, []byte(tt.in))]); got != tt.want {
				t.Errorf("Decode(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendDecode(t *testing.T) {
	for _, tt := range decodeTests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AppendDecode(nil, []byte(tt.in))
			if ok != (tt.want != "") || string(got) != tt.want {
				t.Errorf("AppendDecode(nil, %q) = %q, %v, want %q, %v", tt.in, got, ok, tt.want, tt.want != "")
			}
			if !ok && got != nil {
				t.Errorf("AppendDecode(nil, %q) failed with %q, want nil", tt.in, got)
			}
			// Appended after a prefix, which a failure leaves as it was.
			got, ok = AppendDecode([]byte("k:"), []byte(tt.in))
			if want := "k:" + tt.want; string(got) != want || ok != (tt.want != "") {
				t.Errorf("AppendDecode(%q, %q) = %q, %v, want %q", "k:", tt.in, got, ok, want)
			}
		})
	}
}

// TestStdEncoding decodes what encoding/base64 encodes, of every length
// up to 40 (every tail: no padding, one and two '=').
func TestStdEncoding(t *testing.T) {
	for n := range 40 {
		src := make([]byte, n+1)
		for i := range src {
			src[i] = byte(i*37 + n)
		}
		enc := base64.StdEncoding.EncodeToString(src)
		dst := make([]byte, len(enc)/4*3)
		if got := dst[:Decode(dst, []byte(enc))]; string(got) != string(src) {
			t.Errorf("Decode(%q) = %x, want %x", enc, got, src)
		}
	}
}

// TestAllocs pins the allocations: none for Decode, which the memcache
// parser calls with a buffer on its stack, and one for AppendDecode into
// nil, which store keeps.
func TestAllocs(t *testing.T) {
	src := []byte("Zm9vYmFyYmF6cXV4Cg==")
	dst := make([]byte, len(src)/4*3)
	if a := testing.AllocsPerRun(100, func() { Decode(dst, src) }); a != 0 {
		t.Errorf("Decode: %v allocations, want 0", a)
	}
	var key []byte
	if a := testing.AllocsPerRun(100, func() { key, _ = AppendDecode(nil, src) }); a != 1 {
		t.Errorf("AppendDecode(nil, ...): %v allocations, want 1", a)
	}
	if string(key) != "foobarbazqux\n" {
		t.Errorf("AppendDecode(nil, %q) = %q", src, key)
	}
}

// FuzzDecode checks, for any input, that decoding does not panic, stays
// within len(src)/4*3 bytes and that Decode and AppendDecode agree; that
// the input's standard encoding decodes to the input; and that where
// encoding/base64 decodes the input to something, memcached's lenient
// decoding gives the same bytes.
func FuzzDecode(f *testing.F) {
	for _, tt := range decodeTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte("\x00\xff\x80=+/"))
	f.Fuzz(func(t *testing.T, src []byte) {
		dst := make([]byte, len(src)/4*3)
		n := Decode(dst, src)
		if n < 0 || n > len(dst) {
			t.Fatalf("Decode(%q) = %d, want 0 to %d", src, n, len(dst))
		}
		got, ok := AppendDecode(nil, src)
		if ok != (n > 0) || string(got) != string(dst[:n]) {
			t.Fatalf("AppendDecode(nil, %q) = %q, %v; Decode gave %q", src, got, ok, dst[:n])
		}
		if std, err := base64.StdEncoding.DecodeString(string(src)); err == nil && len(std) > 0 &&
			string(std) != string(dst[:n]) {
			t.Fatalf("Decode(%q) = %q, encoding/base64 gives %q", src, dst[:n], std)
		}

		enc := []byte(base64.StdEncoding.EncodeToString(src))
		dst = make([]byte, len(enc)/4*3)
		if got := dst[:Decode(dst, enc)]; string(got) != string(src) {
			t.Fatalf("Decode(%q) = %q, want %q", enc, got, src)
		}
	})
}
