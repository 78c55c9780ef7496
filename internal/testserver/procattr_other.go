//go:build !linux

package testserver

import "syscall"

// sysProcAttr has no parent-death signal outside Linux; t.Cleanup still
// stops every server of a test that ends normally.
func sysProcAttr() *syscall.SysProcAttr { return nil }
