package bot

import (
	"slices"
	"testing"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
)

// delAsk has alice mention the bot in channel and waits for the reply; it
// is also a barrier: events the gateway received before are applied.
func delAsk(t *testing.T, h *harness, channel, text string) discordtest.Message {
	t.Helper()
	before := len(h.emu.Messages(channel))
	msg, err := h.emu.UserSay(channel, h.alice.ID, "<@"+h.emu.BotUserID()+"> "+text)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply to "+text, func() bool {
		ms := h.emu.Messages(channel)
		return len(ms) >= before+2 && ms[len(ms)-1].Author.ID == h.emu.BotUserID()
	})
	return msg
}

func messageIDs(ms []discordtest.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// TestDeletedThreadAfterUnbindErasesSubagentEntries (issue 27.4, invariant
// 17): a subagent's thread whose binding has ended is deleted; the intro
// and completion it displayed leave the subagent session's history (the
// thread routes to its own session now, which holds none of them).
func TestDeletedThreadAfterUnbindErasesSubagentEntries(t *testing.T) {
	t.Parallel()
	m := newSEModel(t)
	h := startBot(t, m, nil)
	seSpawn(t, h, "quick task", "gone", true)
	thread := seThreadOf(t, h, "gone")
	waitUntil(t, h, "the completion in the thread", func() bool { return countContaining(h.emu.Messages(thread), "finished") == 1 })
	var subKey, bindingID string
	for _, r := range h.app.bindings.Active() {
		if r.Conversation.ConversationID == thread {
			subKey, bindingID = r.TargetSessionKey, r.ID
		}
	}
	if subKey == "" {
		t.Fatal("no active binding for the thread")
	}
	if _, err := h.app.bindings.Unbind(t.Context(), binding.UnbindInput{ID: bindingID, Reason: "unfocus"}); err != nil {
		t.Fatal(err)
	}
	delAsk(t, h, h.general.ID, "barrier one")
	shown := messageIDs(h.emu.Messages(thread))
	if err := h.emu.DeleteChannel(thread); err != nil {
		t.Fatal(err)
	}
	delAsk(t, h, h.general.ID, "barrier two")
	st := finishBot(t, h, h.general.ID)
	var erased int
	for _, e := range seEntries(t, st, subKey) {
		if len(e.MessageIDs) == 0 || !slices.Contains(shown, e.MessageIDs[0]) {
			continue
		}
		if !e.Deleted {
			t.Errorf("entry #%d (%s) displayed in the deleted thread is still model-visible: %q", e.Seq, e.Source, e.Text)
		} else {
			erased++
		}
	}
	if erased == 0 {
		t.Errorf("no entry of the deleted thread was found in %s", subKey)
	}
	for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
		if e.Deleted {
			t.Errorf("#general's entry #%d was erased: %+v", e.Seq, e)
		}
	}
}

// TestDeletedFocusedThreadKeepsChannelEntries (issue 27.4, invariant 17): a
// thread /focus'ed onto its channel's own session is deleted; what the
// thread displayed leaves the history, and what the channel still displays
// since the binding (held by the same session) stays.
func TestDeletedFocusedThreadKeepsChannelEntries(t *testing.T) {
	t.Parallel()
	h := startBot(t, &edModel{}, nil)
	delAsk(t, h, h.general.ID, "before the focus")
	th, err := h.emu.AddThread(h.general.ID, "side", h.alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	in, err := h.emu.InvokeCommand(th.ID, h.alice.ID, "focus", discordtest.CommandOption{Name: "target", Value: seChannelKey(h.general.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.emu.WaitAnswer(t.Context(), in.ID); err != nil {
		t.Fatal(err)
	}
	key := seChannelKey(h.general.ID)
	bound := false
	for _, r := range h.app.bindings.Active() {
		bound = bound || (r.Conversation.ConversationID == th.ID && r.TargetSessionKey == key)
	}
	if !bound {
		t.Fatal("the thread is not focused on #general's session")
	}
	delAsk(t, h, th.ID, "thread-secret-z9")
	delAsk(t, h, h.general.ID, "channel-after-focus")
	inThread := messageIDs(h.emu.Messages(th.ID))
	if err := h.emu.DeleteChannel(th.ID); err != nil {
		t.Fatal(err)
	}
	delAsk(t, h, h.general.ID, "barrier")
	inGeneral := messageIDs(h.emu.Messages(h.general.ID))
	st := finishBot(t, h, h.general.ID)
	for _, e := range seEntries(t, st, key) {
		if len(e.MessageIDs) == 0 {
			continue
		}
		switch id := e.MessageIDs[0]; {
		case slices.Contains(inGeneral, id) && e.Deleted:
			t.Errorf("entry #%d (%s) that #general still displays was erased", e.Seq, e.Source)
		case slices.Contains(inThread, id) && !e.Deleted:
			t.Errorf("entry #%d (%s) of the deleted thread is still model-visible: %q", e.Seq, e.Source, e.Text)
		}
	}
}
