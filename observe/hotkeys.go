package observe

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	boom "github.com/tylertreat/BoomFilters"
)

// HotWindow is the span a pool's hot keys are counted over: the counts
// of the last half window and of the half before it.
const HotWindow = 10 * time.Second

// MaxHotKeys bounds how many hot keys a pool reports (key hot_keys).
const MaxHotKeys = 64

// Sketch parameters: counts within 0.1% of the window's requests, with
// 99.9% confidence (a few KiB per generation).
const (
	hotEpsilon = 0.001
	hotDelta   = 0.001
)

// HotKey is one of a pool's most requested keys over the window, its
// requests and the bytes of their replies, both estimates of the
// count-min sketch (never below the true counts).
type HotKey struct {
	Key      string
	Requests uint64
	Bytes    uint64
}

// HotKeys finds a pool's most requested keys over a sliding window: a
// count-min sketch's top-k (tylertreat/BoomFilters) of requests and a
// count-min sketch of reply bytes, in two generations of half a window
// each. It is safe for concurrent use.
type HotKeys struct {
	n int

	mu        sync.Mutex
	cur, prev hotGen
	since     time.Time // when cur began
	takenAt   time.Time // when hot was last taken

	hot atomic.Pointer[map[string]struct{}] // the top keys as of takenAt (IsHot)
}

// hotEvery is how often Add takes the top keys for IsHot.
const hotEvery = 100 * time.Millisecond

// hotGen is one half window's counts.
type hotGen struct {
	top   *boom.TopK           // the candidates
	reqs  *boom.CountMinSketch // requests per key (the top-k's own sketch is not exported)
	bytes *boom.CountMinSketch // reply bytes per key
}

func newHotGen(n int) hotGen {
	return hotGen{top: boom.NewTopK(hotEpsilon, hotDelta, uint(n)),
		reqs: boom.NewCountMinSketch(hotEpsilon, hotDelta), bytes: boom.NewCountMinSketch(hotEpsilon, hotDelta)}
}

func (g *hotGen) reset() {
	g.top.Reset()
	g.reqs.Reset()
	g.bytes.Reset()
}

// NewHotKeys returns a HotKeys that reports the top n keys (1 to
// MaxHotKeys).
func NewHotKeys(n int) *HotKeys {
	n = min(max(n, 1), MaxHotKeys)
	return &HotKeys{n: n, cur: newHotGen(n), prev: newHotGen(n)}
}

// Len is how many keys h reports at most.
func (h *HotKeys) Len() int { return h.n }

// Add counts a request of key, written at now, whose reply had bytes.
func (h *HotKeys) Add(key []byte, bytes int64, now time.Time) {
	if len(key) == 0 {
		return
	}
	own := []byte(string(key)) // the top-k keeps the slice it is given
	h.mu.Lock()
	h.rotate(now)
	h.cur.top.Add(own)
	h.cur.reqs.Add(own)
	h.cur.bytes.AddN(own, uint64(max(bytes, 0)))
	if now.Sub(h.takenAt) >= hotEvery {
		h.takenAt = now
		set := map[string]struct{}{}
		for _, k := range h.top() {
			set[k.Key] = struct{}{}
		}
		h.hot.Store(&set)
	}
	h.mu.Unlock()
}

// IsHot reports whether key was among the top keys when Add last took
// them (every hotEvery while requests come). It takes no lock.
func (h *HotKeys) IsHot(key []byte) bool {
	m := h.hot.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[string(key)]
	return ok
}

// rotate starts a new generation once half a window has passed; mu is
// held.
func (h *HotKeys) rotate(now time.Time) {
	switch since := now.Sub(h.since); {
	case since < HotWindow/2:
		return
	case since < HotWindow:
		h.prev, h.cur = h.cur, h.prev
		h.cur.reset()
	default: // a whole window without a request: both are stale
		h.cur.reset()
		h.prev.reset()
	}
	h.since = now
}

// Top returns the most requested keys over the window as of now, most
// requested first.
func (h *HotKeys) Top(now time.Time) []HotKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rotate(now)
	return h.top()
}

// top is Top once rotated; mu is held.
func (h *HotKeys) top() []HotKey {
	seen := map[string]bool{}
	var out []HotKey
	for _, g := range [2]*hotGen{&h.cur, &h.prev} {
		for _, e := range g.top.Elements() {
			k := string(e.Data)
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, HotKey{Key: k,
				Requests: h.cur.reqs.Count(e.Data) + h.prev.reqs.Count(e.Data),
				Bytes:    h.cur.bytes.Count(e.Data) + h.prev.bytes.Count(e.Data)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Requests != out[j].Requests {
			return out[i].Requests > out[j].Requests
		}
		return out[i].Key < out[j].Key
	})
	return out[:min(len(out), h.n)]
}
