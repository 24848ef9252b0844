package acp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/agentbot/agentbot/internal/procs"
)

// ProcessConfig starts one agent process.
type ProcessConfig struct {
	Command string
	Args    []string
	// Env is the whole environment of the agent ("KEY=value"): nothing of
	// the bot's own environment is inherited.
	Env []string
	Dir string
	// Grace is how long the agent may take to exit after its stdin closed
	// before its process group gets SIGTERM; KillAfter how long after
	// SIGTERM before SIGKILL.
	Grace, KillAfter time.Duration
	// Track, if set, records the started process group (its leader's pid)
	// and returns what forgets it once the group is gone (internal/procs:
	// a group the bot's death leaves is killed at the next start).
	Track func(pid int) (release func())
}

// Process is a running agent: its stdio pipes and exit.
type Process struct {
	cfg    ProcessConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer
	done   chan struct{}
	err    error // exit status; read after done

	stopOnce sync.Once
}

// StartProcess starts the agent. It exits when ctx ends (bounded, see Stop).
func StartProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.KillAfter <= 0 {
		cfg.KillAfter = 3 * time.Second
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = append([]string{}, cfg.Env...) // non-nil: never the bot's environment
	cmd.Dir = cfg.Dir
	// A child the agent left holding its stderr does not hold up Wait
	// (and so the group's kill below) once the agent itself has exited.
	cmd.WaitDelay = time.Second
	// Its own process group, SIGKILLed by the kernel if the bot dies.
	cmd.SysProcAttr = procs.SysProcAttr()
	p := &Process{cfg: cfg, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", cfg.Command, err)
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", cfg.Command, err)
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", cfg.Command, err)
	}
	release := func() {}
	if cfg.Track != nil {
		release = cfg.Track(cmd.Process.Pid)
	}
	go func() {
		p.err = cmd.Wait()
		// Whatever the agent started and left behind dies with it
		// (invariant 21); then the group is forgotten.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		release()
		close(p.done)
	}()
	return p, nil
}

// PID is the agent's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit status (valid once Done is closed).
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Stderr is the tail of what the agent wrote on stderr (for logs; it may
// hold anything the agent prints, so it is never shown in a chat).
func (p *Process) Stderr() string { return p.stderr.String() }

// Stop ends the process group within Grace+KillAfter: stdin is closed (an
// ACP agent exits at EOF), then SIGTERM goes to its process group (some
// agents do not exit when stdin closes), then SIGKILL to the group; what
// is left of the group when the agent exits is SIGKILLed.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		t := time.NewTimer(p.cfg.Grace)
		defer t.Stop()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		t.Reset(p.cfg.KillAfter)
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	<-p.done
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// AgentEnv builds an agent's explicit environment: PATH (so a script's
// interpreter is found) and HOME (the given one) unless configured, then
// the configured variables. Nothing else of the bot's environment - its
// token, API keys, the store DSN - reaches the agent.
func AgentEnv(configured map[string]string, home string) []string {
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": home}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for k, v := range configured {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// exitText describes how an agent process ended, for a notice.
func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "it exited"
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "it was killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("it exited with status %d", ee.ExitCode())
	default:
		return "it could not be run"
	}
}

var _ = context.Background
