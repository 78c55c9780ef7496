package sharding

import (
	"encoding/binary"
	"math/bits"
)

// hashMurmur3 is "murmur3": MurmurHash3 x86_32 with seed 0, the value of
// github.com/spaolacci/murmur3's Sum32. Not a twemproxy hash (twemproxy's
// "murmur" is MurmurHash2).
//
// It is implemented here because murmur3 v1.1.0's Sum32 walks the key with
// uintptr arithmetic, which the race detector's checkptr instrumentation
// rejects as a fatal error (and which is unsafe if the key lives on a stack
// that moves); its hash.Hash32 path is safe but allocates. The tests compare
// this function with that path.
func hashMurmur3(key []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	n := len(key)
	for ; len(key) >= 4; key = key[4:] {
		k := binary.LittleEndian.Uint32(key)
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(key) {
	case 3:
		k ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(key[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
