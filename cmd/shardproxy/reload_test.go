package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testserver.RemoveShardproxy()
	os.Exit(code)
}

// startProxy starts the binary with args, its log kept for the test; the
// process is killed when the test ends. fail stops the test with the log.
func startProxy(t *testing.T, bin string, args ...string) (cmd *exec.Cmd, logs *testserver.Buffer, fail func(string, ...any)) {
	t.Helper()
	cmd = exec.Command(bin, args...)
	logs = &testserver.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	fail = func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n--- shardproxy log ---\n%s", append(args, logs.String())...)
	}
	return cmd, logs, fail
}

// loopback returns a free 127.0.0.1 address.
func loopback(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
}

// proxyConf is a one-pool config over backend with the admin section's
// addresses.
func proxyConf(listen, backend, timeout, adminAddr, statsAddr string) string {
	return fmt.Sprintf("mc:\n  listen: %s\n  timeout: %s\n  servers:\n    - %s:1\n"+
		"shardproxy:\n  admin_listen: %s\n  stats_listen: %s\n", listen, timeout, backend, adminAddr, statsAddr)
}

// TestReload runs the binary and reloads it by SIGHUP and by POST /reload:
// the config's checksum changes, traffic keeps flowing, the admin and stats
// ports move (new one serves, old one refuses), and an invalid file is
// refused with the old config kept.
func TestReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	bin := testserver.Shardproxy(t)
	mc := testserver.StartMemcached(t)
	listen, admin1, stats1 := loopback(t), loopback(t), loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(proxyConf(listen, mc.Addr, "1000", admin1, stats1))
	cmd, logs, fail := startProxy(t, bin, "-c", conf, "-i", "100", "-s", "0", "--admin", "")

	waitFor(t, fail, "admin on "+admin1, func() bool { _, err := checksum(admin1); return err == nil })
	first, _ := checksum(admin1)
	if st := stats(t, fail, stats1); st["service"] != "nutcracker" {
		fail("stats on %s: %v", stats1, st)
	}
	roundTrip(t, fail, listen, "a")

	// SIGHUP: a new timeout and both admin ports moved.
	admin2, stats2 := loopback(t), loopback(t)
	write(proxyConf(listen, mc.Addr, "2000", admin2, stats2))
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, fail, "admin on "+admin2, func() bool { _, err := checksum(admin2); return err == nil })
	second, _ := checksum(admin2)
	if second == first {
		fail("checksum unchanged after SIGHUP: %s", second)
	}
	refused(t, fail, admin1)
	stats(t, fail, stats2)
	refused(t, fail, stats1)
	roundTrip(t, fail, listen, "b")

	// POST /reload with an invalid file: refused, nothing changes.
	write("mc:\n  listen: " + listen + "\n  hash: nope\n  servers:\n    - " + mc.Addr + ":1\n")
	code, body := postReload(t, fail, admin2)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "hash") {
		fail("invalid file: %d %s", code, body)
	}
	if got, err := checksum(admin2); err != nil || got != second {
		fail("after a refused reload: checksum %s, %v; want %s", got, err, second)
	}

	// POST /reload that moves the admin port it is asked on: the reply
	// still arrives, then the new port serves and the old one refuses.
	admin3 := loopback(t)
	write(proxyConf(listen, mc.Addr, "3000", admin3, stats2))
	code, body = postReload(t, fail, admin2)
	var reply struct {
		OK       bool
		Checksum string
	}
	if json.Unmarshal([]byte(body), &reply); code != http.StatusOK || !reply.OK {
		fail("moving reload: %d %s", code, body)
	}
	if got, err := checksum(admin3); err != nil || got != reply.Checksum || got == second {
		fail("admin on %s: checksum %s, %v; want %s, not %s", admin3, got, err, reply.Checksum, second)
	}
	refused(t, fail, admin2)
	roundTrip(t, fail, listen, "c")

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		fail("exit: %v", err)
	}
	for _, want := range []string{`msg="reload done" trigger=sighup`, `msg="reload done" trigger=http`,
		`msg="reload refused"`, `msg="admin moved"`, `msg="stats moved"`} {
		if !strings.Contains(logs.String(), want) {
			fail("no %s in the log", want)
		}
	}
}

// TestAdminBusyAtStart: an admin address that cannot be bound stops the
// start, as nutcracker does for its stats port.
func TestAdminBusyAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary")
	}
	bin := testserver.Shardproxy(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	conf := filepath.Join(t.TempDir(), "conf.yml")
	os.WriteFile(conf, []byte("mc:\n  listen: "+loopback(t)+"\n  servers:\n    - 127.0.0.1:11211:1\n"), 0o644)
	cmd := exec.Command(bin, "-c", conf, "-a", "127.0.0.1", "-s", "0", "--admin", busy.Addr().String())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "cannot start admin") {
		t.Fatalf("busy admin address: %v\n%s", err, out)
	}
}

func TestDescribeStats(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-D"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "server_ejected_at") {
		t.Fatalf("-D: code %d, out %q, err %q", code, out.String(), errb.String())
	}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, fail func(string, ...any), what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			fail("timed out waiting for %s", what)
		}
	}
}

var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// checksum returns the running config's checksum from GET /config.
func checksum(addr string) (string, error) {
	resp, err := client.Get("http://" + addr + "/config")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /config: %s", resp.Status)
	}
	return resp.Header.Get("X-Shardproxy-Config-Checksum"), nil
}

func postReload(t *testing.T, fail func(string, ...any), addr string) (int, string) {
	t.Helper()
	resp, err := client.Post("http://"+addr+"/reload", "", nil)
	if err != nil {
		fail("POST /reload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stats reads the stats port.
func stats(t *testing.T, fail func(string, ...any), addr string) map[string]any {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fail("stats on %s: %v", addr, err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(nc)
	var doc map[string]any
	if err != nil || json.Unmarshal(b, &doc) != nil {
		fail("stats on %s: %v %q", addr, err, b)
	}
	return doc
}

// refused checks that nothing accepts on addr any more.
func refused(t *testing.T, fail func(string, ...any), addr string) {
	t.Helper()
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		fail("%s still accepts connections", addr)
	}
}

// roundTrip sets and gets key through the proxy.
func roundTrip(t *testing.T, fail func(string, ...any), addr, key string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fail("dial proxy: %v", err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(nc, "set %s 0 0 1\r\nv\r\nget %s\r\n", key, key)
	r := bufio.NewReader(nc)
	var got strings.Builder
	for !strings.HasSuffix(got.String(), "END\r\n") {
		l, err := r.ReadString('\n')
		got.WriteString(l)
		if err != nil {
			fail("proxy reply: %v (got %q)", err, got.String())
		}
	}
	if want := "STORED\r\nVALUE " + key + " 0 1\r\nv\r\nEND\r\n"; got.String() != want {
		fail("proxy reply %q, want %q", got.String(), want)
	}
}

// TestThreads runs the binary with -threads 1 and 2, and without the flag
// (half the cores, or GOMAXPROCS from the environment), and checks what
// the admin's /version and the startup log report; a negative count is
// refused.
func TestThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-threads", "-1"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-threads -1") {
		t.Fatalf("-threads -1: code %d, err %q", code, errb.String())
	}
	bin := testserver.Shardproxy(t)
	mc := testserver.StartMemcached(t)
	listen, adminAddr, statsAddr := loopback(t), loopback(t), loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	if err := os.WriteFile(conf, []byte(proxyConf(listen, mc.Addr, "1000", adminAddr, statsAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ flag, env string }{{"1", "3"}, {"2", "3"}, {"", ""}, {"", "3"}} {
		args := []string{"-c", conf}
		if tt.flag != "" {
			args = append(args, "-threads", tt.flag)
		}
		cmd := exec.Command(bin, args...)
		// The flag wins over the environment, which wins over the default.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
		if tt.env != "" {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+tt.env)
		}
		threads := max(1, runtime.NumCPU()/2)
		if n, err := strconv.Atoi(cmp.Or(tt.flag, tt.env)); err == nil {
			threads = n
		}
		logs := &testserver.Buffer{}
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			cmd.Process.Kill()
			t.Fatalf(format+"\n--- shardproxy log ---\n%s", append(args, logs.String())...)
		}
		var v struct{ Threads int }
		waitFor(t, fail, "/version on "+adminAddr, func() bool {
			resp, err := client.Get("http://" + adminAddr + "/version")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return json.NewDecoder(resp.Body).Decode(&v) == nil
		})
		if v.Threads != threads {
			fail("-threads %d: /version says %d threads", threads, v.Threads)
		}
		roundTrip(t, fail, listen, "threads")
		if want := fmt.Sprintf("threads=%d", threads); !strings.Contains(logs.String(), want) {
			fail("startup log lacks %q", want)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit: %v\n%s", err, logs.String())
		}
	}
}
