package store

import "time"

// Defaults of a zero Config.
const (
	// DefaultMaxBytes is memcached's default memory limit (-m 64).
	DefaultMaxBytes = 64 << 20
	// DefaultItemSizeMax is memcached's default largest item (-I 1m).
	DefaultItemSizeMax = 1 << 20
	// DefaultSweepInterval is how often the background sweep looks for
	// expired items.
	DefaultSweepInterval = time.Second
)

// ItemOverhead is what the memory limit counts for each item besides its
// key and value bytes: the item header (about 80 bytes) and its share of
// the shard's index (a map slot, about 48 bytes at the map's usual load).
// TestMemoryMillionKeys measures the real figure.
const ItemOverhead = 128

// Config sets up a Store. The zero Config is valid: every field documents
// its default.
type Config struct {
	// MaxBytes is the memory limit: the keys, values and ItemOverhead of
	// every item together. Past it the least recently used items of the
	// shard go. Zero means DefaultMaxBytes.
	MaxBytes int64
	// ItemSizeMax is the largest item, measured as memcached measures it
	// (a 48-byte header, the key and a NUL, 4 bytes when the client flags
	// are not zero, the value and its CRLF, 8 bytes of CAS), as memcached's
	// -I. Zero means DefaultItemSizeMax.
	ItemSizeMax int
	// Shards is the number of independently locked parts of the store,
	// rounded down to a power of two. Zero picks the largest power of two up
	// to 64 that leaves every shard at least four largest items of room.
	Shards int
	// SweepInterval is how often a background goroutine removes expired
	// items. Zero means DefaultSweepInterval; a negative value turns the
	// sweep off (items still expire when they are looked up).
	SweepInterval time.Duration
	// Now is the clock; nil means time.Now. Expiry has memcached's
	// granularity of one second.
	Now func() time.Time
	// Deleted, when set, is told of every live item a delete (or Delete)
	// or an md removes, as memcached's deletions log is: its key, the
	// command ("delete" or "md") and the size of its value (0 for what
	// md's x leaves). md's I, which keeps the item stale, is not a
	// deletion. It runs with the item's shard locked and must not block.
	Deleted func(key, cmd string, size int)
}

func (c Config) withDefaults() Config {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.ItemSizeMax <= 0 {
		c.ItemSizeMax = DefaultItemSizeMax
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Shards <= 0 {
		c.Shards = 1
		for c.Shards < 64 && c.MaxBytes/int64(c.Shards*2) >= 4*int64(c.ItemSizeMax+ItemOverhead) {
			c.Shards *= 2
		}
	}
	for c.Shards&(c.Shards-1) != 0 {
		c.Shards &= c.Shards - 1
	}
	return c
}
