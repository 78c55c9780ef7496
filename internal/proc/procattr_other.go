//go:build !linux

package proc

import "syscall"

// sysProcAttr has no parent-death signal outside Linux; a run that ends
// normally still stops its servers (t.Cleanup, the harnesses' deferred
// stops).
func sysProcAttr() *syscall.SysProcAttr { return nil }
