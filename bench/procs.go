package main

import (
	"os"
	"strconv"
	"syscall"
	"time"

	"shardproxy/internal/proc"
)

// stopGrace is how long a stopped server has to exit after SIGTERM before
// it is killed.
const stopGrace = 5 * time.Second

// startProc runs path with args as a server listening on addr, appending
// its output to logPath, and returns once ready says it answers (see
// proc.Process.Start).
func startProc(name, addr, path string, args []string, logPath string, ready func(addr string) error) (*proc.Process, error) {
	p := proc.New(proc.Config{Name: name, Path: path, Args: args, Addr: addr, Ready: ready,
		LogFile: logPath, StopGrace: stopGrace})
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// openFDs returns how many file descriptors process pid has open.
func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents), err
}

// raiseFileLimit raises this process's RLIMIT_NOFILE soft limit to the hard
// limit and returns it. Children (servers, shardbench) inherit it: Go only
// restores the original limit in children when the program did not set it
// itself.
func raiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return rl.Cur, nil
}
