//go:build !linux

package main

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; the harness
// stops its servers on the way out.
func sysProcAttr() *syscall.SysProcAttr { return nil }
