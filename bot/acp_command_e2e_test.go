package bot

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/config"
)

// needBwrap skips when bwrap is missing or cannot create namespaces here.
func needBwrap(t *testing.T) {
	t.Helper()
	sb, err := acp.FindSandbox(false)
	if err != nil {
		t.Skipf("bwrap not installed (Debian package bubblewrap): %v", err)
	}
	if err := sb.Check(); err != nil {
		t.Skip(err)
	}
}

// TestE2EACPCommands: an agent with terminal: true asks for a command;
// the thread shows it with Allow/Deny; a stranger's click is refused, the
// binder allows it; it runs in the sandbox (a write outside the workspace
// fails, a network connect fails); its output is in the thread (its own
// live message) and reaches the agent; /ps lists a running command and
// its Kill button ends it; transcript == display (Rule 1).
func TestE2EACPCommands(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the network check needs a client")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	here, _ := os.Getwd()
	outside, err := os.MkdirTemp(here, "acp-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	h, ws := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
		c.Command, c.Terminal, c.CommandTimeout = acptest.Build(t), true, time.Hour
	})
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	probe := "echo inside > made.txt; touch " + outside + "/escaped 2>/dev/null || echo write-outside-refused; " +
		py + ` -c 'import socket; socket.create_connection(("127.0.0.1", ` + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + `), 5)' 2>/dev/null || echo connect-refused`
	thread := acpSpawn(t, h, "script", "run "+probe)
	ask := acpMessage(t, h, thread.ID, "asks permission: run `sh -c")
	waitUntil(t, h, "the approval buttons", func() bool {
		m, _ := h.emu.Message(ask.ID)
		ask = m
		return len(m.Buttons()) == 2
	})
	if !strings.Contains(ask.Content, "in `.`") {
		t.Errorf("approval message %q does not name the directory", ask.Content)
	}
	if r := acpClick(t, h, ask, bob.ID, "Allow"); !r.Ephemeral || !strings.Contains(r.Content, "Only <@"+h.alice.ID+">") {
		t.Fatalf("a stranger's click answered %+v", r)
	}
	if _, err := os.Stat(filepath.Join(ws, thread.ID, "made.txt")); err == nil {
		t.Fatal("the command ran before it was allowed")
	}
	if r := acpClick(t, h, ask, h.alice.ID, "Allow"); r.Type != 6 {
		t.Fatalf("the binder's click answered %+v", r)
	}
	said := acpMessage(t, h, thread.ID, "ran exit=0")
	for _, want := range []string{"write-outside-refused", "connect-refused"} {
		if !strings.Contains(said.Content, want) {
			t.Errorf("the agent got %q, want %q in it", said.Content, want)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("the command wrote outside the workspace")
	}
	if b, err := os.ReadFile(filepath.Join(ws, thread.ID, "made.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("workspace file %q %v", b, err)
	}
	acpMessage(t, h, thread.ID, "· ✅ exit 0")
	waitUntil(t, h, "the approval to show its answer", func() bool {
		m, _ := h.emu.Message(ask.ID)
		return strings.Contains(m.Content, "→ ✅ Allow (<@"+h.alice.ID+">)") && len(m.Buttons()) == 0
	})

	// A long command: /ps lists it; its Kill button ends it.
	adSay(t, h, thread.ID, "run echo long-started; sleep 987")
	ask2 := acpMessage(t, h, thread.ID, "asks permission: run `sh -c 'echo long-started; sleep 987'`")
	waitUntil(t, h, "the second approval's buttons", func() bool {
		m, _ := h.emu.Message(ask2.ID)
		ask2 = m
		return len(m.Buttons()) == 2
	})
	acpClick(t, h, ask2, h.alice.ID, "Allow")
	running := acpMessage(t, h, thread.ID, "\nlong-started") // its output, in its own message
	if r := adResponded(t, h, adInvoke(t, h, thread.ID, "ps")); !r.Ephemeral || !strings.Contains(r.Content, "sleep 987") {
		t.Fatalf("/ps answered %+v", r)
	}
	waitUntil(t, h, "the Kill button", func() bool {
		m, _ := h.emu.Message(running.ID)
		running = m
		return len(m.Buttons()) == 1
	})
	if r := acpClick(t, h, running, bob.ID, "Kill"); !r.Ephemeral || !strings.Contains(r.Content, "Only <@"+h.alice.ID+">") {
		t.Fatalf("a stranger's kill answered %+v", r)
	}
	acpClick(t, h, running, h.alice.ID, "Kill")
	acpMessage(t, h, thread.ID, "⏹️ killed after")
	acpMessage(t, h, thread.ID, "ran exit= signal=SIGTERM")
	finishBot(t, h, h.general.ID, thread.ID)
}
