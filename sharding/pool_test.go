package sharding

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
)

func TestNewErrors(t *testing.T) {
	ok := []Server{{"a", 1}, {"b", 1}}
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"unknown hash", Config{Servers: ok, Hash: "sha1"}, ErrUnknownHash},
		{"unknown distribution", Config{Servers: ok, Distribution: "vnode"}, ErrUnknownDistribution},
		{"one byte tag", Config{Servers: ok, HashTag: "{"}, ErrBadHashTag},
		{"three byte tag", Config{Servers: ok, HashTag: "{}}"}, ErrBadHashTag},
		{"no servers", Config{}, ErrNoServers},
		{"zero weight", Config{Servers: []Server{{"a", 0}}}, ErrBadWeight},
		{"duplicate name", Config{Servers: []Server{{"a", 1}, {"b", 1}, {"a", 2}}}, ErrDuplicateName},
		{"bad ring mode", Config{Servers: ok, Distribution: "ring", Dist: DistOptions{RingMode: "x"}}, ErrBadRingMode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, tt.want) {
				t.Errorf("New: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	servers := tenServers()
	p, err := New(Config{Servers: servers})
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := New(Config{Servers: servers, Hash: "fnv1a_64", Distribution: "ketama"})
	for i := range 1000 {
		key := []byte("k" + strconv.Itoa(i))
		a, _ := p.Pick(key)
		b, _ := ref.Pick(key)
		if a != b {
			t.Fatalf("zero Config is not fnv1a_64 + ketama")
		}
	}
}

// TestServersOrder pins twemproxy's sort: name length first, then bytes.
func TestServersOrder(t *testing.T) {
	in := []Server{{"server10", 1}, {"server9", 1}, {"b", 1}, {"alpha", 1}, {"Zed", 1}, {"a", 1}}
	want := []string{"a", "b", "Zed", "alpha", "server9", "server10"}
	p, err := New(Config{Servers: in})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range p.Servers() {
		got = append(got, s.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Servers() = %v, want %v", got, want)
	}
	if in[0].Name != "server10" {
		t.Error("New modified the caller's slice")
	}
	kept, _ := New(Config{Servers: in, KeepOrder: true})
	if kept.Servers()[0].Name != "server10" {
		t.Error("KeepOrder did not keep the order")
	}
}

func TestHashTag(t *testing.T) {
	tests := []struct {
		tag, key, want string
	}{
		{"{}", "user:{1000}:name", "1000"},
		{"{}", "{a}", "a"},
		{"{}", "abc{}def", "abc{}def"}, // empty tag: whole key
		{"{}", "{}", "{}"},
		{"{}", "abc{def", "abc{def"}, // no closing byte
		{"{}", "abc}def", "abc}def"},
		{"{}", "}{x}", "x"},          // closing byte searched after the opening one
		{"{}", "a{b{c}d", "b{c"},     // first opening, first closing after it
		{"{}", "a{}b}c", "a{}b}c"},   // first closing right after: empty
		{"{}", "plain", "plain"},     // no tag
		{"$$", "a$b$c", "b"},         // same byte twice
		{"$$", "a$$b", "a$$b"},       // empty
		{"$$", "$a", "$a"},           // unmatched
		{"$$", "x$abc$def$g", "abc"}, // first pair
		{"", "a{b}c", "a{b}c"},       // no tag configured
	}
	for _, tt := range tests {
		t.Run(tt.tag+" "+tt.key, func(t *testing.T) {
			p, err := New(Config{Servers: tenServers(), HashTag: tt.tag})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(p.hashKey([]byte(tt.key))); got != tt.want {
				t.Errorf("hashed part = %q, want %q", got, tt.want)
			}
			a, _ := p.Pick([]byte(tt.key))
			plain, _ := New(Config{Servers: tenServers()})
			b, _ := plain.Pick([]byte(tt.want))
			if a != b {
				t.Errorf("Pick(%q) = %d, Pick(%q) without tag = %d", tt.key, a, tt.want, b)
			}
		})
	}
}

func TestEmptyKeyAndSingleServer(t *testing.T) {
	for _, kind := range []string{"ketama", "modula", "jump", "ring"} {
		p, err := New(Config{Servers: tenServers(), Distribution: kind, Hash: "md5"})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := p.Pick(nil)
		if want := p.snap.Load().dist.Pick(0); got != want {
			t.Errorf("%s: Pick(empty) = %d, want hash 0 -> %d", kind, got, want)
		}
		// A tag whose content is empty falls back to the whole key, which
		// is not empty.
		p1, _ := New(Config{Servers: tenServers()[:1], Distribution: kind, AutoEject: true})
		if got, err := p1.Pick([]byte("anything")); got != 0 || err != nil {
			t.Errorf("%s single server: Pick = %d, %v", kind, got, err)
		}
		p1.Eject(0)
		if _, err := p1.Pick([]byte("anything")); !errors.Is(err, ErrNoServers) {
			t.Errorf("%s single ejected server: err = %v", kind, err)
		}
	}
}

// TestXXH3Pool checks that Config.Seed reaches XXH3 and that jump consumes
// the full 64-bit hash, as memcached's proxy does.
func TestXXH3Pool(t *testing.T) {
	servers := tenServers()
	p, err := New(Config{Servers: servers, Hash: "xxh3", Distribution: "jump", Seed: 77, KeepOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := New(Config{Servers: servers, Hash: "xxh3", Distribution: "ring", Seed: 77, KeepOrder: true})
	ring, _ := NewRing(servers, DistOptions{})
	for i := range 1000 {
		key := []byte("key:" + strconv.Itoa(i))
		got, _ := p.Pick(key)
		if want := Jump(XXH3(key, 77), len(servers)); got != want {
			t.Fatalf("jump Pick(%q) = %d, want %d", key, got, want)
		}
		got, _ = r.Pick(key)
		if want := ring.Pick(uint32(XXH3(key, 77))); got != want {
			t.Fatalf("ring Pick(%q) = %d, want %d", key, got, want)
		}
	}
}

// placements returns each key's server name.
func placements(t *testing.T, p *Pool, keys [][]byte) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		idx, err := p.Pick(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p.Servers()[idx].Name
	}
	return out
}

func testKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%d:%x", i, i*7919))
	}
	return keys
}

// TestAutoEject ejects one server, then two, and checks that placement is
// exactly that of a pool built over the live servers (what nutcracker's
// rebuild computes), reports how many keys of live servers moved, and that
// restoring gives back the original placement.
func TestAutoEject(t *testing.T) {
	keys := testKeys(100_000)
	servers := []Server{{"s1", 1}, {"s2", 1}, {"s3", 2}, {"s4", 1}, {"s5", 3}, {"s6", 1}, {"s7", 1}, {"s8", 1}}
	for _, kind := range []string{"ketama", "modula", "jump", "ring"} {
		t.Run(kind, func(t *testing.T) {
			p, err := New(Config{Servers: servers, Distribution: kind, AutoEject: true, Dist: DistOptions{RingMode: "ketama"}})
			if err != nil {
				t.Fatal(err)
			}
			orig := placements(t, p, keys)
			var ejected []string
			for _, i := range []int{2, 5} {
				ejected = append(ejected, p.Servers()[i].Name)
				p.Eject(i)
				var live []Server
				for j, s := range p.Servers() {
					if p.Live()[j] {
						live = append(live, s)
					}
				}
				ref, _ := New(Config{Servers: live, Distribution: kind, Dist: DistOptions{RingMode: "ketama"}})
				got, want := placements(t, p, keys), placements(t, ref, keys)
				moved, stayed := 0, 0
				for k := range keys {
					if got[k] != want[k] {
						t.Fatalf("key %q on %s, a pool of the live servers says %s", keys[k], got[k], want[k])
					}
					if slices.Contains(ejected, got[k]) {
						t.Fatalf("key %q on ejected %s", keys[k], got[k])
					}
					if !slices.Contains(ejected, orig[k]) {
						if got[k] != orig[k] {
							moved++
						} else {
							stayed++
						}
					}
				}
				frac := float64(moved) / float64(moved+stayed)
				t.Logf("ejected %v: %d of %d keys of live servers moved (%.2f%%)", ejected, moved, moved+stayed, 100*frac)
				if kind == "ketama" && frac > 0.05 {
					t.Errorf("ketama moved %.2f%% of the keys of live servers", 100*frac)
				}
			}
			p.Restore(2)
			p.Restore(5)
			if got := placements(t, p, keys); !slices.Equal(got, orig) {
				t.Error("restoring every server did not give back the original placement")
			}
		})
	}
}

// TestSetLive applies sets of ejections in one call and checks each
// placement against a pool that reached the same set by Eject and Restore.
func TestSetLive(t *testing.T) {
	keys := testKeys(20_000)
	for _, kind := range []string{"ketama", "modula", "jump", "ring"} {
		t.Run(kind, func(t *testing.T) {
			cfg := Config{Servers: tenServers(), Distribution: kind, AutoEject: true, Dist: DistOptions{RingMode: "ketama"}}
			p, _ := New(cfg)
			orig := placements(t, p, keys)
			for _, ejected := range [][]int{{3}, {1, 3, 8}, {8}, {}} {
				live := slices.Repeat([]bool{true}, 10)
				ref, _ := New(cfg)
				for _, i := range ejected {
					live[i] = false
					ref.Eject(i)
				}
				p.SetLive(live)
				if !slices.Equal(p.Live(), live) {
					t.Fatalf("SetLive(%v): Live() = %v", live, p.Live())
				}
				if got, want := placements(t, p, keys), placements(t, ref, keys); !slices.Equal(got, want) {
					t.Fatalf("ejected %v: placement differs from Eject's", ejected)
				}
			}
			if got := placements(t, p, keys); !slices.Equal(got, orig) {
				t.Error("every server live again did not give back the original placement")
			}
			snap := p.snap.Load()
			p.SetLive(slices.Clone(p.Live()))
			if p.snap.Load() != snap {
				t.Error("SetLive of the current set rebuilt the distribution")
			}
		})
	}
}

func TestAutoEjectRandom(t *testing.T) {
	p, err := New(Config{Servers: tenServers(), Distribution: "random", AutoEject: true, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := New(Config{Servers: tenServers(), Distribution: "random", AutoEject: true, Seed: 42})
	p.Eject(3)
	p.Eject(7)
	q.Eject(3)
	q.Eject(7)
	counts := make([]int, 10)
	for range 80_000 {
		i, _ := p.Pick([]byte("same key"))
		j, _ := q.Pick([]byte("other key"))
		if i != j {
			t.Fatal("seeded random pools diverged")
		}
		counts[i]++
	}
	for i, n := range counts {
		switch {
		case i == 3 || i == 7:
			if n != 0 {
				t.Errorf("ejected server %d got %d keys", i, n)
			}
		case n < 9000 || n > 11000:
			t.Errorf("server %d got %d of 80000, want about 10000", i, n)
		}
	}
	t.Logf("random over 8 live servers: %v", counts)
}

func TestEjectWithoutAutoEject(t *testing.T) {
	keys := testKeys(10_000)
	for _, kind := range []string{"ketama", "modula", "jump", "ring"} {
		p, _ := New(Config{Servers: tenServers(), Distribution: kind})
		orig := placements(t, p, keys)
		p.Eject(1)
		p.Eject(4)
		if got := placements(t, p, keys); !slices.Equal(got, orig) {
			t.Errorf("%s: placement changed without AutoEject", kind)
		}
		if p.Live()[1] || p.Live()[4] || !p.Live()[0] || p.NumLive() != 8 {
			t.Errorf("%s: Live() = %v", kind, p.Live())
		}
	}
}

func TestEjectAll(t *testing.T) {
	p, _ := New(Config{Servers: tenServers(), AutoEject: true})
	for i := range 10 {
		p.Eject(i)
	}
	p.Eject(3)   // again: no-op
	p.Eject(-1)  // out of range: no-op
	p.Eject(100) // out of range: no-op
	if _, err := p.Pick([]byte("k")); !errors.Is(err, ErrNoServers) {
		t.Fatalf("all ejected: err = %v", err)
	}
	if p.NumLive() != 0 {
		t.Errorf("NumLive = %d", p.NumLive())
	}
	p.Restore(6)
	for i := range 100 {
		if got, err := p.Pick([]byte(strconv.Itoa(i))); got != 6 || err != nil {
			t.Fatalf("one live server: Pick = %d, %v", got, err)
		}
	}
}

// TestPickConcurrent runs Pick from several goroutines while servers are
// ejected and restored (meaningful under -race).
func TestPickConcurrent(t *testing.T) {
	p, _ := New(Config{Servers: tenServers(), AutoEject: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			key := []byte("key-" + strconv.Itoa(g))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i, err := p.Pick(key)
				if err == nil && !p.Live()[i] && p.NumLive() == 10 {
					t.Error("picked an ejected server")
				}
			}
		})
	}
	for i := range 2000 {
		p.Eject(i % 10)
		p.Restore((i + 5) % 10)
	}
	close(stop)
	wg.Wait()
}

func TestPickNoAllocs(t *testing.T) {
	key := []byte("user:{12345}:profile")
	for _, kind := range DistributionNames() {
		for _, hash := range HashNames() {
			p, err := New(Config{Servers: tenServers(), Distribution: kind, Hash: hash, HashTag: "{}", AutoEject: true, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			p.Eject(2)
			if a := testing.AllocsPerRun(200, func() { p.Pick(key) }); a != 0 {
				t.Errorf("%s/%s: Pick allocates %.1f times", kind, hash, a)
			}
		}
	}
}
