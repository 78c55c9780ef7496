package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to answer after start.
	readyTimeout = 15 * time.Second
	// pollInterval is the pause between readiness probes.
	pollInterval = 20 * time.Millisecond
	// stopTimeout is how long a stopped server has to exit after SIGTERM.
	stopTimeout = 5 * time.Second
)

// proc is one server process the harness started. Its output goes to a log
// file in the run's work directory.
type proc struct {
	name string // for messages: "memcached 127.0.0.1:40001"
	addr string // where clients connect
	cmd  *exec.Cmd
	log  string // path of the output file
	done chan struct{}
	err  error // cmd.Wait's result, valid once done is closed
}

// startProc runs path with args, logging to logPath, and waits until ready
// returns nil, the process exits, or readyTimeout passes.
func startProc(name, addr, path string, args []string, logPath string, ready func(addr string) error) (*proc, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, addr: addr, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ready(addr)
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before it was ready (%v): %s", name, p.err, p.tail(6))
		default:
		}
		if err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s did not answer within %v: %v: %s", name, readyTimeout, err, p.tail(6))
		}
		time.Sleep(pollInterval)
	}
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// alive reports whether the process still runs.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, then SIGKILL after stopTimeout, and waits for the exit.
func (p *proc) stop() {
	if p == nil || !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last n lines of the process's output, on one line.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// status returns a field of /proc/PID/status in KiB ("VmRSS", "VmHWM").
func (p *proc) status(field string) (int64, error) {
	return procStatus(p.pid(), field)
}

// procStatus returns a KiB field of /proc/PID/status.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatus(bufio.NewScanner(f), field)
}

// parseStatus finds "FIELD:   1234 kB" in /proc/PID/status lines.
func parseStatus(sc *bufio.Scanner, field string) (int64, error) {
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: bad %s line %q", field, sc.Text())
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("proc status: no %s", field)
}

// openFDs returns how many file descriptors process pid has open.
func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents), err
}

// ports hands out free loopback TCP ports, never the same one twice.
type ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// next returns a port nothing listened on a moment ago.
func (ps *ports) next() (int, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.used == nil {
		ps.used = make(map[int]bool)
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !ps.used[port] {
			ps.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port after 100 tries")
}

// lookPath finds a server binary in PATH or in the sbin directories Debian
// installs daemons to (nutcracker lives in /usr/sbin).
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or /usr/sbin; install it: make deps "+
		"(apt-get install memcached redis-server redis-tools nutcracker)", name)
}

// probe sends req to addr and checks that the reply starts with one of
// wants.
func probe(addr, req string, wants ...string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if req == "" {
		return nil
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	for _, w := range wants {
		if strings.HasPrefix(line, w) {
			return nil
		}
	}
	return fmt.Errorf("reply %q to %q", strings.TrimSpace(line), strings.TrimSpace(req))
}

// memcachedReady and redisReady probe a server; acceptsTCP only connects
// (nutcracker does not answer "version").
func memcachedReady(addr string) error { return probe(addr, "version\r\n", "VERSION ") }
func redisReady(addr string) error     { return probe(addr, "PING\r\n", "+PONG") }
func acceptsTCP(addr string) error     { return probe(addr, "") }

// raiseFileLimit raises this process's RLIMIT_NOFILE soft limit to the hard
// limit and returns it. Children (servers, shardbench) inherit it: Go only
// restores the original limit in children when the program did not set it
// itself.
func raiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}
