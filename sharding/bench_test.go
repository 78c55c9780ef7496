package sharding

import (
	"fmt"
	"testing"
)

// benchKey is a typical 20-byte cache key.
var benchKey = []byte("user:1234567:profile")

func BenchmarkHash(b *testing.B) {
	for _, name := range HashNames() {
		h, _ := LookupHash(name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(benchKey)))
			for b.Loop() {
				h(benchKey)
			}
		})
	}
}

func BenchmarkXXH3(b *testing.B) {
	for _, n := range []int{8, 20, 100, 200, 250} {
		key := xxh3SanityBuffer(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				XXH3(key, 42)
			}
		})
	}
}

func benchServers(n int) []Server {
	s := make([]Server, n)
	for i := range s {
		s[i] = Server{Name: fmt.Sprintf("10.0.%d.%d:11211", i/250, i%250+1), Weight: 1 + i%3}
	}
	return s
}

// BenchmarkDistributionPick measures Pick alone over 10 and 100 servers.
func BenchmarkDistributionPick(b *testing.B) {
	for _, kind := range DistributionNames() {
		for _, n := range []int{10, 100} {
			d, err := NewDistribution(kind, benchServers(n), DistOptions{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				h := uint32(0x9e3779b9)
				for b.Loop() {
					d.Pick(h)
					h = h*1664525 + 1013904223
				}
			})
		}
	}
}

// BenchmarkPoolPick measures the whole Pick path (hash tag, hash,
// distribution) with each distribution's usual hash.
func BenchmarkPoolPick(b *testing.B) {
	for _, tt := range []struct{ dist, hash string }{
		{"ketama", "fnv1a_64"}, {"ketama", "md5"}, {"modula", "fnv1a_64"},
		{"random", "fnv1a_64"}, {"jump", "xxh3"}, {"ring", "md5"},
	} {
		p, err := New(Config{Servers: benchServers(10), Distribution: tt.dist, Hash: tt.hash, HashTag: "{}", Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tt.dist+"/"+tt.hash, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Pick(benchKey)
			}
		})
		b.Run(tt.dist+"/"+tt.hash+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p.Pick(benchKey)
				}
			})
		})
	}
}

// BenchmarkKetamaRebuild1000 is the cost of an ejection in a 1,000-server
// ketama pool: 160,000 md5 points built and sorted.
func BenchmarkKetamaRebuild1000(b *testing.B) {
	servers := benchServers(1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewKetama(servers); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEjectRestore1000 measures Eject plus Restore on a 1,000-server
// auto-ejecting ketama pool (two rebuilds).
func BenchmarkEjectRestore1000(b *testing.B) {
	p, err := New(Config{Servers: benchServers(1000), AutoEject: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Eject(500)
		p.Restore(500)
	}
}
