package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// InstallHint tells how to get every server binary the repository runs.
const InstallHint = "install it: make deps (apt-get install memcached redis-server redis-tools redis-sentinel nutcracker)"

// LookPath finds the binary name in PATH or in the sbin directories Debian
// installs daemons to (nutcracker lives in /usr/sbin, often missing from a
// user's PATH). Its error names the binary and says how to install it.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("proc: %s not found in PATH or /usr/sbin; %s", name, InstallHint)
}
