// Package sharding decides which server of a pool owns a key. It is the
// placement core of shardproxy and must agree bit for bit with twemproxy
// (nutcracker 0.5.0 on x86-64) and with memcached's built-in proxy.
//
// # What it owns
//
//   - Hash functions (LookupHash, LookupHash64, XXH3): twemproxy's twelve
//     (one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32,
//     fnv1a_32, hsieh, murmur, jenkins) with their quirks - sign extension of
//     bytes >= 0x80 where twemproxy reads a signed char, crc16's unmasked
//     32-bit register, crc32's 15-bit libmemcached variant, fnv1a_64 in 32-bit
//     arithmetic - plus xxhash (XXH64, low 32 bits), murmur3 (MurmurHash3
//     x86_32) and xxh3 (XXH3-64 with seed, memcached proxy's default).
//   - Distributions behind one interface (NewDistribution): ketama and
//     modula exactly as twemproxy builds them, random, jump (Lamping-Veach,
//     memcached proxy's default) and ring (memcached proxy's ketama-style
//     ring and its modes).
//   - Pool: twemproxy's server order (name length, then bytes), hash tags,
//     the empty-key and single-server rules, and rebuilding the distribution
//     over the live servers when a server is ejected or restored.
//
// # What it must not do
//
// It does no I/O and keeps no time: deciding when a server has failed often
// enough to be ejected, and when to retry it, belongs to the backend package,
// which calls Pool.Eject and Pool.Restore. It computes node names from
// nothing: the caller (config) passes twemproxy's node name in Server.Name.
// It imports only the standard library, xxhash and murmur3, and no other
// shardproxy package.
//
// # Concurrency
//
// Hash functions and distributions are immutable and safe for concurrent use.
// Pool.Pick reads an immutable snapshot through an atomic pointer, so it is
// safe to call from any number of goroutines while Eject and Restore (which
// serialise among themselves) build and swap in a new snapshot. Pick does not
// allocate and neither retains nor modifies the key. Slices returned by
// Pool.Servers and Pool.Live are shared and must not be modified.
package sharding
