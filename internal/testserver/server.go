package testserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"shardproxy/internal/proc"
)

const (
	// pollInterval is the pause between two probes of a forming cluster.
	pollInterval = 20 * time.Millisecond
	// probeTimeout bounds one probe's dial, write and read.
	probeTimeout = time.Second
	// startTries is how often a Start function picks a new port when another
	// process took the one it chose.
	startTries = 3
	// failureOutput is how much of the server's output a failure shows.
	failureOutput = 4 << 10
	// cleanupOutput is how much of each server's output a failed test logs.
	cleanupOutput = 2 << 10
	// outputLimit is how much output proc keeps, all of which Output returns.
	outputLimit = 64 << 10
)

// Server is one running (or stopped) server process owned by a test.
type Server struct {
	// Addr is the address clients dial, "127.0.0.1:PORT".
	Addr string
	// Port is Addr's port. It stays the server's across Stop and Restart.
	Port int

	t testing.TB
	p *proc.Process
}

// spec says how to run one kind of server.
type spec struct {
	name string
	// prepare returns the arguments for a server listening on port and the
	// address clients dial; it may write files the server reads.
	prepare func(port int) (args []string, addr string)
	// ready probes addr once and returns nil when the server answers.
	ready func(addr string) error
}

// start runs sp on a free port, retrying with another port when the chosen
// one was taken meanwhile, and registers the server's Stop with t.Cleanup.
func start(t testing.TB, sp spec) *Server {
	t.Helper()
	if testing.Short() {
		t.Skipf("testserver: -short: skipping test that needs a real %s", sp.name)
	}
	path := lookBinary(t, sp.name)
	for try := 1; ; try++ {
		port := FreePort(t)
		args, addr := sp.prepare(port)
		p := proc.New(proc.Config{Name: sp.name, Path: path, Args: args, Addr: addr, Ready: sp.ready})
		s := &Server{Addr: addr, Port: addrPort(addr), t: t, p: p}
		err := p.Start()
		if err == nil {
			t.Cleanup(s.cleanup)
			return s
		}
		if errors.Is(err, proc.ErrAddrInUse) && try < startTries {
			continue
		}
		t.Fatalf("testserver: %v\n%s", err, s.details())
		return nil
	}
}

// lookBinary finds name in PATH or in the sbin directories Debian installs
// daemons to, or fails the test saying how to install it.
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := proc.LookPath(name)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment
// ago and that no process of this repository has been handed (see
// proc.FreePort). It fails the test when there is none.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return port
}

// Stop kills the server and waits for it to exit. It is idempotent, and the
// server keeps its port for Restart.
func (s *Server) Stop() { s.p.Stop() }

// Restart stops the server if it runs and starts it again on the same port
// with the same arguments (and, for Redis, the same data directory), then
// waits until it answers. It fails the test when the server does not come
// back.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.p.Restart(); err != nil {
		s.t.Fatalf("testserver: restart: %v\n%s", err, s.details())
	}
}

// Pid returns the server's process id, or 0 when it is stopped or has exited.
func (s *Server) Pid() int { return s.p.Pid() }

// Output returns the last 64 KiB the server printed on stdout and stderr,
// across restarts.
func (s *Server) Output() string { return s.p.LastOutput(outputLimit) }

// cleanup stops the server at the end of its test and, when the test failed,
// logs what the server printed.
func (s *Server) cleanup() {
	s.Stop()
	if s.t.Failed() {
		s.t.Logf("testserver: %s (%s) output:\n%s", s.p, s.p.Command(), s.p.LastOutput(cleanupOutput))
	}
}

// details shows the server's command line and last output for a failure.
func (s *Server) details() string {
	return fmt.Sprintf("command: %s\n--- %s output ---\n%s", s.p.Command(), s.p.Name(), s.p.LastOutput(failureOutput))
}

// addrPort returns the port of a "host:port" address, or 0.
func addrPort(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}
