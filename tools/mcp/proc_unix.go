//go:build unix

package mcp

import (
	"os/exec"
	"sync"
	"syscall"

	"github.com/agentbot/agentbot/internal/procs"
)

// proc is a stdio server's process group: the server and whatever it
// started (npx starts node), all killed together. On Linux the kernel
// SIGKILLs the server when the bot dies (Pdeathsig); the group is recorded
// (release forgets it) so that the next start kills what is left.
type proc struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	release func()
}

func newProc(cmd *exec.Cmd) *proc {
	cmd.SysProcAttr = procs.SysProcAttr()
	return &proc{cmd: cmd}
}

func (p *proc) id() int {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// tracked sets what forgets the group's record.
func (p *proc) tracked(release func()) {
	p.mu.Lock()
	p.release = release
	p.mu.Unlock()
}

// kill ends the whole group (a no-op once it is gone) and forgets it.
func (p *proc) kill() {
	if pid := p.id(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if p == nil {
		return
	}
	p.mu.Lock()
	r := p.release
	p.release = nil
	p.mu.Unlock()
	if r != nil {
		r()
	}
}
