package acp_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/acp/acptest"
)

func TestWorkspaceResolve(t *testing.T) {
	root := t.TempDir()
	ws, err := acp.NewWorkspace(filepath.Join(root, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws.Root(), "sub"), 0o700))
	must(os.Symlink(outside, filepath.Join(ws.Root(), "outdir")))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws.Root(), "outfile")))
	must(os.Symlink(filepath.Join(ws.Root(), "sub"), filepath.Join(ws.Root(), "insub")))
	cases := []struct {
		path string
		ok   bool
	}{
		{filepath.Join(ws.Root(), "a.txt"), true},
		{"rel/b.txt", true},
		{filepath.Join(ws.Root(), "new", "deep", "c.txt"), true},
		{filepath.Join(ws.Root(), "insub", "d.txt"), true}, // a symlink that stays inside
		{ws.Root(), true},
		{filepath.Join(outside, "x"), false},
		{"/etc/passwd", false},
		{ws.Root() + "/../x", false},
		{ws.Root() + "/sub/../a.txt", false}, // ".." refused even when it stays inside
		{"../x", false},
		{filepath.Join(ws.Root(), "outdir", "x"), false},
		{filepath.Join(ws.Root(), "outfile"), false},
		{filepath.Join(ws.Root(), "outdir", "new", "y"), false},
		{ws.Root() + "x/y", false}, // a sibling sharing the prefix
		{"", false},
	}
	for _, c := range cases {
		_, err := ws.Resolve(c.path)
		if c.ok != (err == nil) {
			t.Errorf("Resolve(%q) err=%v, want ok=%v", c.path, err, c.ok)
		}
		if err != nil && !errors.Is(err, acp.ErrOutsideWorkspace) {
			t.Errorf("Resolve(%q) err=%v, not ErrOutsideWorkspace", c.path, err)
		}
	}
	if err := ws.WriteText(filepath.Join(ws.Root(), "outfile"), "overwrite"); err == nil {
		t.Error("wrote through a symlink out")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s" {
		t.Errorf("outside file changed: %q", b)
	}
	if err := ws.WriteText("new/deep/c.txt", "l1\nl2\nl3\n"); err != nil {
		t.Fatal(err)
	}
	line, limit := 2, 1
	if got, err := ws.ReadText("new/deep/c.txt", &line, &limit); err != nil || got != "l2\n" {
		t.Errorf("ReadText lines = %q, %v", got, err)
	}
	if _, err := ws.ReadText(filepath.Join(ws.Root(), "outfile"), nil, nil); err == nil {
		t.Error("read through a symlink out")
	}
}

// Stop is bounded: an agent that ignores stdin EOF gets SIGTERM; one that
// also ignores SIGTERM is killed.
func TestProcessStopIsBounded(t *testing.T) {
	bin := acptest.Build(t)
	cases := []struct {
		args []string
		sig  syscall.Signal
	}{
		{[]string{"-ignore-eof"}, syscall.SIGTERM},
		{[]string{"-ignore-eof", "-ignore-term"}, syscall.SIGKILL},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			p, err := acp.StartProcess(acp.ProcessConfig{Command: bin, Args: c.args, Env: acp.AgentEnv(nil, t.TempDir()),
				Grace: 100 * time.Millisecond, KillAfter: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			p.Stop()
			var ee *exec.ExitError
			if !errors.As(p.Err(), &ee) {
				t.Fatalf("exit %v", p.Err())
			}
			ws, _ := ee.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != c.sig {
				t.Errorf("ended by %v (signaled=%v), want %v", ws.Signal(), ws.Signaled(), c.sig)
			}
		})
	}
	// A well-behaved agent exits at EOF, before any signal.
	p, err := acp.StartProcess(acp.ProcessConfig{Command: bin, Env: acp.AgentEnv(nil, t.TempDir()), Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if err := p.Err(); err != nil {
		t.Errorf("exit at EOF: %v", err)
	}
}
