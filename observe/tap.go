package observe

import (
	"errors"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/match"

	"shardproxy/route"
)

// MaxTaps is how many tap subscribers a Tap takes at once.
const MaxTaps = 16

// maxMatch bounds the work of one key pattern against one key
// (match.MatchLimit): a pattern of many stars costs a bounded time.
const maxMatch = 4096

// ErrTooManyTaps refuses a subscriber past MaxTaps.
var ErrTooManyTaps = errors.New("observe: tap subscriber limit reached")

// Filter says which requests a tap subscriber sees; a zero field matches
// every request.
type Filter struct {
	Pool    string        // the pool's name
	Command string        // the command's name, as Record.Command
	Key     string        // a glob of the first key: * any run, ? any byte
	Backend string        // the server's name, as Record.Backend
	Min     time.Duration // the least total time
	Sample  float64       // the share of matching requests shown, (0, 1]; 0 is 1
}

// ParseFilter reads a Filter from a query string's values: pool,
// command, key, backend, min (a Go duration: "10ms") and sample (0 to 1).
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{Pool: q.Get("pool"), Command: q.Get("command"), Key: q.Get("key"), Backend: q.Get("backend")}
	if s := q.Get("min"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return f, errors.New("observe: min must be a duration such as 10ms")
		}
		f.Min = d
	}
	if s := q.Get("sample"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0 && v <= 1) {
			return f, errors.New("observe: sample must be a number above 0 and at most 1")
		}
		if v < 1 {
			f.Sample = v // 1 is every request, as 0 is
		}
	}
	return f, nil
}

// Query returns f as the query string ParseFilter reads.
func (f Filter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"pool": f.Pool, "command": f.Command, "key": f.Key, "backend": f.Backend} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Min > 0 {
		q.Set("min", f.Min.String())
	}
	if f.Sample > 0 && f.Sample < 1 {
		q.Set("sample", strconv.FormatFloat(f.Sample, 'g', -1, 64))
	}
	return q
}

// matches reports whether r passes f, sampling included.
func (f *Filter) matches(r *Record) bool {
	switch {
	case !f.wants(r.Pool, r.Command, r.Key),
		f.Backend != "" && f.Backend != r.Backend,
		f.Min > 0 && r.Total() < f.Min:
		return false
	}
	return f.Sample <= 0 || f.Sample >= 1 || rand.Float64() < f.Sample
}

// wants reports whether a request of pool, command and first key may
// pass f: what is known before its record is made.
func (f *Filter) wants(pool, command string, key []byte) bool {
	if f.Pool != "" && f.Pool != pool || f.Command != "" && f.Command != command {
		return false
	}
	if f.Key == "" {
		return true
	}
	k := unsafe.String(unsafe.SliceData(key), len(key)) // match keeps nothing
	ok, _ := match.MatchLimit(k, f.Key, maxMatch)
	return ok
}

// Tap fans the records of every pool out to its subscribers, each through
// its own filter and bounded buffer. The zero Tap is ready; it is safe for
// concurrent use and lives as long as the server.
type Tap struct {
	mu   sync.Mutex
	subs atomic.Pointer[[]*Subscriber] // copy on write, under mu
	on   atomic.Bool                   // subs is not empty

	dropped atomic.Uint64 // lines the subscribers that left lost
	lines   atomic.Uint64 // lines offered
}

// On reports whether anyone taps: the session builds no record for the
// tap otherwise.
func (t *Tap) On() bool { return t.on.Load() }

// Wants reports whether some subscriber may want a request of pool,
// command and first key (nil for none): the session makes the request's
// record for the tap only then, so that a tap on a key pattern costs
// little for the requests it does not show.
func (t *Tap) Wants(pool, command string, key []byte) bool {
	p := t.subs.Load()
	if p == nil {
		return false
	}
	for _, s := range *p {
		if s.filter.wants(pool, command, key) {
			return true
		}
	}
	return false
}

// Subscriber is one tap client: its filter and its lines.
type Subscriber struct {
	t      *Tap
	filter Filter
	hub    route.Hub
	w      *route.Watcher
}

// Subscribe adds a subscriber with filter f. Its client reads lines with
// Next and ends with Close.
func (t *Tap) Subscribe(f Filter) (*Subscriber, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur []*Subscriber
	if p := t.subs.Load(); p != nil {
		cur = *p
	}
	if len(cur) >= MaxTaps {
		return nil, ErrTooManyTaps
	}
	s := &Subscriber{t: t, filter: f}
	s.w, _ = s.hub.Watch(1) // a Hub of its own: never full
	next := append(append(make([]*Subscriber, 0, len(cur)+1), cur...), s)
	t.subs.Store(&next)
	t.on.Store(true)
	return s, nil
}

// Publish offers r to every subscriber whose filter it passes. It never
// blocks: a subscriber whose buffer is full loses the line, counted.
func (t *Tap) Publish(r *Record) {
	p := t.subs.Load()
	if p == nil {
		return
	}
	var buf [384]byte
	var line []byte
	for _, s := range *p {
		if !s.filter.matches(r) {
			continue
		}
		if line == nil {
			line = r.AppendLine(buf[:0])
		}
		t.lines.Add(1)
		s.hub.Publish(1, line)
	}
}

// Next waits for lines and appends them to dst; false once the
// subscriber is closed.
func (s *Subscriber) Next(dst []byte) ([]byte, bool) { return s.w.Next(dst) }

// Dropped returns how many lines s lost to its slow reading.
func (s *Subscriber) Dropped() uint64 { return s.w.Dropped() }

// Close removes s from its Tap and wakes its Next. It may be called more
// than once.
func (s *Subscriber) Close() {
	t := s.t
	t.mu.Lock()
	p := t.subs.Load()
	if p == nil {
		t.mu.Unlock()
		s.w.Close()
		return
	}
	next := make([]*Subscriber, 0, len(*p))
	for _, o := range *p {
		if o != s {
			next = append(next, o)
		}
	}
	gone := len(next) < len(*p)
	t.subs.Store(&next)
	t.on.Store(len(next) > 0)
	t.mu.Unlock()
	s.w.Close()
	if gone {
		t.dropped.Add(s.w.Dropped())
	}
}

// TapStats are a Tap's counters.
type TapStats struct {
	Subscribers int
	Lines       uint64 // lines offered to subscribers
	Dropped     uint64 // lines lost to slow readers, over the Tap's life
}

// Stats returns t's counters.
func (t *Tap) Stats() TapStats {
	st := TapStats{Lines: t.lines.Load(), Dropped: t.dropped.Load()}
	if p := t.subs.Load(); p != nil {
		st.Subscribers = len(*p)
		for _, s := range *p {
			st.Dropped += s.w.Dropped()
		}
	}
	return st
}
