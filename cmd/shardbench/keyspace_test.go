package main

import (
	"strings"
	"testing"
)

func TestKeyspaceNames(t *testing.T) {
	ks := newKeyspace("p:", 1000, 100)
	if got := string(ks.names[7]); got != "p:007" {
		t.Fatalf("names[7] = %q, want p:007", got)
	}
	tests := []struct {
		name string
		want int
		ok   bool
	}{
		{"p:000", 0, true},
		{"p:999", 999, true},
		{"p:07", 0, false},   // wrong width
		{"q:007", 0, false},  // wrong prefix
		{"p:0a7", 0, false},  // not digits
		{"p:0007", 0, false}, // too long
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ks.index([]byte(tt.name))
			if got != tt.want || ok != tt.ok {
				t.Errorf("index(%q) = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, size := range []int{minValue, 17, 100, 1000, 100 << 10} {
		ks := newKeyspace("rt:", 50, size)
		for k := range ks.len() {
			for range 3 {
				ver := ks.nextVersion(k)
				v := ks.appendValue(nil, k, ver)
				if len(v) != size {
					t.Fatalf("size %d: value of %d bytes", size, len(v))
				}
				if err := ks.check(k, v); err != nil {
					t.Fatalf("size %d key %d version %d: %v", size, k, ver, err)
				}
			}
		}
	}
}

func TestCheckCatchesWrongValues(t *testing.T) {
	ks := newKeyspace("c:", 100, 64)
	for k := range 3 {
		ks.nextVersion(k)
		ks.nextVersion(k)
	}
	good := ks.appendValue(nil, 1, 2)
	flip := func(i int) []byte {
		v := append([]byte(nil), good...)
		v[i] ^= 0x20
		return v
	}
	tests := []struct {
		name  string
		value []byte
		want  string
	}{
		{"right", good, ""},
		{"older version", ks.appendValue(nil, 1, 1), ""},
		{"short", good[:63], "value of 63 bytes, want 64"},
		{"long", append(append([]byte(nil), good...), 'x'), "value of 65 bytes"},
		{"another key", ks.appendValue(nil, 2, 1), "got the value of key c:02"},
		{"key outside the space", ks.appendValue(nil, 500, 1), "outside the key space"},
		{"version never issued", ks.appendValue(nil, 1, 3), "version 3 was never written"},
		{"version zero", ks.appendValue(nil, 1, 0), "version 0 was never written"},
		{"body byte", flip(40), "differs at byte 40"},
		{"last byte", flip(63), "differs at byte 63"},
		{"header not hex", flip(3), "is not one the generator writes"},
		{"another version's body", append(append([]byte(nil), good[:16]...), ks.appendValue(nil, 1, 1)[16:]...), "version 2 differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ks.check(1, tt.value)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("check: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("check: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestVersionsDifferInBody(t *testing.T) {
	ks := newKeyspace("b:", 10, 200)
	a := ks.appendValue(nil, 3, 1)
	b := ks.appendValue(nil, 3, 2)
	if string(a[headerLen:]) == string(b[headerLen:]) {
		t.Error("two versions of a key have the same body")
	}
}
