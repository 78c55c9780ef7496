// Package packaging_test checks what packaging/ and the Dockerfile ship:
// the systemd unit passes systemd-analyze verify and keeps its reload,
// restart and hardening settings; the sysusers file makes the unit's user;
// the Dockerfile builds with go.mod's Go a binary that is static and runs
// it as the chart's non-root user with the unit's paths, and, where a
// docker daemon answers, builds an image that runs; the Helm chart lints,
// renders packaging/k8s/, and its pod runs the proxy as configured.
package packaging_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// installedBin is where the unit expects the binary (docs/install.md).
const installedBin = "/usr/local/bin/shardproxy"

func TestMain(m *testing.M) {
	code := m.Run()
	testserver.RemoveShardproxy()
	os.Exit(code)
}

// unitSettings parses a systemd unit: section -> key -> values, in order
// (a key may be given more than once).
func unitSettings(t *testing.T, text string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			if out[section] == nil {
				out[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit: bad line %q", line)
			}
			out[section][strings.TrimSpace(k)] = append(out[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return out
}

func readUnit(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("shardproxy.service")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnitVerify runs systemd-analyze verify on the unit, with the binary
// it starts at the path of a fresh build (verify checks that ExecStart's
// program exists). Any complaint about the unit fails the test:
// systemd-analyze exits 0 on an unknown key or a value it ignores.
func TestUnitVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian package systemd; make deps installs it): the unit is not verified")
	}
	bin := testserver.Shardproxy(t)
	unit := strings.ReplaceAll(readUnit(t), installedBin, bin)
	path := filepath.Join(t.TempDir(), "shardproxy.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", "--generators=no", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "shardproxy") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	// It must be able to fail: a bad value and an unknown key are named.
	bad := strings.Replace(unit, "Restart=on-failure", "Restart=sometimes\nNoSuchKey=1", 1)
	badPath := filepath.Join(t.TempDir(), "shardproxy.service")
	if err := os.WriteFile(badPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(analyze, "verify", "--man=no", "--generators=no", badPath).CombinedOutput()
	if !bytes.Contains(out, []byte("NoSuchKey")) || !bytes.Contains(out, []byte("sometimes")) {
		t.Errorf("systemd-analyze verify did not name a bad value and an unknown key:\n%s", out)
	}
}

// TestUnitSettings keeps what the unit is for: reload by SIGHUP, restart
// on failure, its own user, the hardening options, many file descriptors,
// a stop timeout longer than the proxy's drain.
func TestUnitSettings(t *testing.T) {
	s := unitSettings(t, readUnit(t))
	svc := s["Service"]
	one := func(key string) string {
		t.Helper()
		v := svc[key]
		if len(v) != 1 {
			t.Errorf("[Service] %s is given %d times (%q), want once", key, len(v), v)
			return ""
		}
		return v[0]
	}
	want := map[string]string{
		"ExecStart":               installedBin + " -c /etc/shardproxy/shardproxy.yml",
		"ExecStartPre":            installedBin + " -t -c /etc/shardproxy/shardproxy.yml",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"Type":                    "notify", // READY=1, and MAINPID= after an upgrade in place
		"NotifyAccess":            "all",    // the new process is not the main one when it says so
		"Restart":                 "on-failure",
		"User":                    "shardproxy",
		"Group":                   "shardproxy",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"RestrictNamespaces":      "yes",
		"MemoryDenyWriteExecute":  "yes",
		"SystemCallArchitectures": "native",
		"SystemCallErrorNumber":   "EPERM",
	}
	for k, v := range want {
		if got := one(k); got != v {
			t.Errorf("[Service] %s=%q, want %q", k, got, v)
		}
	}
	if n, err := strconv.Atoi(one("LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("[Service] LimitNOFILE=%q, want at least 65536", one("LimitNOFILE"))
	}
	// The proxy drains for --shutdown-timeout (30 s) on SIGTERM; systemd
	// must not kill it before.
	if d, err := time.ParseDuration(one("TimeoutStopSec")); err != nil || d <= 30*time.Second {
		t.Errorf("[Service] TimeoutStopSec=%q, want longer than the 30s drain", one("TimeoutStopSec"))
	}
	if got := s["Install"]["WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
		t.Errorf("[Install] WantedBy=%q, want multi-user.target", got)
	}
}

// TestUnitFlags runs the binary with the unit's ExecStartPre and ExecStart
// flags (the configuration path swapped for an example's): the check
// passes, and the proxy starts, reloads on SIGHUP as ExecReload sends it,
// and stops on SIGTERM with status 0.
func TestUnitFlags(t *testing.T) {
	bin := testserver.Shardproxy(t)
	svc := unitSettings(t, readUnit(t))["Service"]
	conf := filepath.Join(t.TempDir(), "shardproxy.yml")
	// port 0: a free port; no server needs to run for the proxy to start
	yml := "cache:\n  listen: 127.0.0.1:0\n  servers:\n    - 127.0.0.1:1:1\n" +
		"shardproxy:\n  stats_listen: 127.0.0.1:0\n  admin_listen: 127.0.0.1:0\n"
	if err := os.WriteFile(conf, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(line string) []string {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != installedBin {
			t.Fatalf("%q does not start %s", line, installedBin)
		}
		for i, a := range f {
			if a == "/etc/shardproxy/shardproxy.yml" {
				f[i] = conf
			}
		}
		return f[1:]
	}
	out, err := exec.Command(bin, args(svc["ExecStartPre"][0])...).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("syntax is ok")) {
		t.Fatalf("ExecStartPre: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args(svc["ExecStart"][0])...)
	var logs testserver.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, &logs, "shardproxy started", done)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &logs, "reload done", done)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no exit within 30s of SIGTERM\n%s", logs.String())
	}
}

// waitFor waits up to 10 s for text in logs.
func waitFor(t *testing.T, logs *testserver.Buffer, text string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), text) {
		select {
		case err := <-done:
			t.Fatalf("exited (%v) before %q\n%s", err, text, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10s\n%s", text, logs.String())
		}
	}
}

// TestSysusers makes the unit's user from shardproxy.sysusers in an empty
// root directory.
func TestSysusers(t *testing.T) {
	sysusers, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		t.Skip("systemd-sysusers is not installed (Debian package systemd)")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("shardproxy.sysusers")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+dir, abs).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	user := unitSettings(t, readUnit(t))["Service"]["User"][0]
	re := regexp.MustCompile(`(?m)^` + user + `:x:\d+:\d+:[^:]*:[^:]*:/usr/sbin/nologin$`)
	if !re.Match(passwd) {
		t.Errorf("no system user %s with shell nologin in\n%s", user, passwd)
	}
}

// dockerfile is the Dockerfile's instructions, continuation lines joined.
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if cur == "" && (line == "" || line[0] == '#') {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

// TestDockerfile checks the Dockerfile without docker: two stages, the
// build on go.mod's Go, a static binary, and a final stage that runs it as
// the chart's user (a number, which Kubernetes' runAsNonRoot can check),
// at the unit's path, with the unit's configuration file and the chart's
// admin address.
func TestDockerfile(t *testing.T) {
	lines := dockerfile(t)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil {
		t.Fatal("go.mod has no go line")
	}
	var froms []string
	user, entry, cmd := "", "", ""
	for _, l := range lines {
		op, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(op) {
		case "ARG":
			if v, ok := strings.CutPrefix(rest, "GO_VERSION="); ok && v != string(goVersion[1]) {
				t.Errorf("Dockerfile builds with Go %s, go.mod says %s", v, goVersion[1])
			}
		case "FROM":
			froms = append(froms, rest)
			user = "" // USER is per stage
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entry = rest
		case "CMD":
			cmd = rest
		case "RUN":
			if strings.Contains(rest, "go build") && !strings.Contains(rest, "CGO_ENABLED=0") {
				t.Errorf("the build is not static (CGO_ENABLED=0): %s", rest)
			}
		}
	}
	if len(froms) < 2 || !strings.HasPrefix(froms[0], "golang:${GO_VERSION}") {
		t.Errorf("stages %q: want a golang:${GO_VERSION} build stage, then the runtime", froms)
	}
	if want := fmt.Sprintf("%d:%d", imageUID, imageUID); user != want {
		t.Errorf("the final stage runs as %q, want %s (the chart's runAsUser and runAsGroup)", user, want)
	}
	var entryArgs, cmdArgs []string
	if err := json.Unmarshal([]byte(entry), &entryArgs); err != nil || len(entryArgs) != 1 || entryArgs[0] != installedBin {
		t.Errorf("ENTRYPOINT %s: want [%q] (%v)", entry, installedBin, err)
	}
	if err := json.Unmarshal([]byte(cmd), &cmdArgs); err != nil {
		t.Fatalf("CMD %s: %v", cmd, err)
	}
	// The unit's file, and the admin where the chart's probes look.
	want := []string{"-c", confPath, "--admin", "0.0.0.0:22223"}
	if !slices.Equal(cmdArgs, want) || !strings.Contains(readUnit(t), installedBin+" -c "+confPath) {
		t.Errorf("CMD %q, want %q, the unit's configuration file", cmdArgs, want)
	}
}

// TestStaticBinary runs the Dockerfile's go build (its output moved to a
// scratch directory) and finds the binary static: no program interpreter
// and no dynamic section, as the distroless image, which has no C library,
// needs. The same check finds the system's ls dynamic.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	build := ""
	for _, l := range dockerfile(t) {
		if op, rest, _ := strings.Cut(l, " "); op == "RUN" && strings.Contains(rest, "go build") {
			build = rest
		}
	}
	out := filepath.Join(t.TempDir(), "shardproxy")
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(build, "/out/shardproxy", out))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, b)
	}
	if err := static(out); err != nil {
		t.Error(err)
	}
	if ls, err := exec.LookPath("ls"); err == nil && static(ls) == nil {
		t.Errorf("%s is found static: the check cannot fail", ls)
	}
}

// static returns an error when the ELF file at path asks for a program
// interpreter or has a dynamic section.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return fmt.Errorf("%s is not static: it has a %v program header", path, p.Type)
		}
	}
	if f.Section(".dynamic") != nil || f.Section(".interp") != nil {
		return fmt.Errorf("%s is not static: it has a dynamic section", path)
	}
	return nil
}

// TestDockerBuild builds the image and runs it, where a docker daemon
// answers.
func TestDockerBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image; not in -short")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker is not installed: the image is not built")
	}
	if out, err := exec.Command(docker, "info").CombinedOutput(); err != nil {
		t.Skipf("no docker daemon answers (%v): the image is not built\n%s", err, lastLine(out))
	}
	tag := "shardproxy-test:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	build := exec.Command(docker, "build", "-t", tag, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", tag).Run() })
	out, err := exec.Command(docker, "run", "--rm", tag, "-V").CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("This is shardproxy-")) {
		t.Errorf("docker run %s -V: %v\n%s", tag, err, out)
	}
	out, err = exec.Command(docker, "image", "inspect", "-f", "{{.Config.User}} {{.Size}}", tag).Output()
	if err != nil {
		t.Fatal(err)
	}
	user, size, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("the image runs as %q, want a user other than root", user)
	}
	if n, _ := strconv.ParseInt(size, 10, 64); n > 50<<20 {
		t.Errorf("the image is %d bytes, want a small one (under 50 MiB)", n)
	}
	t.Logf("image %s: user %s, %s bytes", tag, user, size)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
