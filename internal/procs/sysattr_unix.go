//go:build unix && !linux

package procs

import "syscall"

// SysProcAttr puts a child in a process group of its own (no parent-death
// signal outside Linux).
func SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
