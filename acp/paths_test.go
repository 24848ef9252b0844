package acp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hostile conversation ids (a Matrix "thread root" is the sender's text)
// become one safe component, distinct ids stay distinct, and the result
// is a direct child of the root (invariant 18).
func TestSafeComponentHostileIDs(t *testing.T) {
	ids := []string{
		"$/../../x", "..", ".", "", "../x", "a/b", "a\\b", "x\x00y", "/etc/passwd", "$abc:server.org",
		".hidden", "%2F", "%252F", "123456789012345678", strings.Repeat("é/", 200), strings.Repeat("a", 300),
		strings.Repeat("a", 299) + "b",
	}
	root := filepath.Join(t.TempDir(), "ws")
	seen := map[string]string{}
	for _, id := range ids {
		c := safeComponent(id)
		if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "/\\\x00") || strings.HasPrefix(c, ".") || len(c) > maxComponent {
			t.Errorf("safeComponent(%q) = %q: not one safe component", id, c)
		}
		if prev, ok := seen[c]; ok {
			t.Errorf("safeComponent(%q) = safeComponent(%q) = %q", id, prev, c)
		}
		seen[c] = id
		p, err := sessionDir(AgentConfig{Workspace: root}, id)
		if err != nil {
			t.Errorf("sessionDir(%q): %v", id, err)
			continue
		}
		if filepath.Dir(p) != root {
			t.Errorf("sessionDir(%q) = %s, not directly under %s", id, p, root)
		}
		if r, err := recordPath(AgentConfig{Workspace: root}, id); err != nil || filepath.Dir(r) != filepath.Join(root, ".agentbot-sessions") {
			t.Errorf("recordPath(%q) = %s, %v", id, r, err)
		}
	}
	if got := safeComponent("123456789012345678"); got != "123456789012345678" {
		t.Errorf("a Discord id is escaped: %q (its workspace would move)", got)
	}
	for _, bad := range []string{"..", ".", "", "a/b", "x\x00", `a\b`} {
		if _, err := beneath(root, bad); err == nil {
			t.Errorf("beneath(%q) accepted", bad)
		}
	}
}

func FuzzSafeComponent(f *testing.F) {
	for _, s := range []string{"$/../../x", "..", "a/b", "123"} {
		f.Add(s)
	}
	root := "/ws"
	f.Fuzz(func(t *testing.T, id string) {
		c := safeComponent(id)
		p, err := beneath(root, c)
		if err != nil || filepath.Dir(p) != root || len(c) > maxComponent {
			t.Fatalf("safeComponent(%q) = %q: %s %v", id, c, p, err)
		}
	})
}

// The check and the read are one: a symlink swapped in after Resolve
// checked the path (here, exactly between the two) is not followed, for a
// read or a write.
func TestWorkspaceSymlinkSwappedAfterCheck(t *testing.T) {
	root := t.TempDir()
	ws, err := NewWorkspace(filepath.Join(root, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "f.txt"), []byte("SECRET"), 0o600))
	must(os.MkdirAll(filepath.Join(ws.Root(), "d"), 0o700))
	must(os.WriteFile(filepath.Join(ws.Root(), "d", "f.txt"), []byte("inside"), 0o600))
	must(os.WriteFile(filepath.Join(ws.Root(), "g.txt"), []byte("inside"), 0o600))
	cases := []struct {
		name, path string
		swap       func()
	}{
		{"directory swapped for a symlink out", "d/f.txt", func() {
			must(os.Rename(filepath.Join(ws.Root(), "d"), filepath.Join(ws.Root(), "d.old")))
			must(os.Symlink(outside, filepath.Join(ws.Root(), "d")))
		}},
		{"file swapped for a symlink out", "g.txt", func() {
			must(os.Remove(filepath.Join(ws.Root(), "g.txt")))
			must(os.Symlink(filepath.Join(outside, "f.txt"), filepath.Join(ws.Root(), "g.txt")))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws.resolved = func(string) { c.swap(); ws.resolved = nil }
			got, err := ws.ReadText(c.path, nil, nil)
			if err == nil || strings.Contains(got, "SECRET") {
				t.Fatalf("read through the swapped-in symlink: %q, %v", got, err)
			}
			if !errors.Is(err, ErrOutsideWorkspace) {
				t.Errorf("err %v, want ErrOutsideWorkspace", err)
			}
			if err := ws.WriteText(c.path, "overwritten"); err == nil {
				t.Error("wrote through the symlink")
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "f.txt")); string(b) != "SECRET" {
				t.Errorf("outside file now %q", b)
			}
		})
	}
	// Symlinks that stay inside are still followed.
	must(os.Symlink(filepath.Join(ws.Root(), "d.old"), filepath.Join(ws.Root(), "in")))
	if got, err := ws.ReadText("in/f.txt", nil, nil); err != nil || got != "inside" {
		t.Errorf("read through an inside symlink: %q, %v", got, err)
	}
	if err := ws.WriteText("new/deep/h.txt", "x"); err != nil {
		t.Errorf("write into new directories: %v", err)
	}
}

// A file over the read cap is refused with ErrTooLarge, which the agent
// gets as "Invalid params" saying so; a FIFO neither blocks nor is read.
func TestWorkspaceReadCap(t *testing.T) {
	ws, err := NewWorkspace(filepath.Join(t.TempDir(), "ws"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(ws.Root(), "big.txt")
	must(os.WriteFile(big, make([]byte, MaxReadBytes+1), 0o600))
	if _, err := ws.ReadText("big.txt", nil, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("read of %d bytes: %v, want ErrTooLarge", MaxReadBytes+1, err)
	}
	if e := fsError(func() error { _, err := ws.ReadText("big.txt", nil, nil); return err }()); !strings.Contains(fmt.Sprint(e), "Invalid params") {
		t.Errorf("the agent is told %v", e)
	}
	must(os.Truncate(big, MaxReadBytes))
	if got, err := ws.ReadText("big.txt", nil, nil); err != nil || len(got) != MaxReadBytes {
		t.Errorf("read at the limit: %d bytes, %v", len(got), err)
	}
	must(syscall.Mkfifo(filepath.Join(ws.Root(), "fifo"), 0o600))
	done := make(chan error, 1)
	go func() { _, err := ws.ReadText("fifo", nil, nil); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("read a FIFO")
		}
	case <-time.After(20 * time.Second): // a bound on a failure, not a wait for success
		t.Error("the read of a FIFO blocks")
	}
}

// Stopping an agent kills its whole process group: a grandchild it left
// running (a command it started) does not outlive it (invariant 21), and
// the group's record is released once it is gone.
func TestProcessStopKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	var tracked, released int
	p, err := StartProcess(ProcessConfig{Command: "sh", Args: []string{"-c", "sleep 300 & echo $! > " + pidFile + "; cat > /dev/null"},
		Env: AgentEnv(nil, t.TempDir()), Grace: time.Hour,
		Track: func(pid int) func() { tracked = pid; return func() { released++ } }})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &grandchild)
	}
	if grandchild == 0 {
		t.Fatal("the agent did not start its child")
	}
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	// The agent exits at EOF; nothing may wait for the (hour-long) grace.
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second): // a bound on a failure
		t.Fatal("Stop waits for the agent's leftover child")
	}
	if tracked != p.PID() || released != 1 {
		t.Errorf("tracked pid %d (agent %d), released %d times", tracked, p.PID(), released)
	}
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", grandchild))
		return err == nil && !strings.Contains(string(b), ") Z ")
	}
	for deadline := time.Now().Add(10 * time.Second); alive() && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	if alive() {
		t.Errorf("the agent's child %d outlived the stopped agent", grandchild)
	}
}
