package sharding

import (
	"encoding/binary"
	"math/bits"
)

// jenkinsInitval is the initval libmemcached (and so twemproxy) passes to
// lookup3's hashlittle.
const jenkinsInitval = 13

// hashJenkins is twemproxy's "jenkins": Bob Jenkins' lookup3 hashlittle with
// initval 13, bytes unsigned.
func hashJenkins(key []byte) uint32 {
	return hashLittle(key, jenkinsInitval)
}

// hashLittle is lookup3's hashlittle on a little-endian machine. An empty key
// returns the initial state unmixed, as lookup3 does.
func hashLittle(key []byte, initval uint32) uint32 {
	a := 0xdeadbeef + uint32(len(key)) + initval
	b, c := a, a
	for len(key) > 12 {
		a += binary.LittleEndian.Uint32(key)
		b += binary.LittleEndian.Uint32(key[4:])
		c += binary.LittleEndian.Uint32(key[8:])
		a, b, c = lookup3Mix(a, b, c)
		key = key[12:]
	}
	if len(key) == 0 {
		return c
	}
	var tail [12]byte
	copy(tail[:], key)
	a += binary.LittleEndian.Uint32(tail[0:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:])
	return lookup3Final(a, b, c)
}

func lookup3Mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func lookup3Final(a, b, c uint32) uint32 {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
