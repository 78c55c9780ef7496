package testserver

import (
	"os"
	"slices"
	"strconv"
	"testing"

	"shardproxy/internal/proc"
)

// StartMemcached starts `memcached -p PORT -l 127.0.0.1 -U 0` followed by
// args on a free port and returns once it answers "version". When the tests
// run as root it adds "-u root" (memcached refuses root otherwise) unless args
// choose a user. The server is stopped when the test ends.
func StartMemcached(t testing.TB, args ...string) *Server {
	t.Helper()
	return start(t, spec{
		name: "memcached",
		prepare: func(port int) ([]string, string) {
			argv := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0"}
			if os.Geteuid() == 0 && !slices.Contains(args, "-u") && !slices.Contains(args, "--user") {
				argv = append(argv, "-u", "root")
			}
			return append(argv, args...), loopback(port)
		},
		ready: proc.MemcachedReady,
	})
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
