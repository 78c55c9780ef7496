package store

import (
	"testing"

	"shardproxy/internal/mcdiff"
	"shardproxy/internal/testserver"
)

// storeTarget sends requests to a Store's Do.
func storeTarget(s *Store) mcdiff.Target {
	return mcdiff.TargetFunc(func(wire []byte) ([]byte, error) { return s.Do(nil, wire), nil })
}

// TestDifferential sends the same random sequences to the store and to a
// real memcached and compares every reply after normalising.
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts memcached")
	}
	n := 5000
	for _, seed := range diffSeeds {
		// A fresh server per seed: flush_all spares items stored in its
		// own second. Without the LRU maintainer no background thread
		// holds a reference to an item (segmented LRU bumps hot items
		// asynchronously), and incr/decr then always rewrite a number in
		// place when it fits, as the store does; with it, whether they do
		// depends on that thread's timing.
		mc := testserver.StartMemcached(t, "-m", "1024", "-o", "no_lru_maintainer,no_lru_crawler")
		conn, err := mcdiff.Dial(mc.Addr)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Config{MaxBytes: 1 << 30})
		g := mcdiff.NewGen(seed, mcdiff.Options{})
		if err := mcdiff.Compare(g, n, mcdiff.NewSession(storeTarget(s)), mcdiff.NewSession(conn)); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
		s.Close()
		conn.Close()
		mc.Stop()
	}
}

var diffSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}
