package observe

import (
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func record(key string, total time.Duration) *Record {
	t0 := time.Unix(1732881600, 123456000)
	return &Record{Pool: "cache", Command: "get", Key: []byte(key), Keys: 1, Client: "127.0.0.1:5000",
		Backend: "s1", Read: t0, Queued: t0.Add(time.Microsecond), Sent: t0.Add(2 * time.Microsecond),
		Replied: t0.Add(total - time.Microsecond), Written: t0.Add(total), Result: ResultHit}
}

// TestSlowlogRing: newest first, bounded, IDs over the log's life, a
// shorter ring keeps the newest, Reset keeps counting.
func TestSlowlogRing(t *testing.T) {
	var l Slowlog
	l.Configure(10*time.Millisecond, 3)
	for i := range 5 {
		l.Add(record(string(rune('a'+i)), time.Second))
	}
	ids := func(es []SlowEntry) (s string) {
		for _, e := range es {
			s += string(e.Key)
		}
		return s
	}
	if got := ids(l.Get(-1)); got != "edc" || l.Len() != 3 || l.Added() != 5 {
		t.Fatalf("after 5 adds to a ring of 3: %q, len %d, added %d", got, l.Len(), l.Added())
	}
	if got := ids(l.Get(2)); got != "ed" {
		t.Errorf("Get(2) = %q", got)
	}
	l.Configure(10*time.Millisecond, 2)
	if got := ids(l.Get(-1)); got != "ed" {
		t.Errorf("shrunk to 2: %q", got)
	}
	l.Add(record("f", time.Second))
	if got := ids(l.Get(-1)); got != "fe" || l.Get(1)[0].ID != 6 {
		t.Errorf("after another add: %q, id %d", got, l.Get(1)[0].ID)
	}
	l.Configure(10*time.Millisecond, 4)
	l.Add(record("g", time.Second))
	if got := ids(l.Get(-1)); got != "gfe" {
		t.Errorf("grown to 4: %q", got)
	}
	l.Reset()
	l.Add(record("h", time.Second))
	if es := l.Get(-1); len(es) != 1 || es[0].ID != 8 {
		t.Errorf("after Reset: %+v", es)
	}
	l.Configure(10*time.Millisecond, 0)
	if _, on := l.Threshold(); on || l.Len() != 0 {
		t.Error("max_len 0 leaves the slowlog on, or keeps entries")
	}
}

// TestSlowlogSettings: Redis's meanings of the threshold and the length,
// each set alone as CONFIG SET sets them.
func TestSlowlogSettings(t *testing.T) {
	var l Slowlog
	if _, on := l.Threshold(); on {
		t.Fatal("the zero Slowlog is on")
	}
	l.Configure(10*time.Millisecond, 4)
	if th, on := l.Threshold(); !on || th != 10*time.Millisecond {
		t.Fatalf("Threshold() = %v, %v", th, on)
	}
	l.SetThreshold(0) // every request
	if th, on := l.Threshold(); !on || th != 0 {
		t.Fatalf("threshold 0: %v, %v", th, on)
	}
	for i := range 4 {
		l.Add(record(string(rune('a'+i)), time.Microsecond))
	}
	l.SetMaxLen(2) // the oldest go at once
	if th, n := l.Settings(); l.Len() != 2 || string(l.Get(-1)[1].Key) != "c" || th != 0 || n != 2 {
		t.Fatalf("after SetMaxLen(2): len %d, settings %v %d", l.Len(), th, n)
	}
	l.SetThreshold(Off)
	if _, on := l.Threshold(); on {
		t.Fatal("Off leaves the slowlog on")
	}
	if th, _ := l.Settings(); th != Off {
		t.Fatalf("Settings' threshold = %v, want Off", th)
	}
	l.SetThreshold(time.Duration(math.MaxInt64))
	if th, on := l.Threshold(); !on || th != math.MaxInt64-1 {
		t.Fatalf("the largest threshold: %v, %v", th, on)
	}
	l.SetMaxLen(0)
	if _, on := l.Threshold(); on || l.Len() != 0 {
		t.Fatal("a length of 0 keeps entries, or leaves the slowlog on")
	}
	l.SetMaxLen(3) // the threshold set before comes back
	if th, on := l.Threshold(); !on || th != math.MaxInt64-1 {
		t.Fatalf("after a length again: %v, %v", th, on)
	}
}

// TestSlowlogCopies: an entry does not share the record's bytes.
func TestSlowlogCopies(t *testing.T) {
	var l Slowlog
	l.Configure(time.Millisecond, 1)
	r := record("key", time.Second)
	r.Args = []byte("get key\r\n")
	l.Add(r)
	r.Key[0], r.Args[0] = 'X', 'X'
	if e := l.Get(1)[0]; string(e.Key) != "key" || string(e.Args) != "get key\r\n" {
		t.Fatalf("entry changed with the record: %q %q", e.Key, e.Args)
	}
}

// TestFilter: each field of a filter, and ParseFilter's refusals.
func TestFilter(t *testing.T) {
	r := record("user:42", 30*time.Millisecond)
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"", true},
		{"pool=cache&command=get&backend=s1", true},
		{"pool=other", false},
		{"command=set", false},
		{"backend=s2", false},
		{"key=user:*", true},
		{"key=user:4?", true},
		{"key=session:*", false},
		{"min=25ms", true},
		{"min=50ms", false},
		{"sample=1", true},
	} {
		q, _ := url.ParseQuery(tc.query)
		f, err := ParseFilter(q)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if got := f.matches(r); got != tc.want {
			t.Errorf("%q: matches %v, want %v", tc.query, got, tc.want)
		}
		if g, _ := ParseFilter(f.Query()); g != f {
			t.Errorf("%q: Query does not read back: %+v, %+v", tc.query, f, g)
		}
	}
	for _, bad := range []string{"min=x", "min=-1s", "sample=0", "sample=2", "sample=x"} {
		q, _ := url.ParseQuery(bad)
		if _, err := ParseFilter(q); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	f := Filter{Sample: 0.5}
	n := 0
	for range 1000 {
		if f.matches(r) {
			n++
		}
	}
	if n < 350 || n > 650 {
		t.Errorf("sample 0.5 let %d of 1000 through", n)
	}
}

// TestAppendLine: a tap line as redis-cli monitor writes one, with the
// record's times.
func TestAppendLine(t *testing.T) {
	got := string(record("user:42", 52*time.Millisecond).AppendLine(nil))
	want := `1732881600.123456 [cache 127.0.0.1:5000] "get" "user:42" backend=s1 total_us=52000 server_us=51997 result=hit` + "\n"
	if got != want {
		t.Errorf("line\n%q, want\n%q", got, want)
	}
	r := record("a b\"\n", time.Millisecond)
	r.Read = time.Unix(5, 1000)
	if got := string(r.AppendLine(nil)); !strings.HasPrefix(got, `5.000001 [cache 127.0.0.1:5000] "get" "a b\"\n" `) {
		t.Errorf("quoted key: %q", got)
	}
}

// TestTapSubscribers: each subscriber sees what its filter passes; one
// that never reads loses lines, counted, and Close ends its Next.
func TestTapSubscribers(t *testing.T) {
	var tap Tap
	if tap.On() {
		t.Fatal("a zero Tap is on")
	}
	users, _ := tap.Subscribe(Filter{Key: "user:*"})
	stuck, _ := tap.Subscribe(Filter{})
	for i := range 5000 {
		key := "other"
		if i%1000 == 0 {
			key = "user:1"
		}
		tap.Publish(record(key, time.Millisecond))
	}
	got, ok := users.Next(nil)
	if !ok || strings.Count(string(got), "\n") != 5 || strings.Contains(string(got), "other") {
		t.Errorf("users' lines: %q", got)
	}
	if stuck.Dropped() == 0 || tap.Stats().Dropped != stuck.Dropped() {
		t.Errorf("a full subscriber dropped %d, stats say %+v", stuck.Dropped(), tap.Stats())
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, ok := users.Next(nil); !ok {
				return
			}
		}
	}()
	users.Close()
	wg.Wait()
	dropped := stuck.Dropped()
	stuck.Close()
	if tap.On() || tap.Stats().Subscribers != 0 || tap.Stats().Dropped != dropped {
		t.Errorf("after both closed: on %v, %+v", tap.On(), tap.Stats())
	}
	for range MaxTaps {
		if _, err := tap.Subscribe(Filter{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tap.Subscribe(Filter{}); err != ErrTooManyTaps {
		t.Errorf("subscriber %d: %v", MaxTaps+1, err)
	}
}

// TestCommandsBounded: past MaxCommands, commands count as "other".
func TestCommandsBounded(t *testing.T) {
	var c Commands
	for i := range MaxCommands + 10 {
		c.Histogram(strings.Repeat("x", i+1)).Observe(time.Millisecond)
	}
	snap := c.Snapshot()
	if len(snap) != MaxCommands+1 {
		t.Fatalf("%d histograms, want %d", len(snap), MaxCommands+1)
	}
	for _, cl := range snap {
		if cl.Command == OtherCommand && cl.Counts[3] < 10 {
			t.Errorf("other: %v", cl.Counts)
		}
	}
}

// FuzzParseFilter: any query either fails or gives a filter whose Query
// reads back the same.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "pool=a&key=user:*&min=10ms&sample=0.25", "min=1h", "sample=1e-3", "key=%00*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := url.ParseQuery(s)
		if err != nil {
			return
		}
		flt, err := ParseFilter(q)
		if err != nil {
			return
		}
		if again, err := ParseFilter(flt.Query()); err != nil || again != flt {
			t.Fatalf("%q: %+v then %+v, %v", s, flt, again, err)
		}
		flt.matches(record("user:1", time.Millisecond))
	})
}

// BenchmarkTapPublish is the tap's cost per request: a follower whose key
// pattern passes none of them (Miss), and one it passes every one of,
// read by nobody once its buffer is full (Full).
func BenchmarkTapPublishMiss(b *testing.B) { benchPublish(b, "user:*") }
func BenchmarkTapPublishFull(b *testing.B) { benchPublish(b, "sb*") }

func benchPublish(b *testing.B, pattern string) {
	var tap Tap
	sub, _ := tap.Subscribe(Filter{Key: pattern})
	defer sub.Close()
	r := record("sb4f2a91c0:1234", time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		tap.Publish(r)
	}
}

// TestHotKeys: over Zipf-distributed keys, one key taking 30% of the
// requests is the top one with its counts; a window later it is gone.
func TestHotKeys(t *testing.T) {
	h := NewHotKeys(5)
	now := time.Unix(1000, 0)
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, 1_000_000)
	hot := 0
	for i := range 100_000 {
		key := "k" + strconv.FormatUint(z.Uint64(), 10)
		if i%10 < 3 {
			key, hot = "hot", hot+1
		}
		h.Add([]byte(key), 100, now.Add(time.Duration(i)*time.Microsecond))
	}
	top := h.Top(now.Add(time.Second))
	if len(top) != 5 || top[0].Key != "hot" || top[0].Requests < uint64(hot) || top[0].Requests > uint64(hot)+200 ||
		top[0].Bytes < uint64(hot)*100 {
		t.Fatalf("top: %+v (hot had %d requests)", top, hot)
	}
	for i := 1; i < len(top); i++ {
		if top[i].Requests > top[i-1].Requests {
			t.Errorf("not most requested first: %+v", top)
		}
	}
	if top := h.Top(now.Add(HotWindow + time.Second)); len(top) != 0 {
		t.Errorf("a window later: %+v", top)
	}
}

// BenchmarkHotKeysAdd is hot_keys' cost per request.
func BenchmarkHotKeysAdd(b *testing.B) {
	h := NewHotKeys(10)
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(i*7919))
	}
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Add(keys[i%len(keys)], 100, now)
		i++
	}
}

// TestIsHot: a key most requested is hot once the top keys are taken
// again (every hotEvery), and a key requested once is not.
func TestIsHot(t *testing.T) {
	h := NewHotKeys(2)
	now := time.Unix(1_800_000_000, 0)
	if h.IsHot([]byte("a")) {
		t.Fatalf("a key is hot before any request")
	}
	for i := range 100 {
		h.Add([]byte("a"), 10, now.Add(time.Duration(i)*time.Millisecond))
	}
	h.Add([]byte("b"), 10, now.Add(150*time.Millisecond))
	for range 50 {
		h.Add([]byte("c"), 10, now.Add(150*time.Millisecond))
	}
	h.Add([]byte("z"), 10, now.Add(300*time.Millisecond))
	if !h.IsHot([]byte("a")) || !h.IsHot([]byte("c")) {
		t.Errorf("a and c, the most requested, are not hot")
	}
	if h.IsHot([]byte("z")) {
		t.Errorf("z, requested once, is hot")
	}
}
