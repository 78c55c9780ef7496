package sharding

// point is one point of a hash ring before sorting.
type point struct {
	value  uint32
	server int32
}

// continuum is a sorted hash ring shared by Ketama and Ring. It is stored as
// two parallel slices so the binary search touches only the values.
type continuum struct {
	values []uint32 // sorted ascending
	server []int32  // server index of values[i]
}

// newContinuum sorts pts by value, stably (equal values keep insertion
// order, as glibc's merge-sort qsort does for twemproxy and memcached), and
// packs them. It uses an LSD radix sort, 8 bits per pass, which is stable by
// construction and several times faster than a comparison sort on the
// 160,000 points of a 1,000-server ring. pts is used as scratch space.
func newContinuum(pts []point) continuum {
	src, dst := pts, make([]point, len(pts))
	for shift := 0; shift < 32; shift += 8 {
		var next [256]int // next free slot per digit
		for _, p := range src {
			next[byte(p.value>>shift)]++
		}
		sum := 0
		for d, n := range next {
			next[d] = sum
			sum += n
		}
		for _, p := range src {
			d := byte(p.value >> shift)
			dst[next[d]] = p
			next[d]++
		}
		src, dst = dst, src
	}
	c := continuum{values: make([]uint32, len(src)), server: make([]int32, len(src))}
	for i, p := range src {
		c.values[i], c.server[i] = p.value, p.server
	}
	return c
}

// pick returns the server of the first point >= hash, wrapping to the first
// point when hash is above every point (twemproxy's ketama_dispatch).
func (c *continuum) pick(hash uint32) int {
	lo, hi := 0, len(c.values)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.values[mid] < hash {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(c.values) {
		lo = 0
	}
	return int(c.server[lo])
}
