package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

func TestFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "This is shardproxy-") {
		t.Fatalf("--version: code %d, out %q, err %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"-d"}, &out, &errb); code != 2 {
		t.Fatalf("-d: code %d, want 2", code)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	os.WriteFile(good, []byte("alpha:\n  listen: 127.0.0.1:22199\n  servers:\n    - 127.0.0.1:11211:1\n"), 0o644)
	out.Reset()
	if code := run([]string{"-t", "-c", good}, &out, &errb); code != 0 || !strings.Contains(out.String(), "syntax is ok") {
		t.Fatalf("-t good: code %d, out %q, err %q", code, out.String(), errb.String())
	}
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("alpha:\n  listen: 127.0.0.1:22199\n  hash: nope\n  servers:\n    - 127.0.0.1:11211:1\n"), 0o644)
	errb.Reset()
	if code := run([]string{"-t", "-c", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "hash") || !strings.Contains(errb.String(), "bad.yml:3") {
		t.Fatalf("-t bad: code %d, err %q", code, errb.String())
	}
}

// TestGracefulShutdown runs the real binary, sends SIGTERM while a request is
// in flight and checks that the request is answered and the exit code is 0.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	bin := testserver.Shardproxy(t)
	// A backend that answers the handshake, then replies to one request
	// only after a delay, so the request is in flight at SIGTERM.
	be := testserver.NewMock(t, func(string) string {
		time.Sleep(500 * time.Millisecond)
		return "END\r\n"
	})
	port := testserver.FreePort(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	os.WriteFile(conf, []byte(fmt.Sprintf("alpha:\n  listen: 127.0.0.1:%d\n  timeout: 5000\n  servers:\n    - %s:1\n", port, be.Addr)), 0o644)
	cmd := exec.Command(bin, "-c", conf, "-a", "127.0.0.1", "-s", strconv.Itoa(testserver.FreePort(t)), "--admin", "127.0.0.1:0")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var (
		nc  net.Conn
		err error
	)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if nc, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not listen: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer nc.Close()
	nc.Write([]byte("get slow\r\n"))
	time.Sleep(100 * time.Millisecond) // let the request reach the backend
	cmd.Process.Signal(syscall.SIGTERM)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil || reply != "END\r\n" {
		t.Fatalf("in-flight request: %q, %v", reply, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("no shutdown log:\n%s", logs.String())
	}
}
