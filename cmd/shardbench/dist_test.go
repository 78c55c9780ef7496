package main

import (
	"math/rand/v2"
	"testing"
)

func TestZipfian(t *testing.T) {
	const n = 1000
	z := newZipfian(n, 0.99)
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	for range 200000 {
		k := z.next(r)
		if k < 0 || k >= n {
			t.Fatalf("next = %d, outside [0, %d)", k, n)
		}
		counts[k]++
	}
	if counts[0] <= counts[1] || counts[1] <= counts[100] {
		t.Errorf("not skewed: counts[0]=%d counts[1]=%d counts[100]=%d", counts[0], counts[1], counts[100])
	}
	// With theta 0.99 over 1000 keys, key 0 draws about 13% of the picks.
	if share := float64(counts[0]) / 200000; share < 0.10 || share > 0.16 {
		t.Errorf("key 0 drew %.3f of the picks, want about 0.13", share)
	}
}

func TestPickDistinct(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []chooser{uniform(120), newZipfian(120, 0.99)} {
		for _, width := range []int{1, 10, 100, 120} {
			dst := make([]int32, width)
			pickDistinct(c, r, 120, dst)
			seen := map[int32]bool{}
			for _, k := range dst {
				if k < 0 || k >= 120 || seen[k] {
					t.Fatalf("%T width %d: keys %v are not distinct keys of [0,120)", c, width, dst)
				}
				seen[k] = true
			}
		}
	}
}
