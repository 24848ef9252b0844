package acp

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Sandbox confines an agent and its commands with bubblewrap (bwrap): the
// system read-only, the session's workspace (and the agent's HOME)
// read-write, a private /tmp, its own PID, IPC and UTS namespaces, no
// network unless Network, and --die-with-parent. Hidden directories (the
// bot's store and config, the other sessions' workspaces) are covered by
// an empty tmpfs. Each command also gets resource limits (prlimit).
type Sandbox struct {
	// Bwrap is the bwrap program; Prlimit the prlimit program ("" = no
	// limits: stated at start by the caller).
	Bwrap, Prlimit string
	// Network keeps the host network for commands (network: true).
	Network bool
	// Hide are paths made invisible inside (directories get an empty
	// tmpfs, files /dev/null).
	Hide []string
	// Expose are paths shown read-only again after Hide and the private
	// /tmp (an agent program installed under one of them).
	Expose []string
	// Relay is the program (and its first arguments) that runs the relay
	// inside (RelayMain; cmd/bot: the bot itself, `sandbox-relay`): with
	// it the agent gets no network but its model endpoints. Empty: the
	// agent keeps the host network.
	Relay  []string
	Limits Limits
}

// Limits are a command's resource limits.
type Limits struct {
	// CPU is the CPU time (default: the command timeout, else 1h).
	CPU time.Duration
	// Memory is the data segment (RLIMIT_DATA) in bytes (default 4 GiB);
	// Procs the processes of its user namespace (default 512); FileSize the
	// largest file it may write (default 1 GiB).
	Memory, FileSize int64
	Procs            int
}

// SandboxPaths are the directories of one session inside the sandbox.
type SandboxPaths struct {
	Workspace, Home, Cwd string
	// NetDir is the host directory of the endpoint proxy's socket.
	NetDir string
}

// FindSandbox looks up bwrap and prlimit on the bot's PATH.
func FindSandbox(network bool) (*Sandbox, error) {
	b, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("sandbox: bwrap (Debian/Ubuntu package bubblewrap) is not installed: %w", err)
	}
	p, _ := exec.LookPath("prlimit")
	return &Sandbox{Bwrap: b, Prlimit: p, Network: network}, nil
}

// Check runs bwrap once with the namespaces the sandbox uses: a kernel or
// container that forbids unprivileged user namespaces fails here, with
// bwrap's own words.
func (s *Sandbox) Check() error {
	out, err := exec.Command(s.Bwrap, "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("sandbox: bwrap cannot create its namespaces here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// base is bwrap's arguments up to the program.
func (s *Sandbox) base(p SandboxPaths, network bool) []string {
	a := []string{s.Bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"}
	if p.NetDir != "" {
		a = append(a, "--bind", p.NetDir, relayDir)
	}
	for _, h := range s.Hide {
		st, err := os.Stat(h)
		switch {
		case err != nil:
			continue
		case st.IsDir():
			a = append(a, "--tmpfs", h)
		default:
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	for _, e := range s.Expose {
		if _, err := os.Stat(e); err == nil {
			a = append(a, "--ro-bind", e, e)
		}
	}
	if p.Home != "" {
		a = append(a, "--bind", p.Home, p.Home)
	}
	a = append(a, "--bind", p.Workspace, p.Workspace,
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	if !network {
		a = append(a, "--unshare-net")
	}
	cwd := p.Cwd
	if cwd == "" {
		cwd = p.Workspace
	}
	return append(a, "--die-with-parent", "--chdir", cwd, "--")
}

// Wrap is a command's argv run in the sandbox with its limits; timeout is
// its commandTimeout (the default CPU limit).
func (s *Sandbox) Wrap(argv []string, p SandboxPaths, timeout time.Duration) []string {
	a := s.base(p, s.Network)
	if s.Prlimit != "" {
		l := s.Limits
		if l.CPU <= 0 {
			l.CPU = timeout
		}
		if l.CPU <= 0 {
			l.CPU = time.Hour
		}
		if l.Memory <= 0 {
			l.Memory = 4 << 30
		}
		if l.FileSize <= 0 {
			l.FileSize = 1 << 30
		}
		if l.Procs <= 0 {
			l.Procs = 512
		}
		a = append(a, s.Prlimit, "--cpu="+strconv.Itoa(int(l.CPU.Seconds()+0.5)), "--data="+strconv.FormatInt(l.Memory, 10),
			"--fsize="+strconv.FormatInt(l.FileSize, 10), "--nproc="+strconv.Itoa(l.Procs), "--")
	}
	return append(a, argv...)
}

// WrapAgent is the agent process's argv in the sandbox. With a Relay and
// p.NetDir it has no network of its own: the relay inside reaches the
// endpoint proxy's socket in NetDir (docs/DECISIONS.md 241); without, it
// keeps the host network.
func (s *Sandbox) WrapAgent(argv []string, p SandboxPaths) []string {
	if len(s.Relay) == 0 || p.NetDir == "" {
		return append(s.base(p, true), argv...)
	}
	a := append(s.base(p, false), s.Relay...)
	a = append(a, relayDir+"/"+relaySocket, "--")
	return append(a, argv...)
}
