// Package examples_test runs every example of examples/ as a user would:
// through scripts/example.sh, the script `make run EXAMPLE=NAME` runs, with
// real memcached and redis-server. For each it reads the command the script
// prints, checks that its page of docs/ shows the same command, runs it, compares
// the answer, and stops the script as Ctrl-C would, then checks that every
// server it started is gone.
package examples_test

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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/proc"
	"shardproxy/internal/testserver"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// defaultPort is the first of the 20 ports an example's files name
// (22120-22139); scripts/example.sh moves port defaultPort+i to the i-th of
// PORTS.
const defaultPort = 22120

// example is one example and the answer its command must print.
type example struct {
	name string
	page string // the page of docs/ that shows the example's command
	want string
	// check, if set, looks at the servers behind the proxy once the
	// command ran; ports are the example's, defaultPort+i at ports[i].
	check func(t *testing.T, ports []int)
}

var examples = []example{
	{name: "memcached", page: "sharded.md", want: "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n"},
	{name: "redis", page: "redis.md", want: "OK\nv\n", check: func(t *testing.T, ports []int) {
		// k lives on exactly one of the two servers
		n := 0
		for _, p := range ports[1:3] {
			if redisGet(t, p, "k") == "v" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("k is on %d of the 2 redis-server, want 1", n)
		}
	}},
	{name: "redis-cluster", page: "redis-cluster.md", want: "OK\n1\n2\n3\n", check: func(t *testing.T, ports []int) {
		// b, c and a hash to slots 3300, 7365 and 15495: one on each
		// master, in the order redis-cli --cluster create gave them slots
		for i, kv := range [][2]string{{"b", "2"}, {"c", "3"}, {"a", "1"}} {
			if got := redisGet(t, ports[1+i], kv[0]); got != kv[1] {
				t.Errorf("master %d: GET %s = %q, want %q", i, kv[0], got, kv[1])
			}
		}
	}},
	{name: "lua-v1", page: "lua.md", want: "STORED\r\nSTORED\r\nVALUE session/42 0 2\r\nhi\r\nVALUE k 0 1\r\nv\r\nEND\r\n",
		check: sessionsOn(1)},
	{name: "lua-v2", page: "lua.md", want: "HD\r\nHD\r\nVA 2\r\nhi\r\nVA 1\r\nv\r\n", check: sessionsOn(1)},
	{name: "routelib", page: "lua.md", want: "STORED\r\nVALUE session/42 0 2\r\nhi\r\nEND\r\nSTORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n",
		check: sessionsOn(3, 4)},
	{name: "tls", page: "configuration.md", want: "OK\nv\n"},
	{name: "delete-spool", page: "deletes.md", want: "SERVER_ERROR backend failure: connecting\r\n" +
		"STAT delete_spool_spooled 1\r\nSTAT delete_spool_pending 1\r\n"},
	{name: "near-cache", page: "caches.md", want: "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\nVALUE k 0 1\r\n" +
		"STAT near_cache_hits 1\r\nSTAT near_cache_misses 1\r\n"},
	{name: "migrate", page: "migrations.md", want: "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n" +
		"STAT route_fallbacks 1\r\nSTAT route_fallback_hits 1\r\n"},
	{name: "slowlog", page: "observability.md", want: "OK\nv\n1\nEVAL\nOK\nv\nGET\n3\n"},
}

// sessionsOn checks that the key session/42 is on the memcached at each
// of the given indexes of ports, and on no other of the servers 1-4.
func sessionsOn(idx ...int) func(t *testing.T, ports []int) {
	return func(t *testing.T, ports []int) {
		t.Helper()
		for i := 1; i <= 4; i++ {
			want := false
			for _, j := range idx {
				want = want || i == j
			}
			got, err := memcachedHas(ports[i], "session/42")
			if err != nil {
				if want {
					t.Errorf("memcached %d: %v", i, err)
				}
				continue
			}
			if got != want {
				t.Errorf("memcached %d (port %d) has session/42: %v, want %v", i, ports[i], got, want)
			}
		}
	}
}

func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers; not in -short")
	}
	bin := testserver.Shardproxy(t)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			env := []string{}
			if ex.name == "routelib" {
				lib := os.Getenv("SHARDPROXY_ROUTELIB")
				if lib == "" {
					checkRoutelibSkip(t, bin)
					t.Skip("SHARDPROXY_ROUTELIB is not set: set it to memcached's routelib.lua " +
						"(vendor/routelib/routelib.lua in memcached's source), or run make test ROUTELIB=PATH")
				}
				env = append(env, "SHARDPROXY_ROUTELIB="+lib)
			}
			r := start(t, bin, ex.name, env)
			if page := filepath.Join("docs", ex.page); !strings.Contains(readDoc(t, page), r.docCommand()) {
				t.Errorf("%s does not show the command the script printed:\n%s", page, r.docCommand())
			}
			got := r.try(t)
			if got != ex.want {
				t.Errorf("%s\nanswered %q\nwant      %q", r.command, got, ex.want)
			}
			if ex.check != nil {
				ex.check(t, r.ports)
			}
			r.stop(t, true)
		})
	}
}

// TestExampleSIGTERM stops the script alone, as `kill PID` would: it must
// stop the proxy and the servers itself.
func TestExampleSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers; not in -short")
	}
	r := start(t, testserver.Shardproxy(t), "memcached", nil)
	if got, want := r.try(t), examples[0].want; got != want {
		t.Errorf("answered %q, want %q", got, want)
	}
	r.stop(t, false)
}

// TestExampleUnknown lists the examples for a name that is none.
func TestExampleUnknown(t *testing.T) {
	cmd := exec.Command("bash", "scripts/example.sh", "nosuch")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 2 {
		t.Fatalf("exit status %d (%v), want 2\n%s", code, err, out)
	}
	for _, ex := range examples {
		if !bytes.Contains(out, []byte("  "+ex.name+"\n")) {
			t.Errorf("the list does not name %s:\n%s", ex.name, out)
		}
	}
}

// checkRoutelibSkip runs the routelib example without routelib.lua: the
// script must say how to get it and exit 0 having started nothing.
func checkRoutelibSkip(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command("bash", "scripts/example.sh", "routelib")
	cmd.Dir = root
	cmd.Env = append(withoutRoutelib(os.Environ()), "BIN="+bin, "PORTS="+portList(freePorts(t)))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("without routelib.lua: %v\n%s", err, out)
	}
	for _, want := range []string{"skipped:", "vendor/routelib/routelib.lua", "ROUTELIB="} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("without routelib.lua the script does not say %q:\n%s", want, out)
		}
	}
}

func withoutRoutelib(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SHARDPROXY_ROUTELIB=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	testserver.RemoveShardproxy()
	os.Exit(code)
}

// readDoc returns the file at path, relative to the repository root.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freePorts returns 20 free loopback ports for an example, odd ones only:
// since Linux 4.6 connect() takes even ephemeral ports first and leaves
// the odd ones to bind(), so where SHARDPROXY_PORT_RANGE lies in the
// ephemeral range, a busy machine's client sockets hold even ports, which
// a listener then cannot bind.
func freePorts(t *testing.T) []int {
	t.Helper()
	var ports []int
	for len(ports) < 20 {
		p, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p%2 == 1 {
			ports = append(ports, p)
		}
	}
	return ports
}

func portList(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, " ")
}

// run is one running scripts/example.sh.
type run struct {
	name    string
	cmd     *exec.Cmd
	ports   []int
	dir     string // RUN_DIR
	command string // what the script said to run
	out     *testserver.Buffer
	done    chan error
}

// start runs the example until the script prints its command, retrying
// with other ports when one was taken between the choice and the bind.
func start(t *testing.T, bin, name string, env []string) *run {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r, err := tryStart(t, bin, name, env)
		if err == nil {
			return r
		}
		if attempt < 3 && strings.Contains(strings.ToLower(r.out.String()), "address already in use") {
			t.Logf("attempt %d: a port was taken; again with other ports", attempt)
			continue
		}
		t.Fatalf("%s: %v\n%s", name, err, r.out.String())
	}
}

func tryStart(t *testing.T, bin, name string, env []string) (*run, error) {
	t.Helper()
	r := &run{name: name, ports: freePorts(t), dir: filepath.Join(t.TempDir(), "run"),
		out: &testserver.Buffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command("bash", "scripts/example.sh", name)
	r.cmd.Dir = root
	r.cmd.Env = append(os.Environ(), append(env, "BIN="+bin, "PORTS="+portList(r.ports), "RUN_DIR="+r.dir)...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a terminal's job
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	if err := r.cmd.Start(); err != nil {
		return r, err
	}
	t.Cleanup(func() { _ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) })
	go func() { r.done <- r.cmd.Wait(); _ = pw.Close() }()
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		next := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(r.out, line)
			switch {
			case strings.TrimSpace(line) == "Talk to it:":
				next = true
			case next && strings.TrimSpace(line) != "":
				banner <- strings.TrimSpace(line)
				next = false
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case r.command = <-banner:
		return r, nil
	case err := <-r.done:
		time.Sleep(100 * time.Millisecond) // the reader's last lines
		return r, fmt.Errorf("the script exited before its banner: %v", err)
	case <-time.After(90 * time.Second):
		return r, fmt.Errorf("no banner within 90s")
	}
}

// docCommand is the command as the docs show it.
func (r *run) docCommand() string { return r.docForm(r.command) }

// docForm is a command the script printed as the docs show it: default
// ports and the default run directory.
func (r *run) docForm(s string) string {
	s = strings.ReplaceAll(s, r.dir, "/tmp/shardproxy-example-"+r.name+"-"+strconv.Itoa(defaultPort))
	for i, p := range r.ports {
		s = regexp.MustCompile(`\b`+strconv.Itoa(p)+`\b`).ReplaceAllString(s, strconv.Itoa(defaultPort+i))
	}
	return s
}

// try runs the printed command in bash and returns its output.
func (r *run) try(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", r.command)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("%s: %v\n%s\nscript output:\n%s", r.command, err, stderr.String(), r.out.String())
	}
	return string(out)
}

// stop sends SIGINT to the script's process group, as Ctrl-C in a terminal
// does (group true), or SIGTERM to the script alone, and checks that it
// exits 0, that nothing listens on its ports any more and that its run
// directory is gone.
func (r *run) stop(t *testing.T, group bool) {
	t.Helper()
	var err error
	if group {
		err = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
	} else {
		err = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("the script exited with %v\n%s", err, r.out.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("the script did not exit within 45s of the signal\n%s", r.out.String())
	}
	if !strings.Contains(r.out.String(), "stopped the servers started here") {
		t.Errorf("the script did not say it stopped its servers:\n%s", r.out.String())
	}
	for _, p := range r.ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second); err == nil {
			_ = c.Close()
			t.Errorf("127.0.0.1:%d still listens after the script exited", p)
		}
	}
	if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
		t.Errorf("run directory %s is still there (%v)", r.dir, err)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// redisGet asks the redis-server on port for key and returns the value,
// "" for none, or the error line.
func redisGet(t *testing.T, port int, key string) string {
	t.Helper()
	reply := roundTrip(t, port, fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key))
	line, rest, _ := strings.Cut(reply, "\r\n")
	switch {
	case line == "$-1":
		return ""
	case strings.HasPrefix(line, "$"):
		v, _, _ := strings.Cut(rest, "\r\n")
		return v
	}
	return line
}

// memcachedHas reports whether the memcached on port holds key.
func memcachedHas(port int, key string) (bool, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		return false, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "mg "+key+"\r\n"); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return false, err
	}
	switch line {
	case "HD\r\n":
		return true, nil
	case "EN\r\n":
		return false, nil
	}
	return false, fmt.Errorf("mg %s: %q", key, line)
}

// roundTrip sends req to 127.0.0.1:port and returns what one read brings.
func roundTrip(t *testing.T, port int, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}
