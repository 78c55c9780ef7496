package cluster

import "testing"

// The slots were read from redis-server 7.0.15 with CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	tests := []struct {
		key  string
		slot int
	}{
		{"123456789", 12739}, // CRC16/XMODEM's check value 0x31C3
		{"foo", 12182},
		{"bar", 5061},
		{"user1000", 3443},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},    // empty tag: the whole key
		{"foo{{bar}}zap", 4015}, // the tag is "{bar"
		{"foo{bar}{zap}", 5061}, // the first tag: "bar"
		{"{}", 15257},
		{"{}foo", 9500},
		{"", 0},
		{"a{b", 13340},
		{"a}b{", 6027},
		{"{a}", 15495},
		{"foo{", 7673},
		{"}{x}", 16287},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := Slot([]byte(tt.key)); got != tt.slot {
				t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.slot)
			}
		})
	}
}

func TestSlotRange(t *testing.T) {
	for i := range 100000 {
		key := []byte{byte(i), byte(i >> 8), byte(i >> 16), '{', byte(i * 7), '}'}
		if s := Slot(key); s < 0 || s >= Slots {
			t.Fatalf("Slot(%q) = %d", key, s)
		}
	}
}

func BenchmarkSlot(b *testing.B) {
	key := []byte("{user1000}.following:0123456789")
	b.ReportAllocs()
	for b.Loop() {
		Slot(key)
	}
}
