package proc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperArg as the first argument makes the test binary a stand-in server
// (see helper), so the supervisor is tested without any real one.
const helperArg = "proc-test-helper"

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == helperArg {
		helper(os.Args[2], os.Args[3])
		return
	}
	os.Exit(m.Run())
}

// helper is a server for the tests. Modes: "serve" listens on addr,
// answers PING with +PONG and exits on SIGTERM; "stubborn" does too but
// ignores SIGTERM; "fail" prints a complaint and exits 3 at once; "mute"
// never listens.
func helper(mode, addr string) {
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "starting")
		fmt.Fprintln(os.Stderr, "unknown option --bogus")
		os.Exit(3)
	case "mute":
		select {}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err) // "bind: address already in use"
		os.Exit(1)
	}
	fmt.Println("serving", addr)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.TrimSpace(line) == "PING" {
						fmt.Fprint(conn, "+PONG\r\n")
					}
				}
			}()
		}
	}()
	for range term {
		fmt.Println("got SIGTERM")
		if mode == "serve" {
			os.Exit(0)
		}
	}
}

// helperConfig is a Config that runs helper in mode on a free port.
func helperConfig(t *testing.T, mode string) Config {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return Config{Name: "helper", Path: os.Args[0], Args: []string{helperArg, mode, addr}, Addr: addr,
		Ready: func(addr string) error { return Expect(addr, "PING\r\n", "+PONG") }}
}

// start starts p and stops it when the test ends.
func start(t *testing.T, p *Process) {
	t.Helper()
	t.Cleanup(p.Stop)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
}

func TestStartStopRestart(t *testing.T) {
	cfg := helperConfig(t, "serve")
	cfg.LogFile = filepath.Join(t.TempDir(), "servers.log")
	p := New(cfg)
	if p.Running() || p.Pid() != 0 {
		t.Fatal("a new Process runs")
	}
	start(t, p)
	pid := p.Pid()
	if !p.Running() || pid == 0 {
		t.Fatalf("after Start: Running %v, Pid %d", p.Running(), pid)
	}
	if err := p.Start(); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start: %v", err)
	}
	p.Stop()
	p.Stop() // idempotent
	if p.Running() || p.Pid() != 0 {
		t.Fatalf("after Stop: Running %v, Pid %d", p.Running(), p.Pid())
	}
	if err := AcceptsTCP(p.Addr()); err == nil {
		t.Fatal("a stopped server still accepts connections")
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if p.Pid() == 0 || p.Pid() == pid {
		t.Fatalf("after Restart: Pid %d (was %d)", p.Pid(), pid)
	}
	want := "serving " + p.Addr() + "\n--- helper on " + p.Addr() + ": restart ---\nserving " + p.Addr() + "\n"
	if got := p.LastOutput(outputLimit); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if b, err := os.ReadFile(cfg.LogFile); err != nil || string(b) != want {
		t.Errorf("log file %q, %v; want %q", b, err, want)
	}
	if got := p.Tail(2); got != "--- helper on "+p.Addr()+": restart --- | serving "+p.Addr() {
		t.Errorf("Tail(2) = %q", got)
	}
}

func TestExitedByItself(t *testing.T) {
	p := New(helperConfig(t, "serve"))
	start(t, p)
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Running() {
		if time.Now().After(deadline) {
			t.Fatal("Running after the server was killed")
		}
		time.Sleep(pollInterval)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("Start after the server exited: %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	// A port taken by something that answers nothing, as by another
	// process's server of another protocol.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	go func() {
		for {
			conn, err := taken.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	inUse := helperConfig(t, "serve")
	inUse.Args[2], inUse.Addr = taken.Addr().String(), taken.Addr().String()
	mute := helperConfig(t, "mute")
	mute.ReadyTimeout = 300 * time.Millisecond
	tests := []struct {
		name     string
		cfg      Config
		want     []string
		addrUsed bool
	}{
		{"exits", helperConfig(t, "fail"), []string{"helper on 127.0.0.1:", "exited before it was ready (exit status 3)",
			"last output: starting | unknown option --bogus"}, false},
		{"port taken", inUse, []string{"exited before it was ready", "address already in use"}, true},
		{"no answer", mute, []string{"did not answer within 300ms", "last output: (none)"}, false},
		{"no binary", Config{Name: "nothing", Path: "/nonexistent/server"}, []string{"proc: start nothing", "no such file"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.cfg)
			err := p.Start()
			if err == nil {
				p.Stop()
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if errors.Is(err, ErrAddrInUse) != tt.addrUsed {
				t.Errorf("errors.Is(err, ErrAddrInUse) = %v: %v", !tt.addrUsed, err)
			}
			if p.Running() || p.Pid() != 0 {
				t.Error("a failed server still runs")
			}
		})
	}
}

func TestStopGrace(t *testing.T) {
	tests := []struct {
		mode    string
		grace   time.Duration
		atLeast time.Duration // Stop waits this long at least
		termed  bool          // the server saw SIGTERM
	}{
		{"serve", 0, 0, false},
		{"serve", 5 * time.Second, 0, true},
		{"stubborn", 300 * time.Millisecond, 300 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s grace %v", tt.mode, tt.grace), func(t *testing.T) {
			cfg := helperConfig(t, tt.mode)
			cfg.StopGrace = tt.grace
			p := New(cfg)
			start(t, p)
			begin := time.Now()
			p.Stop()
			took := time.Since(begin)
			if took < tt.atLeast || took > 4*time.Second {
				t.Errorf("Stop took %v, want at least %v and well below the grace", took, tt.atLeast)
			}
			if got := strings.Contains(p.LastOutput(outputLimit), "got SIGTERM"); got != tt.termed {
				t.Errorf("server saw SIGTERM: %v, want %v; output %q", got, tt.termed, p.LastOutput(outputLimit))
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	if _, err := LookPath("sh"); err != nil {
		t.Errorf("sh: %v", err)
	}
	_, err := LookPath("no-such-cache-server")
	if err == nil || !strings.Contains(err.Error(), "no-such-cache-server not found") ||
		!strings.Contains(err.Error(), InstallHint) {
		t.Errorf("missing binary: %v", err)
	}
}

func TestFreePortDistinct(t *testing.T) {
	seen := make(map[int]bool)
	for range 50 {
		p, err := FreePort()
		if err != nil || p <= 0 || seen[p] {
			t.Fatalf("FreePort returned %d, %v: twice or invalid", p, err)
		}
		seen[p] = true
	}
}

// TestPortRangeEnv keeps FreePort inside SHARDPROXY_PORT_RANGE and
// ignores a value it cannot read.
func TestPortRangeEnv(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi int
		ok     bool
	}{
		{"25500-25599", 25500, 25599, true},
		{" 30000 - 30000 ", 30000, 30000, true},
		{"", 0, 0, false},
		{"25599-25500", 0, 0, false},
		{"0-10", 0, 0, false},
		{"1-70000", 0, 0, false},
		{"x-y", 0, 0, false},
		{"25500", 0, 0, false},
	} {
		lo, hi, ok := parsePortRange(tc.in)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("parsePortRange(%q) = %d, %d, %t; want %d, %d, %t", tc.in, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
	// A part of whatever range this run already uses (it may be confined
	// by the variable itself).
	lo, hi := listenRange()
	hi = min(hi, lo+49)
	t.Setenv(PortRangeEnv, fmt.Sprintf("%d-%d", lo, hi))
	for range 5 {
		p, err := FreePort()
		if err != nil || p < lo || p > hi {
			t.Fatalf("FreePort with %s=%d-%d returned %d, %v", PortRangeEnv, lo, hi, p, err)
		}
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tshardproxy\nVmPeak:\t  20000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t    9999 kB\n"
	for field, want := range map[string]int64{"VmHWM": 12345, "VmRSS": 9999} {
		got, err := parseStatus(bufio.NewScanner(strings.NewReader(status)), field)
		if err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", field, got, err, want)
		}
	}
	if _, err := parseStatus(bufio.NewScanner(strings.NewReader(status)), "VmSwap"); err == nil {
		t.Error("missing field: no error")
	}
}

func TestOutputSince(t *testing.T) {
	var w tail
	_, _ = w.Write([]byte("first run\n"))
	m := w.mark()
	_, _ = w.Write([]byte("second run\n"))
	if got := w.since(m); got != "second run\n" {
		t.Errorf("since = %q", got)
	}
	_, _ = w.Write(make([]byte, outputLimit+10))
	if got := w.since(m); len(got) != outputLimit {
		t.Errorf("since after overflow: %d bytes, want the %d kept", len(got), outputLimit)
	}
}
