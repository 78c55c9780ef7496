package sharding

// hashHsieh is twemproxy's "hsieh": Paul Hsieh's SuperFastHash with an
// initial hash of 0 (the reference starts from the length). An empty key
// hashes to 0. 16-bit reads are little-endian and unsigned; the third byte of
// a 3-byte tail is read through a signed char, the single byte of a 1-byte
// tail as unsigned.
func hashHsieh(key []byte) uint32 {
	if len(key) == 0 {
		return 0
	}
	var h uint32
	rem := len(key) & 3
	for n := len(key) >> 2; n > 0; n-- {
		h += le16(key)
		tmp := le16(key[2:])<<11 ^ h
		h = h<<16 ^ tmp
		key = key[4:]
		h += h >> 11
	}
	switch rem {
	case 3:
		h += le16(key)
		h ^= h << 16
		h ^= signed(key[2]) << 18
		h += h >> 11
	case 2:
		h += le16(key)
		h ^= h << 11
		h += h >> 17
	case 1:
		h += uint32(key[0])
		h ^= h << 10
		h += h >> 1
	}
	h ^= h << 3
	h += h >> 5
	h ^= h << 4
	h += h >> 17
	h ^= h << 25
	h += h >> 6
	return h
}

func le16(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 }
