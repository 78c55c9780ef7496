package sharding

import "github.com/cespare/xxhash/v2"

// hashXXHash is "xxhash": XXH64 with seed 0 (xxhash.Sum64), truncated to its
// low 32 bits. Not a twemproxy hash; LookupHash64 returns the full 64 bits.
func hashXXHash(key []byte) uint32 { return uint32(xxhash.Sum64(key)) }

func hashXXHash64(key []byte) uint64 { return xxhash.Sum64(key) }
