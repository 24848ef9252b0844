package acp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

func texts(ms []shownMsg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.text
	}
	return out
}

// Chunks stream into one message (edited as they arrive), tool calls and
// plans are status lines edited as they progress, an update for a tool
// call never announced gets a line of its own, and every displayed
// message is one transcript entry with its final text, in display order.
func TestTurnStreamsChunksToolCallsAndPlan(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", strings.Join([]string{
		"plan Read|Write",
		"say Hel",
		"say lo",
		"tool t1 Read notes.txt",
		"update t1 in_progress",
		"update t1 completed",
		"update ghost failed",
		"chunks 3 all done",
	}, "\n"))
	got := f.waitEntries(res.SessionKey, 5)
	want := []string{
		"📋 Plan\n🔄 Read\n⬜ Write",
		"Hello",
		"🔧 Read notes.txt · ✅ done",
		"🔧 tool call ghost · ❌ failed",
		"all done",
	}
	shown := f.live.snapshot()
	if strings.Join(texts(shown), "|") != strings.Join(want, "|") {
		t.Fatalf("displayed %q, want %q", texts(shown), want)
	}
	if h := shown[1].texts; len(h) < 2 || h[0] != "Hel" {
		t.Errorf("answer was not posted at its first chunk and edited: %q", h)
	}
	// Posted pending, then edited (always to the latest status: a state
	// that lasted less than an edit may be skipped).
	if h := shown[2].texts; len(h) < 2 || !strings.Contains(h[0], "pending") || !strings.Contains(h[len(h)-1], "done") {
		t.Errorf("tool line did not progress: %q", h)
	}
	for i, e := range got {
		if e.Text != want[i] {
			t.Errorf("entry %d = %q, want %q", i, e.Text, want[i])
		}
	}
	f.checkRule1(res.SessionKey)
	f.checkLog("initialize fs.read=true fs.write=true terminal=false")
	if n := f.notices.all(); len(n) != 1 || n[0].source != "intro" {
		t.Errorf("notices %v, want the intro only", n)
	}
}

// A long answer continues in a new message past 2000 characters.
func TestLongAnswerContinuesInNewMessage(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	long := strings.Repeat("x", 2500)
	f.say(res, "alice", "chunks 5 "+long)
	got := f.waitEntries(res.SessionKey, 2)
	if len([]rune(got[0].Text)) != 2000 || got[0].Text+got[1].Text != long {
		t.Fatalf("parts %d+%d runes", len([]rune(got[0].Text)), len([]rune(got[1].Text)))
	}
	f.checkRule1(res.SessionKey)
}

func TestPermission(t *testing.T) {
	cases := []struct {
		name    string
		answer  func(f *fixture, m shownMsg)
		said    string
		result  string
		written bool
	}{
		{"binder allows", func(f *fixture, m shownMsg) {
			if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "alice", channel); r != "" {
				t.Fatalf("binder refused: %s", r)
			}
		}, "permission: allow", "→ ✅ Allow (<@alice>)", true},
		{"operator rejects", func(f *fixture, m shownMsg) {
			if r := f.m.Choose(context.Background(), m.buttons[1].CustomID, "op", channel); r != "" {
				t.Fatalf("operator refused: %s", r)
			}
		}, "permission: reject", "→ 🚫 Reject (<@op>)", false},
		{"timeout rejects", func(f *fixture, m shownMsg) {
			f.h.wait(t, "the permission timer", func() bool { return f.timers.waiting(permTimeout) > 0 })
			f.timers.fire(permTimeout)
		}, "permission: reject", "→ ⏱️ No answer within 1h0m0s: 🚫 Reject", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			res := f.spawn()
			f.say(res, "alice", "ask w1 Write notes.txt\nwrite notes.txt hello")
			m := f.waitShown("asks permission")
			if len(m.buttons) != 2 || m.buttons[0].Label != "Allow" || m.buttons[1].Label != "Reject" || m.buttons[1].Style != delivery.ButtonDanger {
				t.Fatalf("buttons %+v", m.buttons)
			}
			// Anyone else is refused, and the request stays open.
			if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "mallory", channel); !strings.Contains(r, "Only <@alice>") {
				t.Fatalf("non-binder click: %q", r)
			}
			c.answer(f, m)
			f.waitShown(c.said)
			f.waitEntries(res.SessionKey, 2)
			final, _ := f.live.find("asks permission")
			if !strings.HasSuffix(final.text, c.result) || len(final.buttons) != 0 {
				t.Errorf("permission message %q (buttons %d), want it to end %q without buttons", final.text, len(final.buttons), c.result)
			}
			if r := f.m.Choose(context.Background(), m.buttons[0].CustomID, "alice", channel); r == "" {
				t.Error("a second click was taken")
			}
			_, err := os.Stat(filepath.Join(f.ac.Workspace, res.Thread.ConversationID, "notes.txt"))
			if c.written != (err == nil) {
				t.Errorf("file written=%v, want %v", err == nil, c.written)
			}
			f.checkRule1(res.SessionKey)
		})
	}
}

// /stop: session/cancel; the agent ends its turn "cancelled"; a pending
// permission is answered "cancelled"; someone else may not stop it.
func TestStopCancelsTurn(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say working\nask p1 Delete everything\nsay after")
	f.waitShown("asks permission")
	if _, err := f.m.Stop(context.Background(), f.binding(res), "mallory"); !authz.IsRefusal(err) {
		t.Fatalf("stop by someone else: %v", err)
	}
	if _, err := f.m.Stop(context.Background(), f.binding(res), "alice"); err != nil {
		t.Fatal(err)
	}
	f.waitShown("⏹️ Stopped.")
	f.waitEntries(res.SessionKey, 3)
	if m, _ := f.live.find("asks permission"); !strings.HasSuffix(m.text, "→ ⏹️ Cancelled.") {
		t.Errorf("permission message %q", m.text)
	}
	if _, ok := f.live.find("after"); ok {
		t.Error("the agent went on after the cancel")
	}
	f.checkRule1(res.SessionKey)

	count := func(sub string) int {
		n := 0
		for _, m := range f.live.snapshot() {
			if strings.Contains(m.text, sub) {
				n++
			}
		}
		return n
	}
	f.say(res, "alice", "say working\nwait")
	f.h.wait(t, "the second answer", func() bool { return count("working") == 2 })
	if _, err := f.m.Stop(context.Background(), f.binding(res), "op"); err != nil {
		t.Fatal(err)
	}
	f.h.wait(t, "the second stop", func() bool { return count("⏹️ Stopped.") == 2 })
	f.waitEntries(res.SessionKey, len(f.live.snapshot()))
	f.checkLog("cancelled ")
	f.checkRule1(res.SessionKey)
	if r, _ := f.m.Stop(context.Background(), f.binding(res), "alice"); !strings.Contains(r, "not working") {
		t.Errorf("idle stop: %q", r)
	}
}

// An agent that ignores session/cancel is ended after the grace period.
func TestStopKillsAgentIgnoringCancel(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say busy\nhang")
	f.waitShown("busy")
	if _, err := f.m.Stop(context.Background(), f.binding(res), "alice"); err != nil {
		t.Fatal(err)
	}
	f.h.wait(t, "the cancel grace timer", func() bool { return f.timers.waiting(cancelGrace) > 0 })
	f.timers.fire(cancelGrace)
	f.waitShown("did not stop its turn in time")
	f.waitEntries(res.SessionKey, 2)
	f.checkRule1(res.SessionKey)
	// The next message starts it again.
	f.say(res, "alice", "say back")
	f.waitShown("back")
}

// A crash mid-turn ends the turn with a notice; the next message restarts
// the agent, which cannot load the old session: the thread is told the
// context was lost.
func TestCrashMidTurnEndsTurnAndRestarts(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say before\ncrash")
	f.waitShown("stopped unexpectedly (it exited with status 3)")
	f.waitEntries(res.SessionKey, 2)
	f.say(res, "alice", "say again")
	f.waitShown("again")
	f.waitEntries(res.SessionKey, 3)
	ns := f.notices.all()
	if len(ns) != 2 || !strings.Contains(ns[1].text, "context of this thread's earlier messages is lost") {
		t.Fatalf("notices %v", ns)
	}
	f.checkRule1(res.SessionKey)
}

// After a bot restart, an agent offering loadSession resumes the session
// (its replayed history is not displayed again); one without it starts a
// new session and the thread is told the context was lost.
func TestResumeAfterRestart(t *testing.T) {
	for _, load := range []bool{true, false} {
		t.Run(map[bool]string{true: "loadSession", false: "no loadSession"}[load], func(t *testing.T) {
			f := newFixture(t, func(ac *acp.AgentConfig) {
				if load {
					ac.Args = []string{"-load"}
				}
			})
			res := f.spawn()
			f.say(res, "alice", "say one")
			f.waitEntries(res.SessionKey, 1)
			f.restart()
			f.say(res, "alice", "say two")
			f.waitShown("two")
			f.waitEntries(res.SessionKey, 2)
			lost := false
			for _, n := range f.notices.all() {
				lost = lost || strings.Contains(n.text, "is lost")
			}
			if lost == load {
				t.Errorf("context-lost notice shown=%v with loadSession=%v", lost, load)
			}
			if load {
				f.checkLog("load s")
			}
			if _, ok := f.live.find("replayed"); ok {
				t.Error("session/load's replay was displayed")
			}
			f.checkRule1(res.SessionKey)
		})
	}
}

// The agent's environment is explicit: the bot's secrets are not in it.
func TestAgentEnvironmentIsExplicit(t *testing.T) {
	t.Setenv("DISCORD_TOKEN", "bot-token-secret")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "env DISCORD_TOKEN\nenv OPENAI_API_KEY\nenv GEMINI_API_KEY\nenv HOME")
	got := f.waitEntries(res.SessionKey, 1)[0].Text
	for _, want := range []string{"env DISCORD_TOKEN unset", "env OPENAI_API_KEY unset", "env GEMINI_API_KEY=k-configured"} {
		if !strings.Contains(got, want) {
			t.Errorf("agent saw %q, want %q", got, want)
		}
	}
	if strings.Contains(got, "secret") {
		t.Errorf("a secret reached the agent: %q", got)
	}
	if !strings.Contains(got, ".agentbot-home") {
		t.Errorf("HOME is not the session's own: %q", got)
	}
}

// File requests outside the workspace are refused end to end.
func TestAgentFileAccessConfined(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(f.ac.Workspace, res.Thread.ConversationID, "out")); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(f.ac.Workspace, res.Thread.ConversationID)
	f.say(res, "alice", strings.Join([]string{
		"write " + filepath.Join(ws, "ok.txt") + " fine",
		"write " + filepath.Join(outside, "x.txt") + " bad",
		"write " + ws + "/../escape.txt bad",
		"write " + filepath.Join(ws, "out", "y.txt") + " bad",
		"read " + filepath.Join(ws, "ok.txt"),
		"read " + filepath.Join(ws, "missing.txt"), // reads as empty (see client.go)
	}, "\n"))
	got := f.waitEntries(res.SessionKey, 1)[0].Text
	if strings.Count(got, "write refused") != 3 || !strings.Contains(got, "read: fine") || !strings.HasSuffix(got, "read: fineread: ") {
		t.Fatalf("agent saw %q", got)
	}
	for _, p := range []string{filepath.Join(outside, "x.txt"), filepath.Join(f.ac.Workspace, "escape.txt"), filepath.Join(outside, "y.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

func TestStartAuthority(t *testing.T) {
	f := newFixture(t)
	if _, err := f.m.Start(context.Background(), acp.StartRequest{Agent: "script", Where: channel, UserID: "mallory"}); !authz.IsRefusal(err) {
		t.Fatalf("start by a user not listed: %v", err)
	}
	if _, err := f.m.Start(context.Background(), acp.StartRequest{Agent: "nope", Where: channel, UserID: "op"}); err == nil {
		t.Fatal("unknown agent started")
	}
}

// A message by someone who may not use the agent is not sent to it (and
// not recorded); they are told once.
func TestStrangerMessagesDoNotReachAgent(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "mallory", "say from mallory")
	f.say(res, "mallory", "say again from mallory")
	f.say(res, "alice", "say from alice")
	f.waitShown("from alice")
	f.waitEntries(res.SessionKey, 1)
	if _, ok := f.live.find("from mallory"); ok {
		t.Fatal("a stranger's message reached the agent")
	}
	var told int
	// The notice is posted on its own (a running turn may hold the thread).
	f.h.wait(t, "mallory told", func() bool {
		told = 0
		for _, n := range f.notices.all() {
			if strings.Contains(n.text, "<@mallory>") {
				told++
			}
		}
		return told > 0
	})
	if told != 1 {
		t.Errorf("mallory told %d times", told)
	}
	for _, e := range f.entries(res.SessionKey) {
		if strings.Contains(e.Text, "mallory") {
			t.Errorf("a stranger's message is in the transcript: %q", e.Text)
		}
	}
}

// An idle agent process is stopped (stdin closed); the session resumes at
// the next message. A binding that ends stops its agent.
func TestIdleShutdownAndBindingEnd(t *testing.T) {
	f := newFixture(t, func(ac *acp.AgentConfig) {
		ac.IdleTimeout = idleTimeout
		ac.Args = []string{"-load"}
	})
	res := f.spawn()
	f.say(res, "alice", "say one")
	f.waitEntries(res.SessionKey, 1)
	// Fire the idle timer the worker waits on (an earlier wait's timer may
	// be left over: fire each new one until the agent is stopped).
	f.h.wait(t, "the idle stop", func() bool {
		f.timers.fire(idleTimeout)
		return f.logs.has("acp agent idle: stopped")
	})
	f.say(res, "alice", "say two")
	f.waitShown("two")
	f.checkLog("stdin closed")
	f.checkLog("load s")
	f.say(res, "alice", "say three\nwait")
	f.waitShown("three")
	f.m.OnBindingEnded(f.binding(res))
	f.waitShown("⏹️ Stopped") // cancelled, or ended with the session: either way the turn ends
	f.waitEntries(res.SessionKey, 4)
	f.checkRule1(res.SessionKey)
}

// maxSessions caps running agent processes per agent; an ended session
// no longer counts.
func TestMaxSessions(t *testing.T) {
	f := newFixture(t, func(ac *acp.AgentConfig) { ac.MaxSessions = 1 })
	res := f.spawn()
	if _, err := f.m.Start(context.Background(), acp.StartRequest{Agent: "script", Where: channel, UserID: "alice"}); !errors.Is(err, acp.ErrTooMany) {
		t.Fatalf("second start: %v", err)
	}
	f.say(res, "alice", "say one")
	f.waitEntries(res.SessionKey, 1)
	f.m.OnBindingEnded(f.binding(res))
	if _, err := f.m.Start(context.Background(), acp.StartRequest{Agent: "script", Where: channel, UserID: "alice"}); err != nil {
		t.Fatalf("start after the first ended: %v", err)
	}
}

// Edits are throttled, and a throttled edit is shown when the interval
// has passed, even if nothing else happens in the turn.
func TestThrottledEditIsShownLater(t *testing.T) {
	f := newFixture(t)
	f.editInterval = 100 * time.Hour
	f.restart()
	res := f.spawn()
	f.say(res, "alice", "say Hel\nsay lo\nwait")
	m := f.waitShown("Hel")
	f.h.wait(t, "a scheduled edit", func() bool { return f.timers.fireAll(permTimeout, cancelGrace, idleTimeout) > 0 })
	f.waitShown("Hello")
	if m2, _ := f.live.find("Hello"); m2.id != m.id {
		t.Fatalf("Hello is in another message")
	}
	if _, err := f.m.Stop(context.Background(), f.binding(res), "alice"); err != nil {
		t.Fatal(err)
	}
	f.waitShown("⏹️ Stopped.")
	f.waitEntries(res.SessionKey, 2)
	f.checkRule1(res.SessionKey)
}

// A turn cut off by the bot's death (the record still says it runs) is
// reported in its thread at the next start.
func TestInterruptedTurnIsReportedAfterRestart(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say partial\nwait")
	f.waitShown("partial")
	recPath := filepath.Join(f.ac.Workspace, ".agentbot-sessions", res.Thread.ConversationID+".json")
	inFlight, err := os.ReadFile(recPath)
	if err != nil || !strings.Contains(string(inFlight), `"turnInFlight":"u`) {
		t.Fatalf("record while the turn runs: %s %v", inFlight, err)
	}
	f.stop()
	// What a SIGKILL would have left: the record as it was mid-turn.
	if err := os.WriteFile(recPath, inFlight, 0o600); err != nil {
		t.Fatal(err)
	}
	f.start()
	f.h.wait(t, "the interrupted-turn notice", func() bool {
		for _, n := range f.notices.all() {
			if strings.Contains(n.text, "that turn was interrupted") {
				return true
			}
		}
		return false
	})
	f.stop() // Run returns after the report is done
	if b, err := os.ReadFile(recPath); err != nil || strings.Contains(string(b), "turnInFlight") {
		t.Errorf("record after the report: %s %v (want the turn cleared, so it is told once)", b, err)
	}
	f.start()
}

// A conversation id is not a path: a Matrix thread "root" of $/../../x
// (the sender's content) binds a session whose workspace, home and record
// stay under the agent's workspace root, and the agent's writes land there
// (invariant 18).
func TestHostileConversationIDStaysInWorkspace(t *testing.T) {
	f := newFixture(t)
	parent := filepath.Dir(f.ac.Workspace)
	for i, id := range []string{"$/../../x", "..", "../escape", "a/../../../b"} {
		thread := binding.ConversationRef{Channel: "matrix", AccountID: "default", ConversationID: id, ParentConversationID: "!room:hs"}
		res, err := f.m.Start(context.Background(), acp.StartRequest{Agent: f.ac.Name, Where: thread, UserID: "alice"})
		if err != nil {
			t.Fatalf("start in %q: %v", id, err)
		}
		done := fmt.Sprintf("session %d wrote", i)
		f.say(res, "alice", "write notes.txt hello\nsay "+done)
		f.waitShown(done)
	}
	// Nothing outside the root: the parent holds only ws and the agent log.
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != filepath.Base(f.ac.Workspace) && e.Name() != filepath.Base(f.log) {
			t.Errorf("%s created beside the workspace root", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "x")); err == nil {
		t.Error("a workspace was made outside the root")
	}
	err = filepath.WalkDir(f.ac.Workspace, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "notes.txt" && filepath.Dir(filepath.Dir(p)) != f.ac.Workspace {
			t.Errorf("agent file at %s, not in a session directory directly under the root", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A graceful stop (SIGTERM: the manager's context ends) in the middle of
// a turn ends it visibly: the thread shows that the turn was interrupted,
// that line is recorded like the turn's other messages (Rule 1), and the
// next start does not report it a second time.
func TestShutdownMidTurnEndsItVisibly(t *testing.T) {
	f := newFixture(t)
	res := f.spawn()
	f.say(res, "alice", "say partial\nwait")
	f.waitShown("partial")
	f.stop()
	if _, ok := f.live.find("turn here was interrupted"); !ok {
		t.Fatalf("no interrupted notice after a graceful stop; displayed %q", texts(f.live.snapshot()))
	}
	f.waitEntries(res.SessionKey, 2)
	f.checkRule1(res.SessionKey)
	recPath := filepath.Join(f.ac.Workspace, ".agentbot-sessions", res.Thread.ConversationID+".json")
	if b, err := os.ReadFile(recPath); err != nil || strings.Contains(string(b), "turnInFlight") {
		t.Errorf("record after the stop: %s %v (the turn was told; it must not be told again)", b, err)
	}
	f.start()
	f.stop()
	for _, n := range f.notices.all() {
		if strings.Contains(n.text, "interrupted") {
			t.Errorf("reported twice: %q", n.text)
		}
	}
	f.start()
}
