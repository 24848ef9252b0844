package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbot/agentbot/acp"
)

func withTerminal(o acp.CommandOptions) fixOpt {
	return func(ac *acp.AgentConfig) { ac.Terminal, ac.Commands = true, o }
}

// fakeTracker records the process groups started and released.
type fakeTracker struct {
	mu               sync.Mutex
	started, running map[string][]int
}

func (f *fakeTracker) Started(_ context.Context, pid int, kind, _ string) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started[kind] = append(f.started[kind], pid)
	f.running[kind] = append(f.running[kind], pid)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, p := range f.running[kind] {
			if p == pid {
				f.running[kind] = append(f.running[kind][:i], f.running[kind][i+1:]...)
				break
			}
		}
	}
}

func (f *fakeTracker) count(m map[string][]int, kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(m[kind])
}

// A command runs under a PTY in the session's workspace with only the
// agent's configured environment; its output reaches the agent and is
// shown in the thread; its process group is recorded while it runs.
func TestCommandRunsInWorkspaceUnderPTY(t *testing.T) {
	t.Setenv("BOT_SECRET", "s3cret-of-the-bot")
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	tr := &fakeTracker{started: map[string][]int{}, running: map[string][]int{}}
	f.procs = tr
	f.restart()
	res := f.spawn()
	f.say(res, "alice", `run pwd; test -t 0 && echo tty=yes; echo "key=$GEMINI_API_KEY bot=$BOT_SECRET"; exit 3`)
	m := f.waitShown("ran exit=3")
	ws, _ := filepath.EvalSymlinks(filepath.Join(f.ac.Workspace, res.Thread.ConversationID))
	for _, want := range []string{ws + "\r\n", "tty=yes", "key=k-configured bot=\r\n"} {
		if !strings.Contains(m.text, want) {
			t.Errorf("agent saw %q, want it to hold %q", m.text, want)
		}
	}
	cmd := f.waitShown("💻 `sh -c")
	f.waitEntries(res.SessionKey, 2)
	cmd, _ = f.live.find("💻 `sh -c")
	if !strings.Contains(cmd.text, "in `.` · ❌ exit 3") || !strings.Contains(cmd.text, "tty=yes") || strings.Contains(cmd.text, ws) && strings.Contains(cmd.text, "in `"+ws) {
		t.Errorf("command message %q", cmd.text)
	}
	if tr.count(tr.started, "command") != 1 || tr.count(tr.running, "command") != 0 {
		t.Errorf("command groups started %v running %v", tr.started, tr.running)
	}
	f.checkRule1(res.SessionKey)
}

// outputByteLimit keeps the end of the output, cut at a character
// boundary; without a limit the output is still capped.
func TestCommandOutputCap(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	res := f.spawn()
	// 2-byte é: a 9-byte limit over "aé€xyz\r\n" (a1 é2 €3 xyz3 crlf2 = 11 bytes) cuts inside é.
	f.say(res, "alice", "run limit=9 printf 'a\\303\\251\\342\\202\\254xyz\\n'")
	m := f.waitShown("ran exit=0")
	out := m.text[strings.Index(m.text, "output=")+len("output="):]
	if !strings.Contains(m.text, "truncated=true") || out != "€xyz\r\n" || !utf8.ValidString(out) {
		t.Errorf("agent saw %q (output %q), want the last whole characters within 9 bytes", m.text, out)
	}
}

// With the terminal off (the default) the agent cannot run anything.
func TestTerminalOffRefusesCommands(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "run touch made")
	f.waitShown("run refused")
	if _, err := os.Stat(filepath.Join(f.ac.Workspace, res.Thread.ConversationID, "made")); err == nil {
		t.Error("the command ran")
	}
	f.checkLog("terminal=false")
}

// approve: ask shows each command with Allow/Deny; a stranger's click is
// refused; the binder's choice is recorded in the message; a denied
// command never runs.
func TestCommandApproval(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run("allow="+strconv.FormatBool(allow), func(t *testing.T) {
			f := newFixture(t, withTerminal(acp.CommandOptions{Approve: true}))
			res := f.spawn()
			f.say(res, "alice", "run touch made")
			m := f.waitShown("asks permission: run `sh -c 'touch made'` in `.`")
			if len(m.buttons) != 2 || m.buttons[0].Label != "Allow" || m.buttons[1].Label != "Deny" {
				t.Fatalf("buttons %+v", m.buttons)
			}
			if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "mallory", channel); !strings.Contains(r, "Only <@alice>") {
				t.Fatalf("stranger's click: %q", r)
			}
			b, result, said := m.buttons[0], "→ ✅ Allow (<@alice>)", "ran exit=0"
			if !allow {
				b, result, said = m.buttons[1], "→ 🚫 Deny (<@alice>)", "run refused"
			}
			if r := f.m.Choose(context.Background(), b.CustomID, "alice", channel); r != "" {
				t.Fatalf("binder's click: %q", r)
			}
			f.waitShown(said)
			if m, _ := f.live.find("asks permission"); !strings.HasSuffix(m.text, result) || len(m.buttons) != 0 {
				t.Errorf("approval message %q", m.text)
			}
			_, err := os.Stat(filepath.Join(f.ac.Workspace, res.Thread.ConversationID, "made"))
			if allow != (err == nil) {
				t.Errorf("ran=%v, want %v", err == nil, allow)
			}
		})
	}
}

// A command past commandTimeout is killed (its group) and reported.
func TestCommandTimeout(t *testing.T) {
	const timeout = 7 * time.Minute
	f := newFixture(t, withTerminal(acp.CommandOptions{Timeout: timeout}))
	res := f.spawn()
	f.say(res, "alice", "run echo started; sleep 1000")
	f.waitShown("started")
	f.h.wait(t, "the command timer", func() bool { return f.timers.waiting(timeout) > 0 })
	f.timers.fire(timeout)
	f.waitShown("ran exit= signal=SIGTERM")
	f.waitEntries(res.SessionKey, 2)
	if m, _ := f.live.find("💻"); !strings.Contains(m.text, "⏱️ killed: it ran past commandTimeout (7m0s)") {
		t.Errorf("command message %q", m.text)
	}
}

// /stop during a long command kills it and its children.
func TestStopKillsCommandAndChildren(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	res := f.spawn()
	f.say(res, "alice", "run sleep 1000 & echo child=$!; wait")
	pid := f.waitChild()
	if !alive(pid) {
		t.Fatalf("child %d not running", pid)
	}
	if _, err := f.m.Stop(context.Background(), f.binding(res), "alice"); err != nil {
		t.Fatal(err)
	}
	f.waitShown("⏹️ killed after")
	waitGone(t, pid)
}

// When the session ends (binding ended, bot stop), its commands end too.
func TestSessionEndKillsCommands(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	res := f.spawn()
	f.say(res, "alice", "run sleep 1000 & echo child=$!; wait")
	pid := f.waitChild()
	f.stop()
	waitGone(t, pid)
}

var childRE = regexp.MustCompile(`child=(\d+)`)

// waitChild waits for a command's message to show "child=<pid>".
func (f *fixture) waitChild() int {
	f.t.Helper()
	pid := 0
	f.h.wait(f.t, "a child's pid", func() bool {
		for _, m := range f.live.snapshot() {
			if sm := childRE.FindStringSubmatch(m.text); sm != nil {
				pid, _ = strconv.Atoi(sm[1])
				return true
			}
		}
		return false
	})
	return pid
}

// alive: the process exists and is no zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// waitGone waits (bounded) for a SIGKILLed process to be gone: the signal
// is sent; the kernel ends it as soon as it is scheduled.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for alive(pid) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("process %d still runs", pid)
		}
	}
}

// An approval waiting when the bot dies is never taken as given: after the
// restart the thread says it expired, its button answers nothing, and the
// command never ran.
func TestApprovalWaitingAtRestartExpires(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{Approve: true}))
	res := f.spawn()
	f.say(res, "alice", "run touch made")
	ask := f.waitShown("asks permission")
	recPath := filepath.Join(f.ac.Workspace, ".agentbot-sessions", res.Thread.ConversationID+".json")
	inFlight, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	f.stop()
	// What a SIGKILL would have left: the record as it was mid-turn.
	if err := os.WriteFile(recPath, inFlight, 0o600); err != nil {
		t.Fatal(err)
	}
	f.start()
	f.h.wait(t, "the interrupted-turn notice", func() bool {
		for _, n := range f.notices.all() {
			if strings.Contains(n.text, "a command waiting for approval expired without running") {
				return true
			}
		}
		return false
	})
	if r := f.m.Choose(context.Background(), ask.buttons[0].CustomID, "alice", channel); !strings.Contains(r, "no longer waiting") {
		t.Errorf("a click on the old Allow button: %q", r)
	}
	if _, err := os.Stat(filepath.Join(f.ac.Workspace, res.Thread.ConversationID, "made")); err == nil {
		t.Error("the command ran")
	}
}

// /ps lists the running commands; a command's Kill button ends it for
// the binder (a stranger's click is refused) and leaves its message.
func TestPsAndKillButton(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	res := f.spawn()
	if text, err := f.m.Processes(context.Background(), f.binding(res)); err != nil || !strings.Contains(text, "running no command") {
		t.Fatalf("idle ps: %q %v", text, err)
	}
	f.say(res, "alice", "run sleep 1000 & echo child=$!; wait")
	pid := f.waitChild()
	text, err := f.m.Processes(context.Background(), f.binding(res))
	if err != nil || !strings.Contains(text, "running 1 command(s)") || !strings.Contains(text, "`sh -c 'sleep 1000 & echo child=$!; wait'` in `.`") {
		t.Fatalf("ps: %q %v", text, err)
	}
	m := f.waitShown("child=")
	if len(m.buttons) != 1 || m.buttons[0].Label != "Kill" {
		t.Fatalf("command message buttons %+v", m.buttons)
	}
	if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "mallory", channel); !strings.Contains(r, "Only <@alice>") {
		t.Fatalf("stranger's kill: %q", r)
	}
	if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "alice", channel); r != "" {
		t.Fatalf("binder's kill: %q", r)
	}
	f.waitShown("ran exit= signal=SIGTERM")
	waitGone(t, pid)
	f.waitEntries(res.SessionKey, 2)
	if m, _ := f.live.find("💻"); !strings.Contains(m.text, "⏹️ killed after") || len(m.buttons) != 0 {
		t.Errorf("command message %q buttons %+v", m.text, m.buttons)
	}
	f.checkRule1(res.SessionKey)
}

// A command without arguments that is a shell line (Claude Code sends its
// Bash tool's command so) runs in the shell and is shown as written.
func TestShellLineCommand(t *testing.T) {
	f := newFixture(t, withTerminal(acp.CommandOptions{}))
	res := f.spawn()
	f.say(res, "alice", "runline echo one && echo two | tr a-z A-Z")
	m := f.waitShown("ran exit=0")
	if !strings.Contains(m.text, "one\r\nTWO") {
		t.Errorf("agent saw %q", m.text)
	}
	f.waitEntries(res.SessionKey, 2)
	if c, _ := f.live.find("💻"); !strings.HasPrefix(c.text, "💻 `echo one && echo two | tr a-z A-Z` in `.`") {
		t.Errorf("command message %q", c.text)
	}
}
