package store

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// item is one key and its value. buf holds the key followed by the value
// and is never written after the item is linked, so a value handed out by
// Get stays valid; a change makes a new item.
type item struct {
	buf   []byte
	nkey  uint8
	bits  uint8  // itemFetched | itemStale | itemTokenSent | itemKeyBinary
	flags uint32 // client flags
	exp   int64  // unix seconds; 0 never expires
	atime int64  // unix seconds of the last access (memcached's it->time)
	cas   uint64
	prev  *item // towards the most recently used
	next  *item // towards the least recently used
}

const (
	itemFetched   = 1 << iota // read at least once (mg h)
	itemStale                 // marked stale by md I or ms I (mg X)
	itemTokenSent             // a client won the recache token (mg W, Z)
	itemKeyBinary             // stored with a base64 key (mg k answers base64)
)

func (it *item) key() string   { return unsafe.String(&it.buf[0], int(it.nkey)) }
func (it *item) value() []byte { return it.buf[it.nkey:] }
func (it *item) size() int64   { return int64(len(it.buf)) + ItemOverhead }

// expired reports whether it has expired at now (memcached: an exptime at
// or before the current second).
func (it *item) expired(now int64) bool { return it.exp != 0 && it.exp <= now }

// newItem builds an unlinked item of key and value.
func newItem(key string, value []byte, flags uint32, exp int64) *item {
	buf := make([]byte, len(key)+len(value))
	copy(buf, key)
	copy(buf[len(key):], value)
	return &item{buf: buf, nkey: uint8(len(key)), flags: flags, exp: exp}
}

// Store is a memcached-compatible cache in memory. It is safe for many
// goroutines at once: the keys are spread over shards by hash, each with its
// own lock, index and LRU list.
type Store struct {
	cfg    Config
	seed   maphash.Seed
	shards []shard
	mask   uint64
	cas    atomic.Uint64
	start  int64 // unix seconds when the store was made (memcached's process_started)
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// shard is one lock's worth of the store.
type shard struct {
	mu    sync.Mutex
	m     map[string]*item
	head  *item // most recently used
	tail  *item // least recently used
	bytes int64
	limit int64
	st    counters
	_     [64]byte // keeps neighbouring shards' locks off one cache line
}

// counters are a shard's statistics, guarded by its lock.
type counters struct {
	hits, misses, evictions, expirations, stores, tooLarge, noMemory uint64
}

// New returns a Store configured by cfg and starts its background sweep.
// Close stops the sweep.
func New(cfg Config) *Store {
	cfg = cfg.withDefaults()
	s := &Store{
		cfg:    cfg,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, cfg.Shards),
		mask:   uint64(cfg.Shards - 1),
		start:  cfg.Now().Unix(),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	per := cfg.MaxBytes / int64(cfg.Shards)
	for i := range s.shards {
		s.shards[i].m = make(map[string]*item)
		s.shards[i].limit = per
	}
	if cfg.SweepInterval > 0 {
		go s.sweepLoop()
	} else {
		close(s.done)
	}
	return s
}

// Close stops the background sweep and waits for it. The store still
// answers afterwards; only the sweep is gone. Close may be called more than
// once.
func (s *Store) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (s *Store) now() int64 { return s.cfg.Now().Unix() }

func (s *Store) shardOf(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
}

func (s *Store) nextCAS() uint64 { return s.cas.Add(1) }

// realtime turns a memcached exptime into unix seconds, 0 for never:
// negative is already expired, up to 30 days is relative to now, more is
// an absolute unix time (at or before the store's start: expired).
func (s *Store) realtime(exptime int64, now int64) int64 {
	const maxDelta = 60 * 60 * 24 * 30
	switch {
	case exptime == 0:
		return 0
	case exptime < 0:
		return 1
	case exptime > maxDelta:
		if exptime <= s.start {
			return 1
		}
		return exptime
	default:
		return now + exptime
	}
}

// get finds key's live item. An expired item is removed on the way.
func (sh *shard) get(key string, now int64) *item {
	it := sh.m[key]
	if it == nil {
		return nil
	}
	if it.expired(now) {
		sh.unlink(it)
		sh.st.expirations++
		return nil
	}
	return it
}

// bump records a read: the item was fetched and moves to the LRU head.
func (sh *shard) bump(it *item, now int64) {
	it.bits |= itemFetched
	it.atime = now
	sh.toFront(it)
}

func (sh *shard) toFront(it *item) {
	if sh.head == it {
		return
	}
	sh.cut(it)
	sh.pushFront(it)
}

func (sh *shard) pushFront(it *item) {
	it.prev, it.next = nil, sh.head
	if sh.head != nil {
		sh.head.prev = it
	}
	sh.head = it
	if sh.tail == nil {
		sh.tail = it
	}
}

func (sh *shard) cut(it *item) {
	if it.prev != nil {
		it.prev.next = it.next
	} else {
		sh.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else {
		sh.tail = it.prev
	}
	it.prev, it.next = nil, nil
}

// unlink removes it from the index and the LRU list.
func (sh *shard) unlink(it *item) {
	sh.cut(it)
	delete(sh.m, it.key())
	sh.bytes -= it.size()
}

// fits reports whether an item of n bytes (ItemOverhead included) can be
// stored in the shard at all, evicting everything else.
func (sh *shard) fits(n int64) bool { return n <= sh.limit }

// link stores it under its key, in place of old (the item now under that
// key, or nil), evicting least recently used items past the limit. It gives
// it a new CAS unless cas is not zero. The caller checked fits.
func (s *Store) link(sh *shard, it, old *item, cas uint64, now int64) {
	if old != nil {
		sh.unlink(old)
	}
	need := it.size()
	for sh.bytes+need > sh.limit && sh.tail != nil {
		victim := sh.tail
		sh.unlink(victim)
		if victim.expired(now) {
			sh.st.expirations++
		} else {
			sh.st.evictions++
		}
	}
	if cas == 0 {
		cas = s.nextCAS()
	}
	it.cas = cas
	it.atime = now
	sh.m[it.key()] = it
	sh.pushFront(it)
	sh.bytes += need
	sh.st.stores++
}

// sweepLoop removes expired items in the background until Close.
func (s *Store) sweepLoop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			for i := range s.shards {
				s.sweepShard(&s.shards[i])
			}
		}
	}
}

// sweepSample is how many items one pass of the sweep looks at in a shard
// while holding its lock.
const sweepSample = 256

// sweepShard removes expired items from a random sample of the shard (Go's
// map iteration starts at a random place), again while more than a quarter
// of the sample had expired, as Redis's active expiry does: the lock is
// held for one sample at a time, and a shard full of expired items empties
// within a few ticks.
func (s *Store) sweepShard(sh *shard) {
	for round := 0; round < 16; round++ {
		now := s.now()
		seen, gone := 0, 0
		sh.mu.Lock()
		for _, it := range sh.m {
			if seen == sweepSample {
				break
			}
			seen++
			if it.expired(now) {
				sh.unlink(it)
				sh.st.expirations++
				gone++
			}
		}
		sh.mu.Unlock()
		if gone*4 <= seen {
			return
		}
	}
}
