package sharding

import (
	"flag"
	"os/exec"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (needs nutcracker, memcached and gdb)")

// requireBinary fails the test, never skips it, when a program is missing.
func requireBinary(t *testing.T, name, hint string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (%v); install it: %s", name, err, hint)
	}
	return path
}

// twemproxyHashes are the hash names nutcracker 0.5.0 knows.
var twemproxyHashes = []string{
	"one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64",
	"fnv1a_64", "fnv1_32", "fnv1a_32", "hsieh", "murmur", "jenkins",
}

// lcg is a tiny deterministic generator for test inputs, so golden files stay
// reproducible without depending on math/rand's stream.
type lcg uint64

func (l *lcg) next() uint64 {
	*l = *l*6364136223846793005 + 1442695040888963407
	x := uint64(*l)
	return x ^ x>>29
}

func (l *lcg) intn(n int) int { return int(l.next() % uint64(n)) }
