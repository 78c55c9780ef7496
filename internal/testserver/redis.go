package testserver

import (
	"strconv"
	"testing"

	"shardproxy/internal/proc"
)

// StartRedis starts `redis-server --port PORT --bind 127.0.0.1 --save ""
// --appendonly no` followed by args on a free port and returns once it
// answers PING (a "-NOAUTH" reply counts, for servers started with
// --requirepass). Its working directory (--dir) is a fresh t.TempDir that
// survives Restart, so a restarted cluster node keeps its nodes.conf. Later
// args override earlier ones. The server is stopped when the test ends.
func StartRedis(t testing.TB, args ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	return start(t, spec{
		name: "redis-server",
		prepare: func(port int) ([]string, string) {
			argv := []string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no",
				"--dir", dir, "--daemonize", "no",
			}
			return append(argv, args...), loopback(port)
		},
		ready: proc.RedisReady,
	})
}
