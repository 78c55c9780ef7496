package sharding

import "hash/crc32"

// hashCRC32a is twemproxy's "crc32a": the standard CRC-32 (IEEE, as zlib).
func hashCRC32a(key []byte) uint32 {
	return crc32.ChecksumIEEE(key)
}
