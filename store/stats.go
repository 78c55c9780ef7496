package store

// Stats are a Store's counters and sizes at one moment.
type Stats struct {
	Items       int64  // items stored, expired ones not yet removed included
	Bytes       int64  // what the limit counts: keys, values and ItemOverhead per item
	Limit       int64  // Config.MaxBytes
	Hits        uint64 // lookups that found a live item (get, gets, gat, gats, mg, Get, per key)
	Misses      uint64 // lookups that found none
	Evictions   uint64 // live items removed to make room
	Expirations uint64 // expired items removed (on access, by the sweep, or to make room)
	Stores      uint64 // items linked (every successful write)
	TooLarge    uint64 // writes refused because the item exceeds ItemSizeMax
	NoMemory    uint64 // writes refused because the item exceeds a shard's share of the limit
}

// Stats returns the store's counters, summed over its shards. It locks one
// shard at a time, so under load the sum is not one instant's.
func (s *Store) Stats() Stats {
	st := Stats{Limit: s.cfg.MaxBytes}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Items += int64(len(sh.m))
		st.Bytes += sh.bytes
		st.Hits += sh.st.hits
		st.Misses += sh.st.misses
		st.Evictions += sh.st.evictions
		st.Expirations += sh.st.expirations
		st.Stores += sh.st.stores
		st.TooLarge += sh.st.tooLarge
		st.NoMemory += sh.st.noMemory
		sh.mu.Unlock()
	}
	return st
}
