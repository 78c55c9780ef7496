package config

import (
	"math"
	"strconv"
	"strings"
)

// maxInt32 bounds twemproxy's numbers, which are C ints.
const maxInt32 = math.MaxInt32

// hashes are the accepted values of the hash key: twemproxy's twelve, then
// the shardproxy extensions.
var hashes = []string{
	"one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64", "fnv1a_64",
	"fnv1_32", "fnv1a_32", "hsieh", "murmur", "jenkins",
	"xxhash", "murmur3", "xxh3",
}

// seededHashes are the hashes that take hash_seed.
var seededHashes = []string{"xxhash", "murmur3", "xxh3"}

// distributions are the accepted values of the distribution key:
// twemproxy's three, then the shardproxy extensions.
var distributions = []string{"ketama", "modula", "random", "jump", "ring"}

// parseDecimal accepts what twemproxy's nc_atoi accepts, decimal digits only
// (no sign, no spaces, leading zeros allowed), within [min, max].
func parseDecimal(s string, min, max int) (int, bool) {
	if !allDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil || n < uint64(min) || n > uint64(max) {
		return 0, false
	}
	return int(n), true
}

// parseSeed accepts a uint64 in decimal or with a 0x prefix in hex.
func parseSeed(s string) (uint64, bool) {
	base := 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, base = h, 16
	}
	if s == "" || strings.ContainsAny(s, "+-_") {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
