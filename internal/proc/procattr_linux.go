package proc

import "syscall"

// sysProcAttr makes the kernel kill a server when the process that started
// it dies (a test binary's timeout panic, a kill, a crashed harness), so no
// server outlives its run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
