package sharding

import "hash/crc32"

// hashCRC32 is twemproxy's "crc32", libmemcached's variant: bits 16..30 of
// the standard CRC-32 (IEEE), a 15-bit value ("does not return CRC-32 as per
// spec" in twemproxy's source).
func hashCRC32(key []byte) uint32 {
	return crc32.ChecksumIEEE(key) >> 16 & 0x7fff
}
