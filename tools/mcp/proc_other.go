//go:build !unix

package mcp

import "os/exec"

type proc struct{ cmd *exec.Cmd }

func newProc(cmd *exec.Cmd) *proc { return &proc{cmd: cmd} }

func (p *proc) id() int {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *proc) tracked(release func()) {}

func (p *proc) kill() {
	if p != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}
