//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// proc is a stdio server's process group: the server and whatever it
// started (npx starts node), all killed together.
type proc struct{ cmd *exec.Cmd }

func newProc(cmd *exec.Cmd) *proc {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return &proc{cmd: cmd}
}

func (p *proc) id() int {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill ends the whole group (a no-op once it is gone).
func (p *proc) kill() {
	if pid := p.id(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
