package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// committed is the generated file, relative to this package.
const committed = "../../commands_gen.go"

// versionLine finds the redis-server version a generated table names.
var versionLine = regexp.MustCompile(`(?m)^const referenceVersion = "([^"]*)"$`)

// TestCommittedTableIsGenerated runs the generator as go generate does and
// wants the committed resp/commands_gen.go byte for byte: a hand edit of the
// table, or a change to classes.go or main.go without regenerating, fails
// here. The table depends on the redis-server it was made from; with
// another version in PATH the comparison means nothing, so the test then
// skips, except in CI (CI=true), whose redis-server is the reference.
func TestCommittedTableIsGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the generator runs a real redis-server")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "commands_gen.go")
	cmd := exec.Command(goBin, "run", ".", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./resp/internal/gencommands: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	if gv, wv := version(got), version(want); gv != wv {
		msg := fmt.Sprintf("redis-server %s in PATH, but resp/commands_gen.go is from redis-server %s: "+
			"install %[2]s to check the table, or run go generate ./resp to move the table to %[1]s", gv, wv)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Fatalf("resp/commands_gen.go is not what resp/internal/gencommands writes; run go generate ./resp\n%s",
		firstDiff(want, got))
}

// version returns the redis-server version a generated table names.
func version(src []byte) string {
	if m := versionLine.FindSubmatch(src); m != nil {
		return string(m[1])
	}
	return "unknown"
}

// firstDiff shows the first line where the committed and the generated
// table differ.
func firstDiff(committed, generated []byte) string {
	c := strings.Split(string(committed), "\n")
	g := strings.Split(string(generated), "\n")
	for i := 0; i < max(len(c), len(g)); i++ {
		var cl, gl string
		if i < len(c) {
			cl = c[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if cl != gl {
			return fmt.Sprintf("first difference, line %d:\n  committed: %s\n  generated: %s", i+1, cl, gl)
		}
	}
	return ""
}
