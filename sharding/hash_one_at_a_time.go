package sharding

// hashOneAtATime is Bob Jenkins' one-at-a-time hash as twemproxy computes it:
// each byte is added sign-extended (twemproxy reads a signed char).
func hashOneAtATime(key []byte) uint32 {
	var v uint32
	for _, b := range key {
		v += signed(b)
		v += v << 10
		v ^= v >> 6
	}
	v += v << 3
	v ^= v >> 11
	v += v << 15
	return v
}
