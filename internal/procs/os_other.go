//go:build !linux

package procs

import "os"

// realOS elsewhere: no /proc, so no identity can be checked and Reap
// signals nothing (records are forgotten).
type realOS struct{}

func (realOS) Host() string {
	h, _ := os.Hostname()
	return h
}
func (realOS) BootID() string               { return "" }
func (realOS) Self() (int, uint64)          { return os.Getpid(), 0 }
func (realOS) StartTime(int) (uint64, bool) { return 0, false }
func (realOS) KillGroup(int, Signal) bool   { return false }
func parseStartTime(string) (uint64, bool)  { return 0, false }
