package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// child is one process soak started; stop kills it and waits.
type child struct {
	name string
	argv []string
	addr string // what it listens on, for readiness
	mu   sync.Mutex
	cmd  *exec.Cmd
}

var (
	childrenMu sync.Mutex
	children   []*child
)

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func newChild(name, addr string, argv ...string) *child {
	c := &child{name: name, argv: argv, addr: addr}
	childrenMu.Lock()
	children = append(children, c)
	childrenMu.Unlock()
	return c
}

// start runs the process and waits until addr accepts connections.
func (c *child) start(log *os.File) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	c.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", c.addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not listening on %s after 10s", c.name, c.addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

func (c *child) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	c.cmd = nil
}

func stopAll() {
	childrenMu.Lock()
	defer childrenMu.Unlock()
	for i := len(children) - 1; i >= 0; i-- {
		children[i].stop()
	}
}

func memcachedArgv(port int) []string {
	argv := []string{"memcached", "-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-m", "256"}
	if os.Geteuid() == 0 {
		argv = append(argv, "-u", "root")
	}
	return argv
}

func redisArgv(port int, dir string) []string {
	return []string{"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"}
}

// rssKB reads VmRSS of pid in kB.
func rssKB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

func dialQuick(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, time.Second)
}
