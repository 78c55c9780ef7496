package store

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func do(s *Store, req string) string { return string(s.Do(nil, []byte(req))) }

func TestExpiryFakeClock(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s := New(Config{Now: clk.now, SweepInterval: -1})
	defer s.Close()
	do(s, "set a 0 2 1\r\nx\r\n")
	do(s, "set b 0 0 1\r\nx\r\n")
	abs := strconv.FormatInt(clk.t.Unix()+5, 10)
	do(s, "set c 0 "+abs+" 1\r\nx\r\n") // more than 30 days: an absolute time
	clk.t = clk.t.Add(1 * time.Second)
	if got := do(s, "mg a t v\r\n"); got != "VA 1 t1\r\nx\r\n" {
		t.Fatalf("after 1s: %q", got)
	}
	clk.t = clk.t.Add(1 * time.Second) // at its expiry second: gone
	if got := do(s, "get a b\r\n"); got != "VALUE b 0 1\r\nx\r\nEND\r\n" {
		t.Fatalf("after 2s: %q", got)
	}
	if got := do(s, "mg c t\r\n"); got != "HD t3\r\n" {
		t.Fatalf("absolute: %q", got)
	}
	clk.t = clk.t.Add(3 * time.Second)
	if got := do(s, "mg c\r\n"); got != "EN\r\n" {
		t.Fatalf("absolute after expiry: %q", got)
	}
	if st := s.Stats(); st.Expirations != 2 || st.Items != 1 {
		t.Fatalf("stats %+v, want 2 expirations and 1 item", st)
	}
}

// TestExpiryRealClock waits for a real second to pass, and for the
// background sweep to remove an item nobody reads.
func TestExpiryRealClock(t *testing.T) {
	s := New(Config{SweepInterval: 50 * time.Millisecond})
	defer s.Close()
	do(s, "set a 0 1 1\r\nx\r\n")
	for i := range 100 {
		do(s, fmt.Sprintf("set s%d 0 1 1\r\nx\r\n", i))
	}
	do(s, "set b 0 100 1\r\nx\r\n")
	if got := do(s, "get a\r\n"); got != "VALUE a 0 1\r\nx\r\nEND\r\n" {
		t.Fatalf("before expiry: %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Items > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("sweep left %d items after 5s, want 1", s.Stats().Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := do(s, "get a b\r\n"); got != "VALUE b 0 1\r\nx\r\nEND\r\n" {
		t.Fatalf("after expiry: %q", got)
	}
}

func TestEvictionAtLimit(t *testing.T) {
	const limit = 1 << 20
	s := New(Config{MaxBytes: limit, Shards: 1, SweepInterval: -1})
	defer s.Close()
	v := make([]byte, 1000)
	for i := range 5000 {
		if _, err := s.Set("key"+strconv.Itoa(i), v, 0, 0); err != nil {
			t.Fatal(err)
		}
		if i == 10 { // keep key0 in use: LRU keeps it
			s.Get("key0")
		}
		if i%100 == 0 {
			s.Get("key0")
		}
		if st := s.Stats(); st.Bytes > limit {
			t.Fatalf("after %d sets: %d bytes, limit %d", i, st.Bytes, limit)
		}
	}
	st := s.Stats()
	per := int64(len("key1234") + len(v) + ItemOverhead)
	if st.Evictions == 0 || st.Items < limit/per-5 {
		t.Fatalf("stats %+v: want evictions and about %d items", st, limit/per)
	}
	if _, _, _, ok := s.Get("key0"); !ok {
		t.Error("the recently used key0 was evicted")
	}
	if _, _, _, ok := s.Get("key1"); ok {
		t.Error("the least recently used key1 survived")
	}
}

func TestItemLargerThanShard(t *testing.T) {
	s := New(Config{MaxBytes: 64 << 10, Shards: 1, SweepInterval: -1})
	defer s.Close()
	do(s, "set a 0 0 1\r\nx\r\n")
	big := make([]byte, 100<<10)
	got := do(s, "set a 0 0 "+strconv.Itoa(len(big))+"\r\n"+string(big)+"\r\n")
	if got != "SERVER_ERROR out of memory storing object\r\n" {
		t.Fatalf("got %q", got)
	}
	if got := do(s, "get a\r\n"); got != "END\r\n" {
		t.Fatalf("old item after a refused set: %q", got)
	}
}

func TestDirectCalls(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	cas, err := s.Set("a", []byte("hello"), 7, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v, f, c, ok := s.Get("a")
	if !ok || string(v) != "hello" || f != 7 || c != cas {
		t.Fatalf("Get = %q %d %d %v", v, f, c, ok)
	}
	if got := do(s, "mg a t f v\r\n"); got != "VA 5 t60 f7\r\nhello\r\n" {
		t.Fatalf("mg after Set: %q", got)
	}
	do(s, "set a 0 0 3\r\nbye\r\n")
	if string(v) != "hello" {
		t.Fatalf("a value from Get changed after a write: %q", v)
	}
	if !s.Touch("a", -time.Second) || s.Delete("a") {
		t.Fatal("Touch to the past must expire a")
	}
	if _, err := s.Set("b", make([]byte, 2<<20), 0, 0); err != ErrTooLarge {
		t.Fatalf("2 MiB Set: %v", err)
	}
	if _, err := s.Set("", nil, 0, 0); err != ErrKey {
		t.Fatalf("empty key: %v", err)
	}
}

// TestConcurrent runs many goroutines of mixed commands on few keys; run
// it with -race. Every reply must be one of the shapes memcached gives.
func TestConcurrent(t *testing.T) {
	s := New(Config{MaxBytes: 4 << 20, SweepInterval: time.Millisecond})
	defer s.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			var buf []byte
			for range 3000 {
				k := "k" + strconv.Itoa(r.IntN(20))
				var req string
				switch r.IntN(8) {
				case 0:
					req = "set " + k + " 0 1 5\r\nhello\r\n"
				case 1:
					req = "get " + k + " k1 k2\r\n"
				case 2:
					req = "incr " + k + " 1\r\n"
				case 3:
					req = "ms " + k + " 2 MA\r\n10\r\n"
				case 4:
					req = "mg " + k + " v c t h N1\r\n"
				case 5:
					req = "md " + k + " I T1\r\n"
				case 6:
					req = "ma " + k + " N1 J5 v\r\n"
				default:
					if _, err := s.Set(k, make([]byte, r.IntN(64<<10)), 0, time.Second); err != nil {
						t.Error(err)
					}
					s.Get(k)
					continue
				}
				buf = s.Do(buf[:0], []byte(req))
				if len(buf) < 2 || string(buf[len(buf)-2:]) != "\r\n" {
					t.Errorf("%q: reply %q", req, buf)
				}
			}
		}()
	}
	wg.Wait()
	if st := s.Stats(); st.Bytes > st.Limit {
		t.Fatalf("bytes %d over the limit %d", st.Bytes, st.Limit)
	}
}

// TestConcurrentSetCAS races an ms that asks for the stored item's CAS
// (c) against invalidations of the same key (md I gives the item a new
// CAS): under -race, the reply's CAS must be read while the key's shard
// is locked. Each reply's CAS must also be one the item had: not zero.
func TestConcurrentSetCAS(t *testing.T) {
	s := New(Config{MaxBytes: 1 << 20})
	defer s.Close()
	var wg sync.WaitGroup
	for _, req := range []string{"ms k 1 c\r\nv\r\n", "md k I\r\n"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for range 2000 {
				buf = s.Do(buf[:0], []byte(req))
				if req[1] == 's' && (!strings.HasPrefix(string(buf), "HD c") || strings.HasPrefix(string(buf), "HD c0\r\n")) {
					t.Errorf("%q: reply %q", req, buf)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestMemoryMillionKeys stores a million keys with 100-byte values under a
// limit smaller than they need and reports the live heap against the
// limit. It fails when the heap exceeds the limit by more than a quarter
// of it plus 16 MiB (the runtime and the test).
func TestMemoryMillionKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	const limit = 128 << 20
	heap0 := liveHeap()
	s := New(Config{MaxBytes: limit, SweepInterval: -1})
	defer s.Close()
	v := make([]byte, 100)
	for i := range 1_000_000 {
		if _, err := s.Set("key:"+strconv.Itoa(i), v, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	heap := liveHeap() - heap0
	st := s.Stats()
	t.Logf("1e6 sets of 100-byte values, limit %d MiB: %d items kept, %d evicted, counted %.1f MiB, live heap %.1f MiB (%.0f bytes per item, %d counted)",
		limit>>20, st.Items, st.Evictions, float64(st.Bytes)/(1<<20), float64(heap)/(1<<20),
		float64(heap)/float64(st.Items), int64(len("key:999999"))+100+ItemOverhead)
	if st.Bytes > limit || st.Evictions == 0 {
		t.Fatalf("stats %+v", st)
	}
	if heap > limit+limit/4+16<<20 {
		t.Fatalf("live heap %d bytes for a %d-byte limit", heap, limit)
	}
	runtime.KeepAlive(s)
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestOnDelete: Config.OnDelete hears of each live item a delete or md
// command removes, with its value's size (md's x: the empty item it
// leaves), and not of md's I, which keeps the item, nor of a miss, nor of
// Delete, which is no command (memcached logs its commands' deletions).
func TestOnDelete(t *testing.T) {
	var got []string
	s := New(Config{SweepInterval: -1, OnDelete: func(key, cmd string, size int) {
		got = append(got, fmt.Sprintf("%s %s %d", cmd, key, size))
	}})
	defer s.Close()
	for _, req := range []string{
		"set a 0 0 3\r\nabc\r\n", "delete a\r\n", "delete a\r\n",
		"ms b 2\r\nhi\r\n", "md b I\r\n", "md b\r\n", "md b\r\n",
		"ms c 4\r\nhiya\r\n", "md c x\r\n",
	} {
		s.Do(nil, []byte(req))
	}
	s.Set("d", []byte("12345"), 0, 0)
	s.Delete("d")
	want := []string{"delete a 3", "md b 2", "md c 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deletions: got %q, want %q", got, want)
	}
}
