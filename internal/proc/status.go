package proc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Status returns a field of /proc/PID/status that counts KiB ("VmRSS",
// the resident set; "VmHWM", its peak). It is Linux-only.
func Status(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatus(bufio.NewScanner(f), field)
}

// parseStatus finds "FIELD:   1234 kB" in /proc/PID/status lines.
func parseStatus(sc *bufio.Scanner, field string) (int64, error) {
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc: status: bad %s line %q", field, sc.Text())
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("proc: status: no %s", field)
}
