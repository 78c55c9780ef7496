package sharding

import "testing"

// TestJumpPublished checks the vectors that dgryski/go-jump generated from
// the paper's reference C++ code: bucket for keys 0, 1, 0xdeadbeef and
// 0x0ddc0ffeebadf00d with 1..n buckets.
func TestJumpPublished(t *testing.T) {
	tests := []struct {
		key  uint64
		want []int
	}{
		{0, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{1, []int{0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17}},
		{0xdeadbeef, []int{0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16}},
		{0x0ddc0ffeebadf00d, []int{0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15}},
	}
	for _, tt := range tests {
		for i, want := range tt.want {
			if got := Jump(tt.key, i+1); got != want {
				t.Errorf("Jump(%#x, %d) = %d, want %d", tt.key, i+1, got, want)
			}
		}
	}
}

// TestJumpMonotone checks the consistency property: growing from n to n+1
// buckets moves a key only to the new bucket.
func TestJumpMonotone(t *testing.T) {
	gen := lcg(1)
	for range 10000 {
		key := gen.next()
		prev := Jump(key, 1)
		for n := 2; n <= 64; n++ {
			b := Jump(key, n)
			if b != prev && b != n-1 {
				t.Fatalf("Jump(%#x): %d buckets -> %d, %d buckets -> %d", key, n-1, prev, n, b)
			}
			prev = b
		}
	}
	if Jump(5, 0) != 0 || Jump(5, -3) != 0 {
		t.Errorf("Jump with no buckets should return 0")
	}
}

func TestJumpHashDistribution(t *testing.T) {
	d, err := NewDistribution("jump", make4Servers(), DistOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j := d.(Distribution64)
	if got, want := j.Pick64(0xdeadbeef), Jump(0xdeadbeef, 4); got != want {
		t.Errorf("Pick64 = %d, want %d", got, want)
	}
	if got, want := j.Pick(0xdeadbeef), Jump(0xdeadbeef, 4); got != want {
		t.Errorf("Pick = %d, want %d", got, want)
	}
}

func make4Servers() []Server {
	return []Server{{"a:1", 1}, {"b:1", 1}, {"c:1", 1}, {"d:1", 1}}
}
