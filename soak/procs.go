package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"shardproxy/internal/proc"
)

// fleet is every server process soak started, on internal/proc, the
// supervisor the tests and bench use. Every server's output goes to one
// log file in the run's directory.
type fleet struct {
	dir string // the run's directory: the log, the servers' files

	mu    sync.Mutex
	procs []*proc.Process
}

// start starts the binary path as a server listening on addr and returns
// once ready says it answers; stop stops it with the others.
func (f *fleet) start(name, path string, args []string, addr string, ready func(string) error) (*proc.Process, error) {
	p := proc.New(proc.Config{Name: name, Path: path, Args: args, Addr: addr, Ready: ready,
		LogFile: filepath.Join(f.dir, "servers.log")})
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	return p, p.Start()
}

// memcached starts memcached with 256 MiB on a free port.
func (f *fleet) memcached(name string) (*proc.Process, error) {
	path, err := proc.LookPath("memcached")
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-m", "256"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached refuses root otherwise
	}
	return f.start(name, path, args, loopback(port), proc.MemcachedReady)
}

// redis starts redis-server without persistence on a free port, with its
// own directory.
func (f *fleet) redis(name string) (*proc.Process, error) {
	path, err := proc.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(f.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"}
	return f.start(name, path, args, loopback(port), proc.RedisReady)
}

// stop stops every server, the last started first.
func (f *fleet) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.procs) - 1; i >= 0; i-- {
		f.procs[i].Stop()
	}
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// rssKB returns the resident set of pid in KiB, or -1.
func rssKB(pid int) int64 {
	n, err := proc.Status(pid, "VmRSS")
	if err != nil {
		return -1
	}
	return n
}

// waitListen waits until something accepts connections on addr.
func waitListen(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := proc.AcceptsTCP(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
