package memcache

import "testing"

func TestParseLong(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"+7", 7, true},
		{"-7", -7, true},
		{"\t 12", 12, true},
		{"12\t", 12, true},
		{"12\rjunk", 12, true}, // strtol stops at whitespace; memcached accepts
		{"9223372036854775807", 1<<63 - 1, true},
		{"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"+", 0, false},
		{"x1", 0, false},
		{"1x", 0, false},
		{"0x10", 0, false},
		{"1.5", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseLong([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseLong(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseUlong(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"-1", 0, false},
		{"-18446744073709551615", 1, true}, // strtoul negates modulo 2^64; safe_strtoul lets it pass
		{"4294967296", 1 << 32, true},
		{" 5 ", 5, true},
		{"5a", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseUlong([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseUlong(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseLength(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true},
		{"100", 100, true},
		{"2147483645", 2147483645, true},
		{"2147483646", 0, false},
		{"-1", 0, false},
		{"4294967297", 0, false}, // memcached would read 1 (int32 wrap)
	}
	for _, tt := range tests {
		got, ok := parseLength([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseLength(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
