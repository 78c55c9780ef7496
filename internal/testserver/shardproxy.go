package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// shardproxyBin is the proxy's binary, built once per test process.
var shardproxyBin struct {
	once sync.Once
	path string
	err  error
}

// Shardproxy builds cmd/shardproxy once per test process, for tests that
// run the binary as an operator would, and returns its path; a failed
// build fails the test. A package's TestMain calls RemoveShardproxy after
// its tests.
func Shardproxy(t testing.TB) string {
	t.Helper()
	b := &shardproxyBin
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "shardproxy-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "shardproxy")
		if out, err := exec.Command("go", "build", "-o", b.path, "shardproxy/cmd/shardproxy").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build shardproxy/cmd/shardproxy: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// RemoveShardproxy removes the binary Shardproxy built, if any.
func RemoveShardproxy() {
	if p := shardproxyBin.path; p != "" {
		_ = os.RemoveAll(filepath.Dir(p))
	}
}
