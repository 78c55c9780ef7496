package observe

import (
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
// sets its threshold and length. It is safe for concurrent use and is kept
// across reloads for a pool of the same name.
type Slowlog struct {
	threshold atomicDuration

	mu      sync.Mutex
	entries []SlowEntry // a ring of cap maxLen: next is the slot written next
	next    int
	maxLen  int
	id      int64 // the last entry's ID, over the slowlog's life
}

// Configure sets the threshold and the ring's length: a request of at
// least threshold is kept (the Record's Total); maxLen 0 or a threshold
// of 0 turns the slowlog off. A shorter ring keeps its newest entries.
func (l *Slowlog) Configure(threshold time.Duration, maxLen int) {
	if maxLen <= 0 {
		threshold = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if maxLen != l.maxLen {
		kept := l.newest(maxLen)
		l.entries = make([]SlowEntry, 0, max(maxLen, 0))
		for i := len(kept) - 1; i >= 0; i-- {
			l.entries = append(l.entries, kept[i])
		}
		l.next = len(l.entries) % max(maxLen, 1)
		l.maxLen = max(maxLen, 0)
	}
	l.threshold.Store(threshold)
}

// Threshold returns the time from which a request is slow, 0 when the
// slowlog is off. The session compares every request's total with it.
func (l *Slowlog) Threshold() time.Duration { return l.threshold.Load() }

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
