package sharding

import (
	"crypto/md5"
	"encoding/binary"
)

// hashMD5 is twemproxy's "md5": the first four bytes of the MD5 digest read
// as a little-endian uint32.
func hashMD5(key []byte) uint32 {
	d := md5.Sum(key)
	return binary.LittleEndian.Uint32(d[:4])
}
