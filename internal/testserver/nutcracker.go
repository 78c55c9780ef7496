package testserver

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/proc"
)

// ListenPlaceholder in a nutcracker YAML is replaced by "127.0.0.1:PORT" with
// a free port; write it as a pool's listen value: `listen: {{LISTEN}}`.
const ListenPlaceholder = "{{LISTEN}}"

// listenLine finds a pool's listen address in a YAML without the placeholder.
var listenLine = regexp.MustCompile(`(?m)^\s+listen:\s*["']?([^"'\s#]+)`)

// StartNutcracker writes yaml to a file in t.TempDir and runs twemproxy's
// nutcracker on it, with its stats on another free port of 127.0.0.1 and a
// 100 ms stats aggregation interval (-i 100) so stats tests need not wait.
// Every ListenPlaceholder in yaml becomes "127.0.0.1:PORT" with one free
// port, which is the returned Server's Addr; without a placeholder, Addr is
// the first listen address in yaml. It returns once nutcracker accepts
// connections on Addr and serves stats on statsAddr, and it logs to the
// captured stderr. The server is stopped when the test ends.
func StartNutcracker(t testing.TB, yaml string) (s *Server, statsAddr string) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nutcracker.yml")
	s = start(t, spec{
		name: "nutcracker",
		prepare: func(port int) ([]string, string) {
			statsPort := FreePort(t)
			statsAddr = loopback(statsPort)
			addr := loopback(port)
			text := strings.ReplaceAll(yaml, ListenPlaceholder, addr)
			if !strings.Contains(yaml, ListenPlaceholder) {
				addr = ""
				if m := listenLine.FindStringSubmatch(yaml); m != nil {
					addr = m[1]
				}
			}
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				t.Fatalf("testserver: write nutcracker config: %v", err)
			}
			return []string{
				"-c", conf, "-s", strconv.Itoa(statsPort), "-a", "127.0.0.1",
				"-i", "100", "-o", "/dev/stderr",
			}, addr
		},
		ready: func(addr string) error {
			if err := nutcrackerStats(statsAddr); err != nil {
				return err
			}
			if addr == "" || strings.HasPrefix(addr, "/") { // no pool, or a unix socket
				return nil
			}
			return proc.AcceptsTCP(addr)
		},
	})
	return s, statsAddr
}

// nutcrackerStats checks that addr serves nutcracker's JSON stats.
func nutcrackerStats(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	if first[0] != '{' {
		return fmt.Errorf("stats: reply starts with %q, want JSON", first)
	}
	return nil
}
