package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/config"
)

// TestE2EACPTurnOutlivesRecoveryCutoff (issue 27.1, end to end): an ACP
// turn waits on a permission request far longer than the outbox recovery's
// cutoff (a person may take minutes to click). A recovery pass that takes
// everything pending older than an hour from now - every record of this
// turn - leaves the turn's live messages alone: the request keeps its text
// and buttons, nothing reads "interrupted", and the click then finishes
// the turn with the transcript equal to the display.
func TestE2EACPTurnOutlivesRecoveryCutoff(t *testing.T) {
	t.Parallel()
	h, _ := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
		c.Command = acptest.Build(t)
	})
	thread := acpSpawn(t, h, "script", "say ready")
	acpMessage(t, h, thread.ID, "ready")
	adSay(t, h, thread.ID, "tool t1 Write notes.txt\nask t1 Write notes.txt\nwrite notes.txt by the agent\nupdate t1 completed")
	perm := acpMessage(t, h, thread.ID, "asks permission: Write notes.txt")
	waitUntil(t, h, "the permission buttons", func() bool {
		m, _ := h.emu.Message(perm.ID)
		perm = m
		return len(m.Buttons()) == 2
	})
	before := h.emu.Messages(thread.ID)

	if _, err := h.app.outbound.Recover(t.Context(), time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("recovery pass: %v", err)
	}
	after := h.emu.Messages(thread.ID)
	if len(after) != len(before) {
		t.Fatalf("the recovery pass changed the thread from %d to %d messages", len(before), len(after))
	}
	for i, m := range after {
		if m.Content != before[i].Content || len(m.Buttons()) != len(before[i].Buttons()) {
			t.Fatalf("the recovery pass rewrote message %s: %q (%d buttons) -> %q (%d buttons)",
				m.ID, before[i].Content, len(before[i].Buttons()), m.Content, len(m.Buttons()))
		}
		if strings.Contains(m.Content, "interrupted") {
			t.Fatalf("message %s reads %q while its turn waits", m.ID, m.Content)
		}
	}

	acpClick(t, h, perm, h.alice.ID, "Allow")
	acpMessage(t, h, thread.ID, "wrote notes.txt")
	acpMessage(t, h, thread.ID, "🔧 Write notes.txt · ✅ done")
	finishBot(t, h, h.general.ID, thread.ID)
}

// TestE2EACPUnfocusWhileTurnWaits (found by the soak's ACP actions, seed 6):
// /unfocus in an ACP thread while its turn waits on a permission request.
// The binding's end cancels the turn; its messages are finished (the
// request reads cancelled, the turn says it stopped) before the farewell is
// posted, so the thread shows them in that order and its transcript holds
// them in the same order (it held the cancelled request after the
// farewell).
func TestE2EACPUnfocusWhileTurnWaits(t *testing.T) {
	t.Parallel()
	h, _ := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
		c.Command = acptest.Build(t)
	})
	thread := acpSpawn(t, h, "script", "tool t1 Write notes.txt\nask t1 Write notes.txt\nwrite notes.txt by the agent\nupdate t1 completed")
	perm := acpMessage(t, h, thread.ID, "asks permission: Write notes.txt")
	waitUntil(t, h, "the permission buttons", func() bool {
		m, _ := h.emu.Message(perm.ID)
		return len(m.Buttons()) == 2
	})
	in, err := h.emu.InvokeCommand(thread.ID, h.alice.ID, "unfocus")
	if err != nil {
		t.Fatal(err)
	}
	adResponded(t, h, in)
	farewell := acpMessage(t, h, thread.ID, "Session ended")
	for _, m := range h.emu.Messages(thread.ID) {
		if m.Author.ID == h.emu.BotUserID() && m.ID > farewell.ID && !strings.Contains(m.Content, "Session ended") {
			t.Errorf("the ended turn posted %q after the farewell", m.Content)
		}
	}
	finishBot(t, h, h.general.ID, thread.ID)
}
