package testserver

import "syscall"

// sysProcAttr makes the kernel kill a server when the test binary dies
// (a timeout panic, a kill), so no server outlives its test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
