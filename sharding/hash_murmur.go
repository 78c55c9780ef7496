package sharding

import "encoding/binary"

// hashMurmur is twemproxy's "murmur": MurmurHash2 (32-bit, m = 0x5bd1e995,
// r = 24) seeded with 0xdeadbeef*len, as libmemcached computes it.
func hashMurmur(key []byte) uint32 {
	const m, r = 0x5bd1e995, 24
	n := uint32(len(key))
	h := 0xdeadbeef*n ^ n
	for len(key) >= 4 {
		k := binary.LittleEndian.Uint32(key)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		key = key[4:]
	}
	switch len(key) {
	case 3:
		h ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(key[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
