package observe

import (
	"math"
	"sync"
	"time"
)

// SlowEntry is one request a Slowlog kept: its record, with the bytes it
// refers to copied, and its number.
type SlowEntry struct {
	ID int64
	Record
}

// Slowlog is a pool's bounded ring of slow requests, newest first, as
// Redis's SLOWLOG keeps them. The zero Slowlog keeps nothing; Configure
// sets its threshold and length, SetThreshold and SetMaxLen one of them
// (Redis's CONFIG SET slowlog-log-slower-than and slowlog-max-len). It is
// safe for concurrent use and is kept across reloads for a pool of the
// same name.
type Slowlog struct {
	// from is the threshold plus one nanosecond, 0 when nothing is kept
	// (a threshold of Off, or a length of 0), so that the zero Slowlog is
	// off: the session reads it for every request (Threshold).
	from atomicDuration

	mu        sync.Mutex
	threshold time.Duration // as set: Off, or at least 0
	entries   []SlowEntry   // a ring of cap maxLen: next is the slot written next
	next      int
	maxLen    int
	id        int64 // the last entry's ID, over the slowlog's life
}

// Off is the threshold that keeps no request (Redis's -1).
const Off time.Duration = -1

// Micros is threshold in microseconds as Redis writes it: -1 for Off.
func Micros(threshold time.Duration) int64 {
	if threshold < 0 {
		return -1
	}
	return threshold.Microseconds()
}

// Configure sets the threshold and the ring's length: a request of at
// least threshold is kept (the Record's Total), every request for a
// threshold of 0, none for Off or a maxLen of 0. A shorter ring keeps its
// newest entries.
func (l *Slowlog) Configure(threshold time.Duration, maxLen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setMaxLen(maxLen)
	l.setThreshold(threshold)
}

// SetThreshold sets the threshold alone (see Configure).
func (l *Slowlog) SetThreshold(threshold time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setThreshold(threshold)
}

// SetMaxLen sets the ring's length alone, dropping at once the oldest
// entries past it (see Configure).
func (l *Slowlog) SetMaxLen(maxLen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setMaxLen(maxLen)
	l.setThreshold(l.threshold)
}

// Settings returns the threshold (Off, or at least 0) and the length as
// set.
func (l *Slowlog) Settings() (threshold time.Duration, maxLen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.threshold, l.maxLen
}

// setThreshold stores threshold, and what the session compares with;
// mu is held.
func (l *Slowlog) setThreshold(threshold time.Duration) {
	l.threshold = max(threshold, Off)
	if l.threshold == Off || l.maxLen == 0 {
		l.from.Store(0)
		return
	}
	l.from.Store(min(l.threshold, math.MaxInt64-1) + 1)
}

// setMaxLen resizes the ring to maxLen, keeping its newest entries; mu
// is held.
func (l *Slowlog) setMaxLen(maxLen int) {
	maxLen = max(maxLen, 0)
	if maxLen == l.maxLen {
		return
	}
	kept := l.newest(maxLen)
	l.entries = make([]SlowEntry, 0, maxLen)
	for i := len(kept) - 1; i >= 0; i-- {
		l.entries = append(l.entries, kept[i])
	}
	l.next = len(l.entries) % max(maxLen, 1)
	l.maxLen = maxLen
}

// Threshold returns the time from which a request is slow, and false
// when the slowlog keeps none. The session asks it for every request
// (one atomic load).
func (l *Slowlog) Threshold() (time.Duration, bool) {
	from := l.from.Load()
	return from - 1, from != 0
}

// Add keeps a copy of r, dropping the oldest entry of a full ring.
func (l *Slowlog) Add(r *Record) {
	e := SlowEntry{Record: *r}
	e.Key = append([]byte(nil), r.Key...)
	e.Args = append([]byte(nil), r.Args...)
	if r.Key == nil {
		e.Key = nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxLen == 0 {
		return
	}
	l.id++
	e.ID = l.id
	if len(l.entries) < l.maxLen {
		l.entries = append(l.entries, e)
	} else {
		l.entries[l.next] = e
	}
	l.next = (l.next + 1) % l.maxLen
}

// Get returns up to n entries, newest first (n < 0: all).
func (l *Slowlog) Get(n int) []SlowEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.newest(n)
}

// newest returns up to n entries, newest first; mu is held.
func (l *Slowlog) newest(n int) []SlowEntry {
	if n < 0 || n > len(l.entries) {
		n = len(l.entries)
	}
	out := make([]SlowEntry, 0, n)
	for i := 1; i <= n; i++ {
		j := (l.next - i + len(l.entries)) % len(l.entries)
		out = append(out, l.entries[j])
	}
	return out
}

// Added returns how many requests the slowlog has taken over its life,
// those it no longer holds included.
func (l *Slowlog) Added() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id
}

// Len returns how many entries the ring holds.
func (l *Slowlog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Reset empties the ring; IDs go on from the last one, as Redis's do.
func (l *Slowlog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.entries)
	l.entries = l.entries[:0]
	l.next = 0
}
