package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
)

// acpBot starts the bot with one ACP agent, name, that alice may use
// (users: [alice]); agent fills in its command, args and env.
func acpBot(t *testing.T, name string, agent func(h *harness, c *config.ACPAgentConfig)) (*harness, string) {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.close()
		for _, v := range h.emu.Violations() {
			if v.Kind == "allowed_mentions" {
				t.Errorf("ping guard: %s", v)
			}
		}
	})
	// One named operator: other members (Manage Server in the emulator)
	// are not operators then.
	olga, err := h.emu.AddMember(h.guild.ID, "olga")
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Discord.Operators.Users = []string{olga.ID}
	ws := filepath.Join(t.TempDir(), "acp")
	c := config.ACPAgentConfig{Workspace: ws, Users: []string{h.alice.ID}, MaxSessions: 4, Sandbox: config.SandboxBwrap, Approve: config.ApproveAsk}
	agent(h, &c)
	h.cfg.ACP.Agents = map[string]config.ACPAgentConfig{name: c}
	if err := h.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h, ws
}

// acpSpawn runs /spawn agent:<name> task:<task> as alice and returns the new thread.
func acpSpawn(t *testing.T, h *harness, name, task string) discordtest.Channel {
	t.Helper()
	in := adInvoke(t, h, h.general.ID, "spawn", discordtest.CommandOption{Name: "task", Value: task}, discordtest.CommandOption{Name: "agent", Value: name})
	r := adResponded(t, h, in)
	if !strings.Contains(r.Content, "Started **"+name+"**") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	threads := h.emu.Threads(h.general.ID)
	if len(threads) != 1 {
		t.Fatalf("threads %+v", threads)
	}
	return threads[0]
}

// acpMessage waits for a bot message in channel containing sub.
func acpMessage(t *testing.T, h *harness, channel, sub string) discordtest.Message {
	t.Helper()
	var found discordtest.Message
	waitUntil(t, h, "a message showing "+sub, func() bool {
		for _, m := range h.emu.Messages(channel) {
			if m.Author.ID == h.emu.BotUserID() && strings.Contains(m.Content, sub) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// agentStartBound bounds the wait for a real agent program's first answer:
// node starting a large program inside the sandbox takes seconds alone and
// far longer beside the whole suite (a failure bound, not a pace).
const agentStartBound = 2 * time.Minute

// acpFirstAnswer is acpMessage for a real agent's first answer, within
// agentStartBound.
func acpFirstAnswer(t *testing.T, h *harness, channel, sub string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), agentStartBound)
	defer cancel()
	err := h.world.Emu.Wait(ctx, func() bool {
		for _, m := range h.emu.Messages(channel) {
			if m.Author.ID == h.emu.BotUserID() && strings.Contains(m.Content, sub) {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("waiting for the agent's first answer %q: %v", sub, err)
	}
}

// acpClick has user click the button labelled label and returns the bot's answer.
func acpClick(t *testing.T, h *harness, m discordtest.Message, userID, label string) discordtest.InteractionResponse {
	t.Helper()
	for _, b := range m.Buttons() {
		if b.Label == label {
			in, err := h.emu.ClickButton(m.ID, userID, b.CustomID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.emu.WaitResponses(t.Context(), in.ID, 1)
			if err != nil {
				t.Fatalf("click not answered: %v", err)
			}
			return got.Responses[0]
		}
	}
	t.Fatalf("message %q has no button %q (%+v)", m.Content, label, m.Buttons())
	return discordtest.InteractionResponse{}
}

// TestE2EACPScriptedAgent: /spawn agent:script binds a new thread to an
// ACP session; thread messages are prompts; the answer, tool lines and a
// permission request are displayed; a stranger's click and /stop are
// refused ephemerally; the binder's click allows the write (the file is in
// the session's workspace); /stop cancels a running turn; the transcript
// equals the display (Rule 1).
func TestE2EACPScriptedAgent(t *testing.T) {
	t.Parallel()
	h, ws := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
		c.Command = acptest.Build(t)
	})
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	thread := acpSpawn(t, h, "script", "say hello from the agent")
	acpMessage(t, h, thread.ID, "is bound to this thread")
	acpMessage(t, h, thread.ID, "hello from the agent")

	adSay(t, h, thread.ID, "tool t1 Write notes.txt\nask t1 Write notes.txt\nwrite notes.txt written by the agent\nupdate t1 completed")
	perm := acpMessage(t, h, thread.ID, "asks permission: Write notes.txt")
	waitUntil(t, h, "the permission buttons", func() bool {
		m, _ := h.emu.Message(perm.ID)
		perm = m
		return len(m.Buttons()) == 2
	})
	if r := acpClick(t, h, perm, bob.ID, "Allow"); !r.Ephemeral || !strings.Contains(r.Content, "Only <@"+h.alice.ID+">") {
		t.Fatalf("a stranger's click answered %+v", r)
	}
	if r := acpClick(t, h, perm, h.alice.ID, "Allow"); r.Type != 6 {
		t.Fatalf("the binder's click answered %+v", r)
	}
	acpMessage(t, h, thread.ID, "wrote notes.txt")
	acpMessage(t, h, thread.ID, "🔧 Write notes.txt · ✅ done")
	if b, err := os.ReadFile(filepath.Join(ws, thread.ID, "notes.txt")); err != nil || string(b) != "written by the agent" {
		t.Fatalf("workspace file: %q %v", b, err)
	}
	// The answer is edited in (paced with the turn's other edits).
	waitUntil(t, h, "the permission message to show the answer without buttons", func() bool {
		m, _ := h.emu.Message(perm.ID)
		return strings.Contains(m.Content, "→ ✅ Allow (<@"+h.alice.ID+">)") && len(m.Buttons()) == 0
	})

	adSay(t, h, thread.ID, "say working on it\nwait")
	acpMessage(t, h, thread.ID, "working on it")
	in, err := h.emu.InvokeCommand(thread.ID, bob.ID, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if r := adResponded(t, h, in); !r.Ephemeral || !strings.Contains(r.Content, "who started this agent") {
		t.Fatalf("a stranger's /stop answered %+v", r)
	}
	if r := adResponded(t, h, adInvoke(t, h, thread.ID, "stop")); !r.Ephemeral || !strings.Contains(r.Content, "stop its turn") {
		for _, m := range h.emu.Messages(thread.ID) {
			t.Logf("%s %q", m.ID, m.Content)
		}
		t.Fatalf("/stop answered %q", r.Content)
	}
	acpMessage(t, h, thread.ID, "⏹️ Stopped.")
	finishBot(t, h, h.general.ID, thread.ID)
}

// /focus target:acp:<name> in a channel binds a new thread to a new ACP
// session (no task: the agent is started and waits); someone who may not
// use the agent is refused.
func TestE2EACPFocus(t *testing.T) {
	t.Parallel()
	h, _ := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
		c.Command = acptest.Build(t)
	})
	bob, err := h.emu.AddMember(h.guild.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	in, err := h.emu.InvokeCommand(h.general.ID, bob.ID, "focus", discordtest.CommandOption{Name: "target", Value: "acp:script"})
	if err != nil {
		t.Fatal(err)
	}
	if r := adResponded(t, h, in); !r.Ephemeral || !strings.Contains(r.Content, "Only the bot's configured operator users and the users") {
		t.Fatalf("a stranger's /focus answered %q", r.Content)
	}
	r := adResponded(t, h, adInvoke(t, h, h.general.ID, "focus", discordtest.CommandOption{Name: "target", Value: "acp:script"}))
	threads := h.emu.Threads(h.general.ID)
	if !strings.Contains(r.Content, "Started **script**") || len(threads) != 1 {
		t.Fatalf("/focus answered %q, threads %d", r.Content, len(threads))
	}
	acpMessage(t, h, threads[0].ID, "is bound to this thread")
	adSay(t, h, threads[0].ID, "say focused and working")
	acpMessage(t, h, threads[0].ID, "focused and working")
	finishBot(t, h, h.general.ID, threads[0].ID)
}
