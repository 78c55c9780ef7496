package sharding

import (
	"crypto/md5"
	"encoding/binary"
	"hash/crc32"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/spaolacci/murmur3"
)

func TestHashNames(t *testing.T) {
	want := append(slices.Clone(twemproxyHashes), "murmur3", "xxh3", "xxhash")
	slices.Sort(want)
	if got := HashNames(); !slices.Equal(got, want) {
		t.Fatalf("HashNames() = %v, want %v", got, want)
	}
	for _, name := range want {
		if _, ok := LookupHash(name); !ok {
			t.Errorf("LookupHash(%q) not found", name)
		}
		if _, ok := LookupHash64(name, 0); !ok {
			t.Errorf("LookupHash64(%q) not found", name)
		}
	}
	for _, name := range []string{"", "FNV1A_64", "crc64", "sha1"} {
		if _, ok := LookupHash(name); ok {
			t.Errorf("LookupHash(%q) found", name)
		}
		if _, ok := LookupHash64(name, 0); ok {
			t.Errorf("LookupHash64(%q) found", name)
		}
	}
}

// TestHashPublishedVectors checks values published for the underlying
// algorithms, independent of twemproxy.
func TestHashPublishedVectors(t *testing.T) {
	tests := []struct {
		hash string
		key  string
		want uint32
	}{
		// CRC catalogue check values over "123456789".
		{"crc32a", "123456789", 0xCBF43926},
		{"crc32", "123456789", 0xCBF43926 >> 16 & 0x7fff},
		// Bob Jenkins' one-at-a-time (Wikipedia's examples, ASCII only).
		{"one_at_a_time", "a", 0xca2e9442},
		{"one_at_a_time", "The quick brown fox jumps over the lazy dog", 0x519e91f5},
		// FNV reference values (isthe.com test vectors), ASCII only.
		{"fnv1_32", "a", 0x050c5d7e},
		{"fnv1a_32", "a", 0xe40c292c},
		{"fnv1_64", "a", 0x8601b7be},  // 0xaf63bd4c8601b7be
		{"fnv1a_64", "a", 0x8601ec8c}, // 0xaf63dc4c8601ec8c
		// MurmurHash3 x86_32, seed 0 (smhasher).
		{"murmur3", "", 0},
		{"murmur3", "hello", 0x248bfa47},
		// XXH64, seed 0, low 32 bits.
		{"xxhash", "", 0x51d8e999},
		{"xxhash", "a", 0xa98c6e5b},
		{"xxhash", "abc", 0xad770999},
		// XXH3-64, seed 0, low 32 bits.
		{"xxh3", "", 0x38d394c2},
	}
	for _, tt := range tests {
		t.Run(tt.hash+"/"+tt.key, func(t *testing.T) {
			h, _ := LookupHash(tt.hash)
			if got := h([]byte(tt.key)); got != tt.want {
				t.Errorf("%s(%q) = %#08x, want %#08x", tt.hash, tt.key, got, tt.want)
			}
		})
	}
}

// TestCRC16Low16 checks that crc16's low 16 bits are CRC-16/XMODEM (check
// value 0x31C3) while the upper bits accumulate.
func TestCRC16Low16(t *testing.T) {
	got := hashCRC16([]byte("123456789"))
	if got&0xffff != 0x31C3 {
		t.Errorf("crc16 low 16 bits = %#04x, want 0x31c3", got&0xffff)
	}
	if got>>16 == 0 {
		t.Errorf("crc16 = %#x: upper bits should accumulate", got)
	}
}

// TestJenkinsLookup3 checks hashLittle against lookup3.c's published
// self-test values, then twemproxy's initval.
func TestJenkinsLookup3(t *testing.T) {
	tests := []struct {
		key     string
		initval uint32
		want    uint32
	}{
		{"", 0, 0xdeadbeef},
		{"", 0xdeadbeef, 0xbd5b7dde},
		{"Four score and seven years ago", 0, 0x17770551},
		{"Four score and seven years ago", 1, 0xcd628161},
	}
	for _, tt := range tests {
		if got := hashLittle([]byte(tt.key), tt.initval); got != tt.want {
			t.Errorf("hashlittle(%q, %d) = %#08x, want %#08x", tt.key, tt.initval, got, tt.want)
		}
	}
	if got, want := hashJenkins(nil), uint32(0xdeadbeef+jenkinsInitval); got != want {
		t.Errorf("jenkins(\"\") = %#x, want %#x", got, want)
	}
}

// TestHashMatchesStdlib compares the plain algorithms with the standard
// library over ASCII keys, where sign extension does not matter.
func TestHashMatchesStdlib(t *testing.T) {
	gen := lcg(7)
	for range 1000 {
		key := make([]byte, gen.intn(40))
		for i := range key {
			key[i] = byte(0x20 + gen.intn(0x5f))
		}
		d := md5.Sum(key)
		std := map[string]uint32{
			"md5":      binary.LittleEndian.Uint32(d[:]),
			"crc32a":   crc32.ChecksumIEEE(key),
			"fnv1_32":  sum32(fnv.New32(), key),
			"fnv1a_32": sum32(fnv.New32a(), key),
			"fnv1_64":  uint32(sum64(fnv.New64(), key)),
			"fnv1a_64": uint32(sum64(fnv.New64a(), key)),
		}
		for name, want := range std {
			h, _ := LookupHash(name)
			if got := h(key); got != want {
				t.Fatalf("%s(%q) = %#x, stdlib %#x", name, key, got, want)
			}
		}
	}
}

// TestHashSignExtension pins twemproxy's signed-char reading: for a byte >=
// 0x80 the FNV family differs from the textbook (unsigned) algorithm.
func TestHashSignExtension(t *testing.T) {
	key := []byte{0x80, 'a', 0xff}
	if got, std := hashFNV1a32(key), sum32(fnv.New32a(), key); got == std {
		t.Errorf("fnv1a_32(%x) = %#x equals the unsigned algorithm", key, got)
	}
	if got, std := hashFNV1a64(key), uint32(sum64(fnv.New64a(), key)); got == std {
		t.Errorf("fnv1a_64(%x) = %#x equals the unsigned algorithm", key, got)
	}
	if signed(0x80) != 0xffffff80 || signed(0x7f) != 0x7f {
		t.Errorf("signed() does not sign-extend")
	}
}

func TestLookupHash64(t *testing.T) {
	key := []byte("some key")
	x3, _ := LookupHash64("xxh3", 99)
	if got, want := x3(key), XXH3(key, 99); got != want {
		t.Errorf("xxh3 64 = %#x, want %#x", got, want)
	}
	x64, _ := LookupHash64("xxhash", 99)
	x32, _ := LookupHash("xxhash")
	if got := x64(key); uint32(got) != x32(key) || got>>32 == 0 {
		t.Errorf("xxhash 64 = %#x, 32-bit %#x", got, x32(key))
	}
	f64, _ := LookupHash64("fnv1a_64", 99)
	if got, want := f64(key), uint64(hashFNV1a64(key)); got != want {
		t.Errorf("fnv1a_64 widened = %#x, want %#x", got, want)
	}
}

type hash32 interface {
	Write([]byte) (int, error)
	Sum32() uint32
}

type hash64 interface {
	Write([]byte) (int, error)
	Sum64() uint64
}

func sum32(h hash32, b []byte) uint32 {
	h.Write(b)
	return h.Sum32()
}

func sum64(h hash64, b []byte) uint64 {
	h.Write(b)
	return h.Sum64()
}

// TestMurmur3MatchesLibrary compares hashMurmur3 with murmur3's hash.Hash32
// (its Sum32 shortcut trips checkptr under -race) for every length 0..64.
func TestMurmur3MatchesLibrary(t *testing.T) {
	gen := lcg(3)
	for n := range 65 {
		for range 20 {
			key := make([]byte, n)
			for i := range key {
				key[i] = byte(gen.next())
			}
			ref := murmur3.New32()
			ref.Write(key)
			if got, want := hashMurmur3(key), ref.Sum32(); got != want {
				t.Fatalf("murmur3(%x) = %#x, library %#x", key, got, want)
			}
		}
	}
}
