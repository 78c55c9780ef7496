package main

import "testing"

func TestValueRoundTrip(t *testing.T) {
	v := encodeValue("mc:c1:k7", 42)
	k, n, ok := decodeValue(v)
	if !ok || k != "mc:c1:k7" || n != 42 {
		t.Fatalf("decode(%q) = %q %d %v", v, k, n, ok)
	}
	if _, _, ok := decodeValue(v[:len(v)-1] + "0"); ok && v[len(v)-1] != '0' {
		t.Fatal("corrupted checksum decoded")
	}
	if _, _, ok := decodeValue("garbage"); ok {
		t.Fatal("garbage decoded")
	}
}

func TestCheckHit(t *testing.T) {
	tab := keyTable{}
	tab.setAcked("a", 1)
	tab.setAcked("a", 2)
	tab.setUncertain("a", 3)
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"a", encodeValue("a", 2), true},  // last acknowledged
		{"a", encodeValue("a", 3), true},  // unacknowledged set may have landed
		{"a", encodeValue("a", 1), false}, // older acknowledged: lost update
		{"a", encodeValue("a", 9), false}, // never sent
		{"a", encodeValue("b", 2), false}, // another key's value
		{"a", "a|2|00000000", false},      // bad checksum
		{"b", encodeValue("b", 1), false}, // nothing written yet
	} {
		err := tab.checkHit(tc.key, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("checkHit(%q, %q) = %v, want ok=%v", tc.key, tc.value, err, tc.ok)
		}
	}
	if got := errorCause("SERVER_ERROR backend failure: timeout"); got != "backend failure: timeout" {
		t.Errorf("errorCause = %q", got)
	}
	if got := errorCause("-ERR backend failure: markedbad"); got != "backend failure: markedbad" {
		t.Errorf("errorCause = %q", got)
	}
}
