//go:build linux

package procs

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// realOS reads /proc.
type realOS struct{}

func (realOS) Host() string {
	h, _ := os.Hostname()
	return h
}

func (realOS) BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

func (o realOS) Self() (int, uint64) {
	pid := os.Getpid()
	st, _ := o.StartTime(pid)
	return pid, st
}

// StartTime is field 22 of /proc/<pid>/stat (after the command, which is
// in parentheses and may hold anything, so the fields are counted from
// the last ')').
func (realOS) StartTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStartTime(string(b))
}

func parseStartTime(stat string) (uint64, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, false
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, false // a zombie runs nothing
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

func (realOS) KillGroup(pgid int, sig Signal) bool {
	if pgid <= 1 {
		return false
	}
	err := syscall.Kill(-pgid, syscall.Signal(sig))
	return !errors.Is(err, syscall.ESRCH)
}

// SysProcAttr puts a child in a process group of its own and has the
// kernel SIGKILL it when the bot dies (Pdeathsig: the child only; its
// own children are the group's, killed by Reap at the next start).
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
