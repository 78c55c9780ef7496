package sharding

import (
	"encoding/binary"
	"math/bits"
)

// XXH3-64 (xxHash 0.8 "XXH3_64bits_withSeed"), written from the algorithm's
// description: the output is stable across xxHash releases since 0.8.0 and
// is checked against the reference C library in xxh3_test.go.

const (
	xxhPrime32_1 = 0x9E3779B1
	xxhPrime32_2 = 0x85EBCA77
	xxhPrime32_3 = 0xC2B2AE3D
	xxhPrime64_1 = 0x9E3779B185EBCA87
	xxhPrime64_2 = 0xC2B2AE3D27D4EB4F
	xxhPrime64_3 = 0x165667B19E3779F9
	xxhPrime64_4 = 0x85EBCA77C2B2AE63
	xxhPrime64_5 = 0x27D4EB2F165667C5
	xxhPrimeMX1  = 0x165667919E3779F9
	xxhPrimeMX2  = 0x9FB21C651E98DF25

	xxh3SecretSize     = 192
	xxh3StripeLen      = 64
	xxh3ConsumeRate    = 8
	xxh3StripesInBlock = (xxh3SecretSize - xxh3StripeLen) / xxh3ConsumeRate
	xxh3BlockLen       = xxh3StripeLen * xxh3StripesInBlock
	xxh3LastAccStart   = 7
	xxh3MergeAccsStart = 11
	xxh3MidStartOffset = 3
	xxh3MidLastOffset  = 17
	xxh3SecretSizeMin  = 136
)

// xxh3Secret is XXH3's default 192-byte secret (kSecret).
var xxh3Secret = [xxh3SecretSize]byte{
	0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
	0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
	0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
	0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
	0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
	0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
	0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
	0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
	0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
	0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
	0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
	0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
}

// XXH3 returns XXH3_64bits_withSeed(key, seed), the key hash of memcached's
// built-in proxy (mcp.hash_xxhash, its default). memcached derives a pool's
// numeric seed from its "seed" string as XXH3(seedString, 0). XXH3 does not
// allocate and is safe for concurrent use.
func XXH3(key []byte, seed uint64) uint64 {
	switch n := len(key); {
	case n <= 16:
		return xxh3Len0To16(key, seed)
	case n <= 128:
		return xxh3Len17To128(key, seed)
	case n <= 240:
		return xxh3Len129To240(key, seed)
	}
	if seed == 0 {
		return xxh3Long(key, &xxh3Secret)
	}
	var secret [xxh3SecretSize]byte
	for i := 0; i < xxh3SecretSize; i += 16 {
		binary.LittleEndian.PutUint64(secret[i:], le64(xxh3Secret[i:])+seed)
		binary.LittleEndian.PutUint64(secret[i+8:], le64(xxh3Secret[i+8:])-seed)
	}
	return xxh3Long(key, &secret)
}

func hashXXH3(key []byte) uint32 { return uint32(XXH3(key, 0)) }

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

func mulFold64(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func xxh64Avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxhPrime64_2
	h ^= h >> 29
	h *= xxhPrime64_3
	h ^= h >> 32
	return h
}

func xxh3Avalanche(h uint64) uint64 {
	h ^= h >> 37
	h *= xxhPrimeMX1
	h ^= h >> 32
	return h
}

func xxh3RRMXMX(h uint64, n int) uint64 {
	h ^= bits.RotateLeft64(h, 49) ^ bits.RotateLeft64(h, 24)
	h *= xxhPrimeMX2
	h ^= h>>35 + uint64(n)
	h *= xxhPrimeMX2
	h ^= h >> 28
	return h
}

func xxh3Len0To16(key []byte, seed uint64) uint64 {
	s := xxh3Secret[:]
	n := len(key)
	switch {
	case n > 8:
		flip1 := (le64(s[24:]) ^ le64(s[32:])) + seed
		flip2 := (le64(s[40:]) ^ le64(s[48:])) - seed
		lo := le64(key) ^ flip1
		hi := le64(key[n-8:]) ^ flip2
		acc := uint64(n) + bits.ReverseBytes64(lo) + hi + mulFold64(lo, hi)
		return xxh3Avalanche(acc)
	case n >= 4:
		seed ^= uint64(bits.ReverseBytes32(uint32(seed))) << 32
		in1, in2 := le32(key), le32(key[n-4:])
		flip := (le64(s[8:]) ^ le64(s[16:])) - seed
		return xxh3RRMXMX((uint64(in2)+uint64(in1)<<32)^flip, n)
	case n > 0:
		c1, c2, c3 := uint32(key[0]), uint32(key[n>>1]), uint32(key[n-1])
		combined := c1<<16 | c2<<24 | c3 | uint32(n)<<8
		flip := uint64(le32(s)^le32(s[4:])) + seed
		return xxh64Avalanche(uint64(combined) ^ flip)
	}
	return xxh64Avalanche(seed ^ le64(s[56:]) ^ le64(s[64:]))
}

func xxh3Mix16(in, secret []byte, seed uint64) uint64 {
	return mulFold64(le64(in)^(le64(secret)+seed), le64(in[8:])^(le64(secret[8:])-seed))
}

func xxh3Len17To128(key []byte, seed uint64) uint64 {
	s := xxh3Secret[:]
	n := len(key)
	acc := uint64(n) * xxhPrime64_1
	if n > 32 {
		if n > 64 {
			if n > 96 {
				acc += xxh3Mix16(key[48:], s[96:], seed)
				acc += xxh3Mix16(key[n-64:], s[112:], seed)
			}
			acc += xxh3Mix16(key[32:], s[64:], seed)
			acc += xxh3Mix16(key[n-48:], s[80:], seed)
		}
		acc += xxh3Mix16(key[16:], s[32:], seed)
		acc += xxh3Mix16(key[n-32:], s[48:], seed)
	}
	acc += xxh3Mix16(key, s, seed)
	acc += xxh3Mix16(key[n-16:], s[16:], seed)
	return xxh3Avalanche(acc)
}

func xxh3Len129To240(key []byte, seed uint64) uint64 {
	s := xxh3Secret[:]
	n := len(key)
	acc := uint64(n) * xxhPrime64_1
	for i := 0; i < 8; i++ {
		acc += xxh3Mix16(key[16*i:], s[16*i:], seed)
	}
	acc = xxh3Avalanche(acc)
	for i := 8; i < n/16; i++ {
		acc += xxh3Mix16(key[16*i:], s[16*(i-8)+xxh3MidStartOffset:], seed)
	}
	acc += xxh3Mix16(key[n-16:], s[xxh3SecretSizeMin-xxh3MidLastOffset:], seed)
	return xxh3Avalanche(acc)
}

func xxh3Long(key []byte, secret *[xxh3SecretSize]byte) uint64 {
	acc := [8]uint64{
		xxhPrime32_3, xxhPrime64_1, xxhPrime64_2, xxhPrime64_3,
		xxhPrime64_4, xxhPrime32_2, xxhPrime64_5, xxhPrime32_1,
	}
	s := secret[:]
	n := len(key)
	blocks := (n - 1) / xxh3BlockLen
	for b := 0; b < blocks; b++ {
		block := key[b*xxh3BlockLen:]
		for i := 0; i < xxh3StripesInBlock; i++ {
			xxh3Accumulate512(&acc, block[i*xxh3StripeLen:], s[i*xxh3ConsumeRate:])
		}
		xxh3Scramble(&acc, s[xxh3SecretSize-xxh3StripeLen:])
	}
	last := key[blocks*xxh3BlockLen:]
	stripes := (n - 1 - blocks*xxh3BlockLen) / xxh3StripeLen
	for i := 0; i < stripes; i++ {
		xxh3Accumulate512(&acc, last[i*xxh3StripeLen:], s[i*xxh3ConsumeRate:])
	}
	xxh3Accumulate512(&acc, key[n-xxh3StripeLen:], s[xxh3SecretSize-xxh3StripeLen-xxh3LastAccStart:])

	result := uint64(n) * xxhPrime64_1
	for i := 0; i < 4; i++ {
		m := s[xxh3MergeAccsStart+16*i:]
		result += mulFold64(acc[2*i]^le64(m), acc[2*i+1]^le64(m[8:]))
	}
	return xxh3Avalanche(result)
}

func xxh3Accumulate512(acc *[8]uint64, in, secret []byte) {
	for i := 0; i < 8; i++ {
		v := le64(in[8*i:])
		k := v ^ le64(secret[8*i:])
		acc[i^1] += v
		acc[i] += uint64(uint32(k)) * (k >> 32)
	}
}

func xxh3Scramble(acc *[8]uint64, secret []byte) {
	for i := 0; i < 8; i++ {
		a := acc[i]
		a ^= a >> 47
		a ^= le64(secret[8*i:])
		a *= xxhPrime32_1
		acc[i] = a
	}
}
