package sharding

// Test-only helpers that run real memcached and nutcracker processes on free
// loopback ports. They take their ports from internal/testserver, which
// keeps the ports of parallel test processes apart, and start the servers
// themselves: placement needs memcached on port 11211 of other loopback
// addresses, on unix sockets, and one nutcracker with many pools.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// memcachedServer is one running memcached.
type memcachedServer struct {
	network string // "tcp" or "unix"
	addr    string // host:port or socket path
	host    string
	port    int
	proc    *process
}

// twemproxyName is the node name twemproxy derives from an unnamed servers
// line for this server: host for port 11211, host:port otherwise, and the
// socket path plus ":" for a unix socket.
func (m memcachedServer) twemproxyName() string {
	switch {
	case m.network == "unix":
		return m.addr + ":"
	case m.port == 11211:
		return m.host
	}
	return m.addr
}

// freePorts returns n distinct loopback TCP ports that are free now and
// that no other test process of this repository holds (see
// testserver.FreePort): `go test ./...` runs packages at once, and a port
// chosen here must not be chosen by another package's server meanwhile.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = testserver.FreePort(t)
	}
	return ports
}

// process is a running test server.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it exits
}

// stop kills the process and waits for it to exit.
func (p *process) stop() {
	p.cmd.Process.Kill()
	<-p.exited
}

// startProcess starts a program, stops it when the test ends and logs its
// output if the test failed.
func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	var out syncBuffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s %v output:\n%s", name, args, out.String())
		}
	})
	return p
}

// syncBuffer is a bytes.Buffer safe for the writer goroutines of exec.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitDial polls until network/addr accepts a connection, failing early if
// the process serving it exits.
func waitDial(t *testing.T, exited <-chan struct{}, network, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout(network, addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("the process that should serve %s %s exited", network, addr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s never accepted connections: %v", network, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var memcachedArgs = []string{"-U", "0", "-t", "1", "-m", "64", "-c", "256", "-u", "root"}

// startMemcachedTCP starts memcached on host:port.
func startMemcachedTCP(t *testing.T, host string, port int) memcachedServer {
	t.Helper()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	p := startProcess(t, "memcached", append(memcachedArgs, "-l", host, "-p", strconv.Itoa(port))...)
	waitDial(t, p.exited, "tcp", addr)
	return memcachedServer{network: "tcp", addr: addr, host: host, port: port, proc: p}
}

// startMemcachedUnix starts memcached on a unix socket at path.
func startMemcachedUnix(t *testing.T, path string) memcachedServer {
	t.Helper()
	p := startProcess(t, "memcached", append(memcachedArgs, "-s", path)...)
	waitDial(t, p.exited, "unix", path)
	return memcachedServer{network: "unix", addr: path, proc: p}
}

// port11211Hosts returns n loopback addresses (127.0.0.x) whose port 11211 is
// free now, so that memcached can take it: twemproxy names such servers by
// host alone.
func port11211Hosts(t *testing.T, n, from, to int) []string {
	t.Helper()
	var hosts []string
	for x := from; x < to && len(hosts) < n; x++ {
		host := fmt.Sprintf("127.0.0.%d", x)
		l, err := net.Listen("tcp", host+":11211")
		if err != nil {
			continue
		}
		l.Close()
		hosts = append(hosts, host)
	}
	if len(hosts) < n {
		t.Fatalf("found only %d loopback addresses with port 11211 free", len(hosts))
	}
	return hosts
}

// shortTempDir returns a short directory for unix sockets (sun_path is 108
// bytes) removed when the test ends.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startNutcracker writes conf and runs nutcracker on it (stats on statsPort),
// waiting until every listen address accepts connections.
func startNutcracker(t *testing.T, conf string, statsPort int, listens []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nutcracker.yml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nutcracker", "-t", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("nutcracker -t: %v\n%s\nconfiguration:\n%s", err, out, conf)
	}
	p := startProcess(t, "nutcracker", "-c", path, "-s", strconv.Itoa(statsPort), "-a", "127.0.0.1", "-v", "4")
	for _, l := range listens {
		waitDial(t, p.exited, "tcp", l)
	}
}

// mcSetAll stores every key with value through the memcached text protocol
// on addr, pipelined, and checks each reply is STORED.
func mcSetAll(ctx context.Context, network, addr string, keys [][]byte, value string) error {
	c, err := dialCtx(ctx, network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	werr := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		for _, k := range keys {
			fmt.Fprintf(w, "set %s 0 0 %d\r\n%s\r\n", k, len(value), value)
		}
		werr <- w.Flush()
	}()
	r := bufio.NewReader(c)
	for i, k := range keys {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reply %d of %d: %w", i, len(keys), err)
		}
		if line != "STORED\r\n" {
			return fmt.Errorf("set %x: %q", k, line)
		}
	}
	return <-werr
}

// keySet is a list of keys with what mcHolding needs, prepared once.
type keySet struct {
	keys    [][]byte
	index   map[string]int // key -> position in keys
	getReq  []byte         // pipelined multi-gets for every key
	batches int            // number of get lines in getReq
}

func newKeySet(keys [][]byte) *keySet {
	ks := &keySet{keys: keys, index: make(map[string]int, len(keys))}
	for i, k := range keys {
		ks.index[string(k)] = i
	}
	var req bytes.Buffer
	for i := 0; i < len(keys); {
		req.WriteString("get")
		for n := 0; i < len(keys) && n < 2000; i++ {
			req.WriteByte(' ')
			req.Write(keys[i])
			n += len(keys[i]) + 1
		}
		req.WriteString("\r\n")
		ks.batches++
	}
	ks.getReq = req.Bytes()
	return ks
}

// mcHolding asks the memcached at addr for every key (pipelined multi-gets)
// and returns the indices of the keys it holds with value.
func mcHolding(ctx context.Context, network, addr string, ks *keySet, value string) ([]int, error) {
	c, err := dialCtx(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	werr := make(chan error, 1)
	go func() { _, err := c.Write(ks.getReq); werr <- err }()
	var held []int
	r := bufio.NewReaderSize(c, 64<<10)
	data := make([]byte, 0, 64)
	for batches := ks.batches; batches > 0; {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		if string(line) == "END\r\n" {
			batches--
			continue
		}
		f := bytes.Fields(line)
		if len(f) != 4 || string(f[0]) != "VALUE" {
			return nil, fmt.Errorf("unexpected reply %q", line)
		}
		i, ok := ks.index[string(f[1])]
		if !ok {
			return nil, fmt.Errorf("reply for unknown key %x", f[1])
		}
		n, err := strconv.Atoi(string(f[3]))
		if err != nil {
			return nil, err
		}
		data = slices.Grow(data[:0], n+2)[:n+2]
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, err
		}
		if string(data[:n]) == value {
			held = append(held, i)
		}
	}
	return held, <-werr
}

func dialCtx(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	return c, nil
}
