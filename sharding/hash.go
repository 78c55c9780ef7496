package sharding

import "slices"

// HashFunc hashes a key to the 32-bit value a Distribution consumes. A
// HashFunc is pure: safe for concurrent use, and it neither retains nor
// modifies key.
type HashFunc func(key []byte) uint32

// Hash64Func hashes a key to 64 bits, for distributions that consume a 64-bit
// hash (jump). See LookupHash64.
type Hash64Func func(key []byte) uint64

// hashes maps every supported name to its 32-bit function. The first twelve
// are twemproxy's (nutcracker 0.5.0 on x86-64, byte for byte); xxhash,
// murmur3 and xxh3 are additions.
var hashes = map[string]HashFunc{
	"one_at_a_time": hashOneAtATime,
	"md5":           hashMD5,
	"crc16":         hashCRC16,
	"crc32":         hashCRC32,
	"crc32a":        hashCRC32a,
	"fnv1_64":       hashFNV1_64,
	"fnv1a_64":      hashFNV1a64,
	"fnv1_32":       hashFNV1_32,
	"fnv1a_32":      hashFNV1a32,
	"hsieh":         hashHsieh,
	"murmur":        hashMurmur,
	"jenkins":       hashJenkins,
	"xxhash":        hashXXHash,
	"murmur3":       hashMurmur3,
	"xxh3":          hashXXH3,
}

// LookupHash returns the hash function registered under name (one of
// HashNames). The twemproxy names reproduce nutcracker 0.5.0 on x86-64,
// including its sign extension of bytes >= 0x80 where twemproxy reads keys
// through a signed char. "xxh3" is XXH3 with seed 0; a Pool applies
// Config.Seed through LookupHash64.
func LookupHash(name string) (HashFunc, bool) {
	h, ok := hashes[name]
	return h, ok
}

// HashNames returns the names LookupHash accepts, sorted.
func HashNames() []string {
	names := make([]string, 0, len(hashes))
	for name := range hashes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// LookupHash64 returns the 64-bit form of the hash registered under name.
// "xxh3" is XXH3-64 with the given seed (memcached proxy's mcp.hash_xxhash)
// and "xxhash" is the full XXH64 value; every other hash is its 32-bit value
// zero-extended, and ignores seed.
func LookupHash64(name string, seed uint64) (Hash64Func, bool) {
	switch name {
	case "xxh3":
		return func(key []byte) uint64 { return XXH3(key, seed) }, true
	case "xxhash":
		return hashXXHash64, true
	}
	h, ok := hashes[name]
	if !ok {
		return nil, false
	}
	return func(key []byte) uint64 { return uint64(h(key)) }, true
}

// signed returns b as twemproxy sees it through a signed char on x86-64:
// bytes >= 0x80 are sign-extended.
func signed(b byte) uint32 { return uint32(int32(int8(b))) }
