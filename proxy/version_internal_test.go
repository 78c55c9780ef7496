package proxy

import "testing"

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.6.18", "1.6.18", 0},
		{"1.6.9", "1.6.18", -1},
		{"1.6.18", "1.4.25", 1},
		{"1.10.0", "1.9.99", 1},
		{"2.0", "1.99.99", 1},
		{"1.6", "1.6.0", 0},
		{"1.6.18", "1.6.18-rc1", -1},
		{"1.6.18-rc1", "1.6.18-rc2", -1},
		{"1.6.18-rc1", "1.6.19", -1},
		{"99999999999999999999.0.0", "1.0.0", 1},
		{"x", "1.0.0", 1},
	}
	for _, tt := range tests {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}
