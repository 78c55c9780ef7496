package sharding

import (
	"testing"
)

// FuzzPick feeds arbitrary keys to every distribution with a hash tag: Pick
// must not panic, must return a live server index and must be deterministic
// (random excepted), and the tag rule must agree with a plain pool hashing
// the extracted part.
func FuzzPick(f *testing.F) {
	for _, s := range []string{"", "a", "{", "}", "{}", "a{b}c", "{{}}", "$$", "\x80\xff{\x00}", "user:{1000}:x"} {
		f.Add([]byte(s))
	}
	var pools []*Pool
	for _, kind := range DistributionNames() {
		p, err := New(Config{Servers: tenServers(), Distribution: kind, HashTag: "{}", AutoEject: true, Seed: 3})
		if err != nil {
			f.Fatal(err)
		}
		p.Eject(4)
		pools = append(pools, p)
	}
	plain, _ := New(Config{Servers: tenServers(), AutoEject: true})
	plain.Eject(4)
	f.Fuzz(func(t *testing.T, key []byte) {
		for _, p := range pools {
			i, err := p.Pick(key)
			if err != nil {
				t.Fatal(err)
			}
			if i < 0 || i >= len(p.Servers()) || !p.Live()[i] {
				t.Fatalf("%s: Pick(%q) = %d", p.kind, key, i)
			}
			if p.kind == "random" {
				continue
			}
			if j, _ := p.Pick(key); j != i {
				t.Fatalf("%s: Pick(%q) not deterministic: %d then %d", p.kind, key, i, j)
			}
		}
		a, _ := pools[0].Pick(key) // ketama with tag
		b, _ := plain.Pick(pools[0].hashKey(key))
		if a != b {
			t.Fatalf("tagged Pick(%q) = %d, plain Pick(%q) = %d", key, a, pools[0].hashKey(key), b)
		}
	})
}
