package main

import (
	"math"
	"math/rand/v2"
)

// chooser picks key indexes in [0, n). Implementations are read-only after
// construction and safe for concurrent use; each connection passes its own
// random source.
type chooser interface {
	next(r *rand.Rand) int
}

var (
	_ chooser = uniform(0)
	_ chooser = (*zipfian)(nil)
)

// uniform picks every key with the same probability.
type uniform int

func (u uniform) next(r *rand.Rand) int { return r.IntN(int(u)) }

// zipfian picks key i with probability proportional to 1/(i+1)^theta, so key
// 0 is the hottest. It is YCSB's generator (Gray et al., "Quickly generating
// billion-record synthetic databases"), which, unlike math/rand's Zipf,
// allows 0 < theta < 1 (YCSB's default is 0.99).
type zipfian struct {
	n                   int
	theta, alpha        float64
	zetan, eta, halfPow float64
}

// newZipfian returns a zipfian chooser over n >= 1 keys; 0 < theta < 1.
func newZipfian(n int, theta float64) *zipfian {
	z := &zipfian{n: n, theta: theta, alpha: 1 / (1 - theta), halfPow: 1 + math.Pow(0.5, theta)}
	z.zetan = zeta(n, theta)
	zeta2 := zeta(2, theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zetan)
	return z
}

// zeta returns sum(1/i^theta) for i in 1..n.
func zeta(n int, theta float64) float64 {
	sum := 0.0
	for i := 1; i <= n; i++ {
		sum += 1 / math.Pow(float64(i), theta)
	}
	return sum
}

func (z *zipfian) next(r *rand.Rand) int {
	if z.n < 2 {
		return 0
	}
	u := r.Float64()
	uz := u * z.zetan
	switch {
	case uz < 1:
		return 0
	case uz < z.halfPow:
		return 1
	}
	k := int(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(max(k, 0), z.n-1)
}

// pickDistinct fills dst with len(dst) distinct keys drawn from c (len(dst)
// <= n). A skewed distribution may draw the same hot keys again and again, so
// after a bounded number of draws the rest are filled with the next unused
// keys after the last draw.
func pickDistinct(c chooser, r *rand.Rand, n int, dst []int32) {
	filled := 0
	for tries := 0; filled < len(dst) && tries < 8*len(dst); tries++ {
		k := int32(c.next(r))
		if !containsKey(dst[:filled], k) {
			dst[filled] = k
			filled++
		}
	}
	k := int32(0)
	if filled > 0 {
		k = dst[filled-1]
	}
	for filled < len(dst) {
		k = (k + 1) % int32(n)
		if !containsKey(dst[:filled], k) {
			dst[filled] = k
			filled++
		}
	}
}

func containsKey(keys []int32, k int32) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
