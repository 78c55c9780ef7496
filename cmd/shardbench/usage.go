package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTick = 10 * time.Millisecond

// usage is a snapshot of CPU time: this process's, and each server pid's.
type usage struct {
	self    time.Duration
	servers []time.Duration // per pid; -1 when it could not be read
	errs    []error
}

// takeUsage reads this process's rusage and each pid's /proc/PID/stat.
func takeUsage(pids []int) usage {
	u := usage{self: selfCPU()}
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			d = -1
		}
		u.servers = append(u.servers, d)
		u.errs = append(u.errs, err)
	}
	return u
}

// selfCPU returns the user plus system time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns utime+stime of process pid (all its threads) from
// /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU extracts utime (field 14) and stime (field 15) from the
// contents of /proc/PID/stat. The command name (field 2) is in parentheses
// and may contain spaces, so fields are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %q", abbrev(b))
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc stat: bad utime %q or stime %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}
