package proxy_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Client suites no one here wrote, run as a user would, through a native
// memcache pool of three real memcached: libmemcached's memccapable (the
// ASCII protocol's conformance checks) and an application session of
// Python's pymemcache (testdata/clients/pymemcache_check.py). Each runs
// under every server_protocol. They run when the tool is installed (make
// deps installs libmemcached-tools and python3-pymemcache).

// lookTool returns the path of a tool, or skips the test with the package
// that brings it.
func lookTool(t *testing.T, name, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: apt-get install %s (make deps)", name, pkg)
	}
	return path
}

// runTool runs a client suite against addr and returns its output; it
// fails the test when the suite does.
func runTool(t *testing.T, timeout time.Duration, path string, args ...string) string {
	t.Helper()
	cmd := exec.Command(path, args...)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(timeout):
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", path, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestMemccapable(t *testing.T) {
	tool := lookTool(t, "memccapable", "libmemcached-tools")
	forServerProtocols(t, func(t *testing.T, extra string) {
		_, yaml := memcachedPool(t, 3, "  timeout: 2000\n"+extra)
		_, addr := startProxy(t, yaml, "mc")
		host, port, _ := strings.Cut(addr, ":")
		out := runTool(t, time.Minute, tool, "-a", "-h", host, "-p", port, "-t", "5")
		if !strings.Contains(out, "All tests passed") || strings.Contains(out, "[fail]") {
			t.Fatalf("memccapable -a:\n%s", out)
		}
		if n := strings.Count(out, "[pass]"); n < 27 {
			t.Errorf("memccapable -a passed %d tests, want every one of at least 27:\n%s", n, out)
		}
	})
}

func TestPymemcache(t *testing.T) {
	python := lookTool(t, "/usr/bin/python3", "python3")
	if err := exec.Command(python, "-c", "import pymemcache").Run(); err != nil {
		t.Skip("pymemcache not installed: apt-get install python3-pymemcache (make deps)")
	}
	forServerProtocols(t, func(t *testing.T, extra string) {
		_, yaml := memcachedPool(t, 3, "  timeout: 2000\n"+extra)
		_, addr := startProxy(t, yaml, "mc")
		host, port, _ := strings.Cut(addr, ":")
		if _, err := strconv.Atoi(port); err != nil {
			t.Fatalf("proxy address %q", addr)
		}
		out := runTool(t, time.Minute, python, "testdata/clients/pymemcache_check.py", host, port)
		if strings.Contains(out, "FAIL") || strings.Count(out, "ok ") < 40 {
			t.Fatalf("pymemcache session:\n%s", out)
		}
	})
}
