package sharding

// point is one point of a hash ring before sorting.
type point struct {
	value  uint32
	server int32
}

// continuum is a sorted hash ring shared by Ketama and Ring. It is stored as
// two parallel slices so the search touches only the values.
//
// A random hash makes a binary search over the whole ring mispredict about
// every branch (60-90 ns on 10-100 servers). bucket narrows it first: the
// top bits of the hash index the range of values that share them, about
// one value per bucket, so pick searches a handful of values at most.
type continuum struct {
	values []uint32 // sorted ascending
	server []int32  // server index of values[i]
	// bucket[b] is the index of the first value whose top bits are >= b;
	// bucket[1<<bits] is len(values).
	bucket []int32
	shift  uint // 32 - bits
}

// maxBucketBits caps the index at 64 Ki buckets (256 KiB): a 1,000-server
// ring (160,000 points) then has about 2.4 values per bucket.
const maxBucketBits = 16

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
	c.index()
	return c
}

// index builds bucket with about as many buckets as values.
func (c *continuum) index() {
	bits := uint(1)
	for bits < maxBucketBits && 1<<bits < len(c.values) {
		bits++
	}
	c.shift = 32 - bits
	c.bucket = make([]int32, 1<<bits+1)
	i := 0
	for b := range c.bucket {
		for i < len(c.values) && uint64(c.values[i])>>c.shift < uint64(b) {
			i++
		}
		c.bucket[b] = int32(i)
	}
}

// pick returns the server of the first point >= hash, wrapping to the first
// point when hash is above every point (twemproxy's ketama_dispatch).
func (c *continuum) pick(hash uint32) int {
	// Every value below bucket[b] has smaller top bits than hash, and every
	// value from bucket[b+1] on has larger ones: the first value >= hash
	// is in [bucket[b], bucket[b+1]], the upper end when none before it is.
	b := hash >> c.shift
	lo, hi := int(c.bucket[b]), int(c.bucket[b+1])
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
