package memcache

import (
	"encoding/base64"
	"testing"
)

func TestDecodeBase64(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means it does not decode
	}{
		{"Zm9v", "foo"},
		{"Zm9vYg==", "foob"},
		{"Zm9vYmE=", "fooba"},
		{"Zg==", "f"},
		{"Zm9", ""},       // not a multiple of four
		{"====", ""},      // too much padding
		{"Z===", ""},      // too much padding
		{"!Zm9v!", "foo"}, // bytes outside the alphabet are skipped
		{"Zg==Zm9v", "f"}, // decoding stops after the padded block
		{"Zg=A", "f\x00"}, // '=' counts where it stands
		{"", ""},          // nothing
		{"!!!!", ""},      // nothing in the alphabet
		{"AAEC/+8=", "\x00\x01\x02\xff\xef"},
	}
	for _, tt := range tests {
		dst := make([]byte, len(tt.in)/4*3)
		got := string(dst[:decodeBase64(dst, []byte(tt.in))])
		if got != tt.want {
			t.Errorf("decodeBase64(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Every standard encoding decodes to its input.
	for n := range 40 {
		src := make([]byte, n+1)
		for i := range src {
			src[i] = byte(i*37 + n)
		}
		enc := base64.StdEncoding.EncodeToString(src)
		dst := make([]byte, len(enc)/4*3)
		if got := dst[:decodeBase64(dst, []byte(enc))]; string(got) != string(src) {
			t.Errorf("decodeBase64(%q) = %x, want %x", enc, got, src)
		}
	}
}
