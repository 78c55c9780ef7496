package sharding

// FNV parameters. twemproxy's fnv1a_64 uses only the low 32 bits of the
// 64-bit offset basis and prime.
const (
	fnv32Offset = 2166136261
	fnv32Prime  = 16777619
	fnv64Offset = 0xcbf29ce484222325
	fnv64Prime  = 0x100000001b3
)

// hashFNV1_64 is twemproxy's "fnv1_64": FNV-1 64-bit (multiply, then xor a
// sign-extended byte), truncated to the low 32 bits.
func hashFNV1_64(key []byte) uint32 {
	var h uint64 = fnv64Offset
	for _, b := range key {
		h *= fnv64Prime
		h ^= uint64(int64(int8(b)))
	}
	return uint32(h)
}

// hashFNV1a64 is twemproxy's "fnv1a_64", its default hash: FNV-1a computed
// in 32-bit arithmetic with the low halves of the 64-bit offset basis
// (0x84222325) and prime (0x1b3), over sign-extended bytes.
func hashFNV1a64(key []byte) uint32 {
	var h uint32 = fnv64Offset & 0xffffffff
	for _, b := range key {
		h ^= signed(b)
		h *= fnv64Prime & 0xffffffff
	}
	return h
}

// hashFNV1_32 is twemproxy's "fnv1_32": FNV-1 32-bit over sign-extended bytes.
func hashFNV1_32(key []byte) uint32 {
	var h uint32 = fnv32Offset
	for _, b := range key {
		h *= fnv32Prime
		h ^= signed(b)
	}
	return h
}

// hashFNV1a32 is twemproxy's "fnv1a_32": FNV-1a 32-bit over sign-extended
// bytes.
func hashFNV1a32(key []byte) uint32 {
	var h uint32 = fnv32Offset
	for _, b := range key {
		h ^= signed(b)
		h *= fnv32Prime
	}
	return h
}
