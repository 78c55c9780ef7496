package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to answer after start;
	// generous because CI runs every package at once under -race.
	readyTimeout = 15 * time.Second
	// pollInterval is the pause between two readiness probes.
	pollInterval = 20 * time.Millisecond
	// probeTimeout bounds one readiness probe's dial, write and read.
	probeTimeout = time.Second
	// startTries is how often a Start function picks a new port when another
	// process took the one it chose.
	startTries = 3
	// failureOutput is how much of the server's output a failure shows.
	failureOutput = 4 << 10
	// cleanupOutput is how much of each server's output a failed test logs.
	cleanupOutput = 2 << 10
)

// installHint tells how to get every server binary this package runs.
const installHint = "install it: apt-get install memcached redis-server nutcracker (or run make deps)"

// errAddrInUse marks a server that exited because its port was taken.
var errAddrInUse = errors.New("testserver: address already in use")

// Server is one running (or stopped) server process owned by a test.
type Server struct {
	// Addr is the address clients dial, "127.0.0.1:PORT".
	Addr string
	// Port is Addr's port. It stays the server's across Stop and Restart.
	Port int

	t     testing.TB
	name  string // binary name, for messages
	path  string // resolved binary
	args  []string
	ready func(addr string) error
	out   *tail

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of a server binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, valid once done is closed
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
		s := &Server{Addr: addr, Port: addrPort(addr), t: t, name: sp.name, path: path,
			args: args, ready: sp.ready, out: &tail{}}
		err := s.launch()
		if err == nil {
			t.Cleanup(s.cleanup)
			return s
		}
		if errors.Is(err, errAddrInUse) && try < startTries {
			continue
		}
		t.Fatalf("testserver: start %s: %v", s.describe(), err)
		return nil
	}
}

// lookBinary finds name in PATH or in the sbin directories Debian installs
// daemons to (nutcracker lives in /usr/sbin, often missing from a user's PATH).
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("testserver: %s not found in PATH or /usr/sbin; %s", name, installHint)
	return ""
}

// launch starts the process and waits until it answers or fails.
func (s *Server) launch() error {
	cmd := exec.Command(s.path, s.args...)
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := s.waitReady(p); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// waitReady polls the server until it answers, exits, or readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := s.ready(s.Addr)
		select {
		case <-p.done: // answered or not, a server that exited is not ready
			return s.exitError(p)
		default:
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %v\n%s", readyTimeout, err, s.output())
		}
		select {
		case <-p.done:
			return s.exitError(p)
		case <-time.After(pollInterval):
		}
	}
}

// exitError describes a process that exited before it became ready.
func (s *Server) exitError(p *process) error {
	out := s.out.last(failureOutput)
	err := fmt.Errorf("exited before it was ready (%v)\n%s", p.err, s.output())
	if strings.Contains(strings.ToLower(out), "address already in use") {
		return fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	return err
}

// Stop kills the server and waits for it to exit. It is idempotent, and the
// server keeps its port for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Restart stops the server if it runs and starts it again on the same port
// with the same arguments (and, for Redis, the same data directory), then
// waits until it answers. It fails the test when the server does not come
// back.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	_, _ = fmt.Fprintf(s.out, "--- testserver: restart ---\n")
	if err := s.launch(); err != nil {
		s.t.Fatalf("testserver: restart %s: %v", s.describe(), err)
	}
}

// Pid returns the server's process id, or 0 when it is stopped or has exited.
func (s *Server) Pid() int {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Output returns the last 64 KiB the server printed on stdout and stderr,
// across restarts.
func (s *Server) Output() string { return s.out.last(outputLimit) }

// cleanup stops the server at the end of its test and, when the test failed,
// logs what the server printed.
func (s *Server) cleanup() {
	s.Stop()
	if s.t.Failed() {
		s.t.Logf("testserver: %s output:\n%s", s.describe(), s.out.last(cleanupOutput))
	}
}

func (s *Server) describe() string {
	return fmt.Sprintf("%s on %s (%s %s)", s.name, s.Addr, s.path, strings.Join(s.args, " "))
}

func (s *Server) output() string {
	return "--- " + s.name + " output ---\n" + s.out.last(failureOutput)
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
