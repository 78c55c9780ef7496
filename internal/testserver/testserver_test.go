package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// roundTrip sends request to addr and reads lines until what it read ends
// with until, and returns what it read.
func roundTrip(t *testing.T, addr, request, until string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatalf("write %s: %v", addr, err)
	}
	var got strings.Builder
	r := bufio.NewReader(conn)
	for !strings.HasSuffix(got.String(), until) {
		line, err := r.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			t.Fatalf("read %s after %q: %v", addr, got.String(), err)
		}
	}
	return got.String()
}

func TestMemcachedStopRestart(t *testing.T) {
	s := StartMemcached(t, "-m", "16")
	if got := roundTrip(t, s.Addr, "set k 0 0 1\r\nv\r\n", "\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: got %q", got)
	}
	pid := s.Pid()
	if pid == 0 {
		t.Fatal("Pid of a running server is 0")
	}
	s.Stop()
	s.Stop() // idempotent
	if s.Pid() != 0 {
		t.Fatal("Pid of a stopped server is not 0")
	}
	if _, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		t.Fatal("stopped server still accepts connections")
	}
	port := s.Port
	s.Restart()
	if s.Port != port || s.Pid() == 0 || s.Pid() == pid {
		t.Fatalf("after Restart: port %d (was %d), pid %d (was %d)", s.Port, port, s.Pid(), pid)
	}
	if got := roundTrip(t, s.Addr, "get k\r\n", "END\r\n"); got != "END\r\n" {
		t.Fatalf("get after restart: got %q, want a miss", got)
	}
}

func TestRedisStopRestart(t *testing.T) {
	s := StartRedis(t, "--maxmemory", "16mb")
	if got := roundTrip(t, s.Addr, "SET k v\r\n", "\r\n"); got != "+OK\r\n" {
		t.Fatalf("SET: got %q", got)
	}
	s.Stop()
	s.Restart()
	if got := roundTrip(t, s.Addr, "GET k\r\n", "\r\n"); got != "$-1\r\n" {
		t.Fatalf("GET after restart: got %q, want nil (no persistence)", got)
	}
	if !strings.Contains(s.Output(), "redis-server on "+s.Addr+": restart") {
		t.Fatalf("output does not record the restart:\n%s", s.Output())
	}
}

func TestRedisRequirePass(t *testing.T) {
	s := StartRedis(t, "--requirepass", "secret")
	if got := roundTrip(t, s.Addr, "AUTH secret\r\nPING\r\n", "+PONG\r\n"); got != "+OK\r\n+PONG\r\n" {
		t.Fatalf("AUTH, PING: got %q", got)
	}
}

func TestNutcracker(t *testing.T) {
	mc := StartMemcached(t)
	nc, statsAddr := StartNutcracker(t, `
alpha:
  listen: `+ListenPlaceholder+`
  hash: fnv1a_64
  distribution: ketama
  servers:
    - `+mc.Addr+`:1
`)
	if nc.Port == 0 || !strings.HasPrefix(nc.Addr, "127.0.0.1:") {
		t.Fatalf("nutcracker Addr %q Port %d", nc.Addr, nc.Port)
	}
	if got := roundTrip(t, nc.Addr, "set k 0 0 1\r\nv\r\nget k\r\n", "END\r\n"); got != "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n" {
		t.Fatalf("set, get through nutcracker: got %q", got)
	}
	if got := roundTrip(t, mc.Addr, "get k\r\n", "END\r\n"); got != "VALUE k 0 1\r\nv\r\nEND\r\n" {
		t.Fatalf("get on the backend: got %q", got)
	}
	if err := nutcrackerStats(statsAddr); err != nil {
		t.Fatal(err)
	}
	nc.Restart()
	if got := roundTrip(t, nc.Addr, "get k\r\n", "END\r\n"); got != "VALUE k 0 1\r\nv\r\nEND\r\n" {
		t.Fatalf("get after nutcracker restart: got %q", got)
	}
}

func TestRedisCluster(t *testing.T) {
	c := StartRedisCluster(t, 3, 1)
	if len(c.Masters) != 3 || len(c.Replicas) != 3 || len(c.Addrs()) != 6 {
		t.Fatalf("cluster has %d masters, %d replicas, %d addrs", len(c.Masters), len(c.Replicas), len(c.Addrs()))
	}
	// Slot 0 is on the first master; "foo" hashes to slot 12182, the third's.
	if got := roundTrip(t, c.Masters[2].Addr, "SET foo bar\r\n", "\r\n"); got != "+OK\r\n" {
		t.Fatalf("SET foo on its master: got %q", got)
	}
	got := roundTrip(t, c.Masters[0].Addr, "GET foo\r\n", "\r\n")
	if want := "-MOVED 12182 " + c.Masters[2].Addr + "\r\n"; got != want {
		t.Fatalf("GET foo on another master: got %q, want %q", got, want)
	}
	for _, r := range c.Replicas {
		info, err := RedisDo(r.Addr, "INFO", "replication")
		// Synced at once: a replica that is not may refuse to fail over.
		if err != nil || !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") {
			t.Fatalf("replica %s: INFO replication: %q, %v", r.Addr, info, err)
		}
	}
}

// fatalTB records the message of a Fatalf and stops the helper by panicking,
// so a test can check how a helper fails.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// fatalMessage runs fn and returns the message it failed with, or "".
func fatalMessage(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		fn(f)
	}()
	return f.msg
}

func TestStartFailures(t *testing.T) {
	busy := StartMemcached(t)
	tests := []struct {
		name string
		fn   func(tb testing.TB)
		want []string
	}{
		{"missing binary", func(tb testing.TB) { lookBinary(tb, "no-such-cache-server") },
			[]string{"no-such-cache-server not found", "apt-get install memcached redis-server", "make deps"}},
		{"bad flag", func(tb testing.TB) { StartMemcached(tb, "--no-such-flag") },
			[]string{"exited before it was ready", "memcached output", "no-such-flag"}},
		{"port taken", func(tb testing.TB) { StartRedis(tb, "--port", fmt.Sprint(busy.Port)) },
			[]string{"address already in use", "redis-server output"}},
		{"bad yaml", func(tb testing.TB) { StartNutcracker(tb, "alpha:\n  listen: {{LISTEN}}\n  bogus: 1\n") },
			[]string{"exited before it was ready", "nutcracker output", "syntax is invalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := fatalMessage(t, tt.fn)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("failure message lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}
