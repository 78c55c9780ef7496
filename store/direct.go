package store

import (
	"errors"
	"time"
)

// Errors of the direct calls.
var (
	// ErrTooLarge: the item is larger than Config.ItemSizeMax.
	ErrTooLarge = errors.New("store: object too large for cache")
	// ErrNoMemory: the item does not fit in its shard's share of
	// Config.MaxBytes even with every other item evicted.
	ErrNoMemory = errors.New("store: out of memory storing object")
	// ErrKey: the key is empty or longer than 250 bytes.
	ErrKey = errors.New("store: bad key")
)

// Get returns key's value, client flags and CAS, counting a hit or a miss
// and marking the item used as a get does. The value is shared with the
// store and must not be modified; it stays valid after later writes.
func (s *Store) Get(key string) (value []byte, flags uint32, cas uint64, ok bool) {
	sh := s.shardOf(key)
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it := sh.get(key, now)
	if it == nil {
		sh.st.misses++
		return nil, 0, 0, false
	}
	sh.st.hits++
	sh.bump(it, now)
	return it.value(), it.flags, it.cas, true
}

// Set stores value under key (memcached's set) and returns its new CAS. A
// ttl of zero never expires; a negative one is expired at once; otherwise
// it is rounded up to whole seconds. value is copied.
func (s *Store) Set(key string, value []byte, flags uint32, ttl time.Duration) (uint64, error) {
	if len(key) == 0 || len(key) > keyMax {
		return 0, ErrKey
	}
	now := s.now()
	exp := ttlExp(ttl, now)
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !s.sizeOK(len(key), flags, len(value)) {
		sh.st.tooLarge++
		if old := sh.m[key]; old != nil {
			sh.unlink(old)
		}
		return 0, ErrTooLarge
	}
	it := newItem(key, value, flags, exp)
	if !sh.fits(it.size()) {
		sh.st.noMemory++
		if old := sh.m[key]; old != nil {
			sh.unlink(old)
		}
		return 0, ErrNoMemory
	}
	s.link(sh, it, sh.m[key], 0, now)
	return it.cas, nil
}

// Delete removes key and reports whether it was there (and live).
func (s *Store) Delete(key string) bool {
	sh := s.shardOf(key)
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it := sh.get(key, now)
	if it == nil {
		return false
	}
	if s.cfg.Deleted != nil {
		s.cfg.Deleted(key, "delete", len(it.value()))
	}
	sh.unlink(it)
	return true
}

// Touch gives key a new ttl (as Set's) and reports whether it was there.
func (s *Store) Touch(key string, ttl time.Duration) bool {
	return s.touch(key, func(now int64) int64 { return ttlExp(ttl, now) })
}

// touch marks key's item used and gives it the expiry exp returns for the
// current time, under the shard's lock (memcached's touch); it reports
// whether the item was there.
func (s *Store) touch(key string, exp func(now int64) int64) bool {
	sh := s.shardOf(key)
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it := sh.get(key, now)
	if it == nil {
		return false
	}
	sh.bump(it, now)
	it.exp = exp(now)
	return true
}

// ttlExp turns a Set or Touch ttl into an item's expiry at now: 0 for
// never, 1 (long past) for a negative ttl, else now plus the ttl rounded
// up to whole seconds.
func ttlExp(ttl time.Duration, now int64) int64 {
	switch {
	case ttl < 0:
		return 1
	case ttl > 0:
		return now + int64((ttl+time.Second-1)/time.Second)
	}
	return 0
}

// keyMax is memcached's longest key.
const keyMax = 250

// sizeOK reports whether an item fits ItemSizeMax the way memcached
// measures it: a 48-byte header, key and NUL, 4 bytes of client flags when
// they are not zero, the value and CRLF, 8 bytes of CAS.
func (s *Store) sizeOK(nkey int, flags uint32, nvalue int) bool {
	return itemTotal(nkey, flags, nvalue) <= int64(s.cfg.ItemSizeMax)
}

func itemTotal(nkey int, flags uint32, nvalue int) int64 {
	n := int64(48 + nkey + 1 + nvalue + 2 + 8)
	if flags != 0 {
		n += 4
	}
	return n
}
