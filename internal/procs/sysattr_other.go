//go:build !unix

package procs

import "syscall"

// SysProcAttr: nothing to set here.
func SysProcAttr() *syscall.SysProcAttr { return nil }
