//go:build unix

package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reserveDir holds one lock file per port that a process of this
// repository (a test binary, soak, bench) has claimed. `go test ./...` runs
// the packages' test binaries at once, and each picks ports from the same
// range; without a claim shared between processes, two binaries can choose
// the same free port a moment apart, and the readiness probe of the server
// that lost the race is then answered by the other binary's server. The
// name predates soak and bench using it; it stays, so that checkouts of
// older and newer code on one machine still share their claims.
var reserveDir = filepath.Join(os.TempDir(), "shardproxy-test-ports")

// reservations keeps the locked files open (and out of the garbage
// collector's finalizers) until the process exits, when the kernel drops
// the locks. FreePort calls reserve under handedOut's lock.
var reservations []*os.File

// reserve claims port for this process's lifetime across every process that
// uses this package. It reports false when another live process holds it.
// A directory or file that cannot be opened leaves only the in-process
// check, so reserve then says yes.
func reserve(port int) bool {
	if err := os.MkdirAll(reserveDir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return false
	}
	reservations = append(reservations, f)
	return true
}
