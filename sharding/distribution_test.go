package sharding

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func tenServers() []Server {
	s := make([]Server, 10)
	for i := range s {
		s[i] = Server{Name: fmt.Sprintf("10.0.0.%d:11211", i+1), Weight: 1}
	}
	return s
}

func TestDistributionNames(t *testing.T) {
	want := []string{"ketama", "modula", "random", "jump", "ring"}
	if got := DistributionNames(); !slices.Equal(got, want) {
		t.Fatalf("DistributionNames() = %v, want %v", got, want)
	}
	for _, kind := range want {
		if _, err := NewDistribution(kind, tenServers(), DistOptions{Seed: 1}); err != nil {
			t.Errorf("NewDistribution(%q): %v", kind, err)
		}
	}
}

func TestNewDistributionErrors(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		servers []Server
		opts    DistOptions
		want    error
	}{
		{"unknown kind", "consistent", tenServers(), DistOptions{}, ErrUnknownDistribution},
		{"no servers", "ketama", nil, DistOptions{}, ErrNoServers},
		{"zero weight", "modula", []Server{{"a", 1}, {"b", 0}}, DistOptions{}, ErrBadWeight},
		{"negative weight", "ketama", []Server{{"a", -1}}, DistOptions{}, ErrBadWeight},
		{"bad ring mode", "ring", tenServers(), DistOptions{RingMode: "libketama"}, ErrBadRingMode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDistribution(tt.kind, tt.servers, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestKetamaPoints pins twemproxy's float32 point counts.
func TestKetamaPoints(t *testing.T) {
	tests := []struct {
		weights []uint32
		want    []uint32
	}{
		{[]uint32{1}, []uint32{160}},
		{[]uint32{1, 1, 1}, []uint32{160, 160, 160}},
		{[]uint32{1, 1, 1, 1, 1, 1, 1}, []uint32{160, 160, 160, 160, 160, 160, 160}},
		{[]uint32{1, 2}, []uint32{104, 212}},
		{[]uint32{1, 2, 3, 5, 8, 13, 21}, []uint32{20, 40, 60, 104, 168, 272, 440}},
		{[]uint32{1, 1000}, []uint32{0, 316}},
		// float32 edge: exactly 1/25*40*5 = 8 groups, but float32 gives
		// 7.9999995 and twemproxy floors it to 7; weight 12 likewise gets 95
		// groups, not 96 (the placement test's
		// "unix" layout checks this against nutcracker).
		{[]uint32{1, 1, 1, 10, 12}, []uint32{28, 28, 28, 320, 380}},
	}
	for _, tt := range tests {
		var total uint32
		for _, w := range tt.weights {
			total += w
		}
		var got []uint32
		for _, w := range tt.weights {
			got = append(got, ketamaPoints(w, total, len(tt.weights)))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("weights %v: points %v, want %v", tt.weights, got, tt.want)
		}
	}
}

func TestKetamaContinuum(t *testing.T) {
	k, err := NewKetama(tenServers())
	if err != nil {
		t.Fatal(err)
	}
	if k.Len() != 1600 {
		t.Errorf("%d points, want 1600", k.Len())
	}
	if !slices.IsSorted(k.ring.values) {
		t.Error("continuum not sorted")
	}
	// Below the first point, above the last point and exactly on a point.
	first, last := k.ring.values[0], k.ring.values[len(k.ring.values)-1]
	if got, want := k.Pick(0), int(k.ring.server[0]); got != want {
		t.Errorf("Pick(0) = %d, want first point's server %d", got, want)
	}
	if last < math.MaxUint32 {
		if got, want := k.Pick(last+1), int(k.ring.server[0]); got != want {
			t.Errorf("Pick(after last) = %d, want wrap to %d", got, want)
		}
	}
	if got, want := k.Pick(first), int(k.ring.server[0]); got != want {
		t.Errorf("Pick(first point) = %d, want %d", got, want)
	}
	mid := len(k.ring.values) / 2
	if got, want := k.Pick(k.ring.values[mid]), int(k.ring.server[mid]); got != want {
		t.Errorf("Pick(point %d) = %d, want %d", mid, got, want)
	}
}

func TestModula(t *testing.T) {
	m, err := NewModula([]Server{{"a", 1}, {"b", 2}, {"c", 3}})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 1, 2, 2, 2}
	for h := range uint32(12) {
		if got := m.Pick(h); got != want[h%6] {
			t.Errorf("Pick(%d) = %d, want %d", h, got, want[h%6])
		}
	}
}

// TestModulaLargeWeights: past maxSlotTable slots modula searches where
// each server's slots end instead of keeping a slot table; both place
// every hash on the same server, and large weights cost no table.
func TestModulaLargeWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		var servers []Server
		for i := range 1 + rng.IntN(12) {
			servers = append(servers, Server{fmt.Sprint("s", i), 1 + rng.IntN(50)})
		}
		table, _ := newModula(servers, maxSlotTable)
		search, _ := newModula(servers, 0)
		if table.slots == nil || search.slots != nil {
			t.Fatal("newModula did not build the variant asked for")
		}
		for range 1000 {
			h := rng.Uint32()
			if a, b := table.Pick(h), search.Pick(h); a != b {
				t.Fatalf("%v: hash %d on server %d by the table, %d by the search", servers, h, a, b)
			}
		}
	}
	m, err := NewModula([]Server{{"a", 1 << 30}, {"b", 3}, {"c", 1 << 29}})
	if err != nil {
		t.Fatal(err)
	}
	if m.slots != nil {
		t.Fatalf("a slot table of %d entries", len(m.slots))
	}
	for _, tt := range []struct {
		hash uint32
		want int
	}{{0, 0}, {1<<30 - 1, 0}, {1 << 30, 1}, {1<<30 + 2, 1}, {1<<30 + 3, 2}, {1<<30 + 1<<29 + 2, 2}, {1<<30 + 1<<29 + 3, 0}} {
		if got := m.Pick(tt.hash); got != tt.want {
			t.Errorf("Pick(%d) = %d, want %d", tt.hash, got, tt.want)
		}
	}
}

// TestTotalWeightLimit: weights that add up past 32 bits are refused by
// every distribution, not wrapped.
func TestTotalWeightLimit(t *testing.T) {
	servers := []Server{{"a", math.MaxInt32}, {"b", math.MaxInt32}, {"c", 2}}
	for _, kind := range DistributionNames() {
		if _, err := NewDistribution(kind, servers, DistOptions{}); !errors.Is(err, ErrBadWeight) {
			t.Errorf("%s over weights adding up to 2^32: %v, want ErrBadWeight", kind, err)
		}
	}
	servers[2].Weight = 1 // exactly MaxTotalWeight
	if _, err := NewDistribution("ketama", servers, DistOptions{}); err != nil {
		t.Errorf("weights adding up to MaxTotalWeight: %v", err)
	}
}

func TestRandomSeeded(t *testing.T) {
	a, _ := NewRandom(tenServers(), DistOptions{Seed: 99})
	b, _ := NewRandom(tenServers(), DistOptions{Seed: 99})
	src := rand.NewPCG(1, 2)
	c, _ := NewRandom(tenServers(), DistOptions{Rand: src})
	ref := rand.NewPCG(1, 2)
	counts := make([]int, 10)
	for range 10000 {
		x, y := a.Pick(0), b.Pick(12345)
		if x != y {
			t.Fatal("same seed, different sequence")
		}
		counts[x]++
		if got, want := c.Pick(0), int(ref.Uint64()%10); got != want {
			t.Fatalf("injected source: Pick = %d, want %d", got, want)
		}
	}
	for i, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("server %d got %d of 10000", i, n)
		}
	}
}

// TestRing pins the ring modes' point labels and counts.
func TestRing(t *testing.T) {
	servers := []Server{{"10.0.0.1:11211", 1}, {"10.0.0.2:11212", 1}}
	labels := map[string][2]string{
		"default":   {"10.0.0.1:11211-0", "10.0.0.2:11212-0"},
		"ketama":    {"10.0.0.1:11211-0", "10.0.0.2:11212-0"},
		"twemproxy": {"10.0.0.1-0", "10.0.0.2:11212-0"},
		"evcache":   {"10.0.0.1/10.0.0.1:11211-0", "10.0.0.2/10.0.0.2:11212-0"},
	}
	for mode, want := range labels {
		t.Run(mode, func(t *testing.T) {
			for i, s := range servers {
				host, port := s.Name[:8], s.Name[9:]
				if got := string(ringModes[mode](nil, host, port, 0)); got != want[i] {
					t.Errorf("label = %q, want %q", got, want[i])
				}
			}
			r, err := NewRing(servers, DistOptions{RingMode: mode})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(r.ring.values); n != 320 {
				t.Errorf("%d points, want 320", n)
			}
		})
	}
	r, _ := NewRing(servers, DistOptions{RingMode: "ketama", RingPoints: 42})
	if n := len(r.ring.values); n != 80 {
		t.Errorf("RingPoints 42: %d points, want 2*40", n)
	}
}

// TestRingTwemproxyModeEqualsKetama checks memcached's "twemproxy" ring mode
// against twemproxy's ketama for equal weights and unnamed servers.
func TestRingTwemproxyModeEqualsKetama(t *testing.T) {
	mc := []Server{{"127.0.0.1:11211", 1}, {"127.0.0.2:11211", 1}, {"127.0.0.3:22122", 1}}
	tw := []Server{{"127.0.0.1", 1}, {"127.0.0.2", 1}, {"127.0.0.3:22122", 1}}
	r, _ := NewRing(mc, DistOptions{RingMode: "twemproxy"})
	k, _ := NewKetama(tw)
	if !slices.Equal(r.ring.values, k.ring.values) || !slices.Equal(r.ring.server, k.ring.server) {
		t.Fatal("ring twemproxy mode differs from ketama")
	}
}

// TestUniformity hashes 1M keys and reports each server's share. modula and
// jump must be within 5% of the fair share (with a well-mixing hash: FNV's
// low bits make modula/fnv1a_64 over "user:N" keys about 6% off). A 160-point ring cannot promise
// that: each server's arc is a sum of 160 random gaps, about 8% standard
// deviation. For ketama and ring the keys must match the ring's own arc
// shares within 5%, and the fair share within 25%.
func TestUniformity(t *testing.T) {
	if testing.Short() {
		t.Skip("1M keys; skipped with -short")
	}
	const nkeys = 1_000_000
	tests := []struct {
		dist, hash string
		opts       DistOptions
		fairTol    float64
	}{
		{"ketama", "fnv1a_64", DistOptions{}, 0.25},
		{"ketama", "md5", DistOptions{}, 0.25},
		{"modula", "md5", DistOptions{}, 0.05},
		{"modula", "murmur", DistOptions{}, 0.05},
		{"jump", "xxh3", DistOptions{}, 0.05},
		{"ring", "md5", DistOptions{RingMode: "ketama"}, 0.25},
		{"ring", "xxh3", DistOptions{RingMode: "default"}, 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.dist+"/"+tt.hash, func(t *testing.T) {
			servers := tenServers()
			p, err := New(Config{Servers: servers, Hash: tt.hash, Distribution: tt.dist, Dist: tt.opts, KeepOrder: true})
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, len(servers))
			key := make([]byte, 0, 32)
			for i := range nkeys {
				key = strconv.AppendInt(append(key[:0], "user:"...), int64(i), 10)
				idx, _ := p.Pick(key)
				counts[idx]++
			}
			arcs := arcShares(p.snap.Load().dist, len(servers))
			fair := float64(nkeys) / float64(len(servers))
			var worstFair, worstArc float64
			for i, n := range counts {
				devFair := float64(n)/fair - 1
				worstFair = max(worstFair, math.Abs(devFair))
				line := fmt.Sprintf("server %d: %6d keys, %+6.2f%% vs fair", i, n, 100*devFair)
				if arcs != nil {
					devArc := float64(n)/(arcs[i]*nkeys) - 1
					worstArc = max(worstArc, math.Abs(devArc))
					line += fmt.Sprintf(", arc %.4f, %+5.2f%% vs arc", arcs[i], 100*devArc)
				}
				t.Log(line)
			}
			t.Logf("worst: %.2f%% vs fair, %.2f%% vs arc", 100*worstFair, 100*worstArc)
			if worstFair > tt.fairTol {
				t.Errorf("worst deviation from fair share %.2f%% > %.0f%%", 100*worstFair, 100*tt.fairTol)
			}
			if worstArc > 0.05 {
				t.Errorf("worst deviation from arc share %.2f%% > 5%%", 100*worstArc)
			}
		})
	}
}

// arcShares returns the fraction of the 32-bit hash space each server owns
// on a ring distribution, or nil for the others.
func arcShares(d Distribution, n int) []float64 {
	var c *continuum
	switch d := d.(type) {
	case *Ketama:
		c = &d.ring
	case *Ring:
		c = &d.ring
	default:
		return nil
	}
	shares := make([]float64, n)
	prev := uint64(0)
	for i, v := range c.values {
		shares[c.server[i]] += float64(uint64(v) - prev)
		prev = uint64(v)
	}
	shares[c.server[0]] += float64(1<<32 - prev) // wrap-around arc
	for i := range shares {
		shares[i] /= 1 << 32
	}
	return shares
}

// TestContinuumStable checks the radix sort: ascending values, and equal
// values in insertion order.
func TestContinuumStable(t *testing.T) {
	gen := lcg(9)
	pts := make([]point, 5000)
	for i := range pts {
		pts[i] = point{value: uint32(gen.next()) & 0xff00ff0f, server: int32(i)}
	}
	want := slices.Clone(pts)
	slices.SortStableFunc(want, func(a, b point) int {
		return cmp.Compare(a.value, b.value)
	})
	c := newContinuum(pts)
	for i, p := range want {
		if c.values[i] != p.value || c.server[i] != p.server {
			t.Fatalf("entry %d = (%#x, %d), want (%#x, %d)", i, c.values[i], c.server[i], p.value, p.server)
		}
	}
}

// TestContinuumPickMatchesSearch checks the bucket index against a binary
// search over the whole ring, on rings of 1 to 200,000 points (so with 1 to
// 16 index bits), with duplicate values and values clustered in one bucket,
// at random hashes and at every value, its neighbours, 0 and the maximum.
func TestContinuumPickMatchesSearch(t *testing.T) {
	want := func(c *continuum, hash uint32) int {
		i, _ := slices.BinarySearch(c.values, hash) // first value >= hash
		if i == len(c.values) {
			i = 0
		}
		return int(c.server[i])
	}
	gen := lcg(11)
	for _, n := range []int{1, 2, 3, 7, 160, 640, 1000, 4097, 200000} {
		for _, mask := range []uint32{0xffffffff, 0xff00ff0f, 0x0000ffff, 0xfff00000} {
			pts := make([]point, n)
			for i := range pts {
				pts[i] = point{value: uint32(gen.next()) & mask, server: int32(i)}
			}
			c := newContinuum(pts)
			hashes := []uint32{0, 1, 1<<32 - 1, 1<<32 - 2}
			for _, v := range c.values {
				hashes = append(hashes, v-1, v, v+1)
			}
			for range 2000 {
				hashes = append(hashes, uint32(gen.next()))
			}
			for _, h := range hashes {
				if got, w := c.pick(h), want(&c, h); got != w {
					t.Fatalf("n=%d mask=%#x: pick(%#x) = %d, want %d", n, mask, h, got, w)
				}
			}
		}
	}
}
