package bot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/model/modeltest"
)

// TestCrashMidACPTurn kills the real bot binary (SIGKILL) while an ACP
// agent's turn is displayed (an answer, a tool-call line and a permission
// request with its buttons, none of them finished), restarts it, and
// shows: every message the turn had shown is finished in place (its
// recorded text with the interrupted mark, no buttons) and recorded in the
// thread's transcript; nothing is posted twice and nothing is lost; the
// only new message is the interrupted-turn notice; transcript == display
// (Rule 1). On the old path (entries written by the turn when it ends) the
// three messages had no entries after the restart.
func TestCrashMidACPTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	dir := t.TempDir()
	bin := buildBot(t, dir)
	agent := acptest.Build(t)
	emu := discordtest.NewTest(t, discordtest.Options{})
	g := emu.AddGuild("crash")
	ch, err := emu.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := emu.AddMember(g.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	olga, err := emu.AddMember(g.ID, "olga")
	if err != nil {
		t.Fatal(err)
	}
	llm := modeltest.NewOpenAIFake(t, "")
	storePath := filepath.Join(dir, "bot.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`discord:
  token: %q
  apiURL: %q
  operators: {users: [%q]}
  threadBindings: {enabled: true}
models:
  default: {provider: openai, baseURL: %q, model: fake}
acp:
  permissionTimeout: 1h
  agents:
    script:
      command: %q
      workspace: %q
      users: [%q]
store: {path: %q}
http: {listen: ""}
log: {level: warn, format: json}
`, emu.Token(), emu.URL(), olga.ID, llm.URL, agent, filepath.Join(dir, "acp"), alice.ID, storePath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	start := func() *exec.Cmd { return runBot(t, bin, cfgPath, &logs) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := emu.Wait(ctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v\nlogs:\n%s", what, err, logs.String())
		}
	}
	var thread string
	bot := func() []discordtest.Message {
		var out []discordtest.Message
		for _, m := range emu.Messages(thread) {
			if m.Author.ID == emu.BotUserID() {
				out = append(out, m)
			}
		}
		return out
	}
	find := func(ms []discordtest.Message, sub string) (discordtest.Message, bool) {
		for _, m := range ms {
			if strings.Contains(m.Content, sub) {
				return m, true
			}
		}
		return discordtest.Message{}, false
	}

	cmd := start()
	wait("the bot to connect", func() bool { return emu.GatewayStats().Identifies >= 1 && len(emu.Commands("")) > 0 })
	in, err := emu.InvokeCommand(ch.ID, alice.ID, "spawn", discordtest.CommandOption{Name: "agent", Value: "script"},
		discordtest.CommandOption{Name: "task", Value: "say first answer\ntool t1 Write notes.txt\nask t1 Write notes.txt\nsay never shown"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emu.WaitResponses(ctx, in.ID, 1); err != nil {
		t.Fatalf("/spawn not answered: %v", err)
	}
	wait("the thread", func() bool { return len(emu.Threads(ch.ID)) == 1 })
	thread = emu.Threads(ch.ID)[0].ID
	// Killed while the turn waits for the permission answer: the answer,
	// the tool line and the request (with its buttons) are displayed,
	// none finished.
	wait("the permission request with its buttons", func() bool {
		m, ok := find(bot(), "asks permission")
		return ok && len(m.Buttons()) == 2
	})
	wait("the answer and the tool line", func() bool {
		ms := bot()
		_, a := find(ms, "first answer")
		_, b := find(ms, "🔧 Write notes.txt")
		return a && b
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	before := bot()
	turnMsgs := 0
	for _, m := range before {
		if !strings.Contains(m.Content, "is bound to this thread") {
			turnMsgs++
		}
	}
	if turnMsgs != 3 {
		t.Fatalf("%d turn messages shown at the kill, want 3", turnMsgs)
	}

	ids := emu.GatewayStats().Identifies
	cmd = start()
	wait("the bot to reconnect", func() bool { return emu.GatewayStats().Identifies > ids })
	wait("the interrupted turn's messages finished", func() bool {
		ms := bot()
		done := 0
		for _, m := range ms {
			if strings.HasSuffix(m.Content, delivery.InterruptedMark) && len(m.Buttons()) == 0 {
				done++
			}
		}
		_, notice := find(ms, "that turn was interrupted")
		return done == 3 && notice
	})
	stopBot(t, cmd, &logs)

	after := bot()
	byID := map[string]discordtest.Message{}
	for _, m := range after {
		byID[m.ID] = m
	}
	for _, m := range before {
		got, ok := byID[m.ID]
		switch {
		case !ok:
			t.Errorf("message %q is gone after the restart", m.Content)
		case strings.Contains(m.Content, "is bound to this thread"):
		case got.Content != m.Content+delivery.InterruptedMark:
			t.Errorf("message %q finished as %q, want its shown text with the interrupted mark", m.Content, got.Content)
		}
		delete(byID, m.ID)
	}
	for _, m := range byID {
		if !strings.Contains(m.Content, "that turn was interrupted") {
			t.Errorf("a new message after the restart: %q", m.Content)
		}
	}
	if len(byID) != 1 {
		t.Errorf("%d new messages after the restart, want the interrupted-turn notice only", len(byID))
	}
	for _, m := range after {
		if strings.Contains(m.Content, "never shown") && !strings.Contains(m.Content, "is bound to this thread") {
			t.Errorf("the agent's turn went on after the restart: %q", m.Content)
		}
	}
	st := openStopped(t, storePath)
	problems, err := rule1.Check(ctx, rule1.Emulator(emu), st, []string{ch.ID, thread}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("rule 1: %s", p)
	}
}
