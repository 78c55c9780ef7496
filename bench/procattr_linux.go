package main

import "syscall"

// sysProcAttr makes the kernel kill a server when the harness dies, so no
// server outlives a run (Ctrl-C, a crash).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
