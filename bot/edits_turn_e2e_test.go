package bot

// End-to-end tests of issue 22 item 5: a turn follows changes of the
// message that started it (deleted: cancelled, nothing posted; edited:
// re-run on the new text), discord.edits: reprocess re-answers an edited
// message, and an edit that adds a mention starts a turn.

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
)

func waitCancelled(t *testing.T, g *aliveGate) {
	t.Helper()
	select {
	case <-g.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the model call's context was not cancelled")
	}
}

// Deleting the message whose turn is running cancels the model call and
// posts nothing; the deleted entry is erased, no owed turn keeps its text,
// and the next turn does not see it.
func TestEditsE2EDeleteMidTurnCancelsAndPostsNothing(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h := startBot(t, g, nil)
	q, err := h.emu.UserSay(h.general.ID, h.alice.ID, adMention(h)+"my pin is 4471-mid")
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	if err := h.emu.UserDelete(h.alice.ID, q.ID); err != nil {
		t.Fatal(err)
	}
	waitCancelled(t, g)
	// The next message queues behind the cancelled turn: once it is
	// answered, the cancelled one has ended.
	adSay(t, h, h.general.ID, adMention(h)+"what now")
	req := g.waitEntered(t)
	g.release <- struct{}{}
	waitUntil(t, h, "the next reply", func() bool { return len(botMessages(h, h.general.ID, "")) == 1 })
	for _, m := range req.Messages {
		if strings.Contains(m.Text, "4471-mid") {
			t.Errorf("the next request still holds the deleted message: %q", m.Text)
		}
	}
	st := finishBot(t, h, h.general.ID)
	if bm := botMessages(h, h.general.ID, ""); len(bm) != 1 || !strings.Contains(bm[0].Content, "what now") {
		t.Fatalf("bot messages %+v, want only the answer to the next message", bm)
	}
	infos, err := st.SessionInfos(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if len(in.Pending) > 0 {
			t.Errorf("session %s still owes turns %+v", in.Key, in.Pending)
		}
	}
	for _, e := range seEntries(t, st, seChannelKey(h.general.ID)) {
		if len(e.MessageIDs) > 0 && e.MessageIDs[0] == q.ID && !e.Deleted {
			t.Errorf("the deleted message's entry is not deleted: %+v", e)
		}
	}
	st.Close()
	if recs := liveRecordsContaining(t, h.cfg.Store.Path, []byte("4471-mid")); len(recs) > 0 {
		t.Errorf("deleted text survives in the store at %v", recs)
	}
}

// Editing the message whose turn is running cancels the model call and
// runs it again on the new text; only the re-run's answer is posted, once.
func TestEditsE2EEditMidTurnRerunsOnNewText(t *testing.T) {
	t.Parallel()
	g := newAliveGate()
	h := startBot(t, g, nil)
	q, err := h.emu.UserSay(h.general.ID, h.alice.ID, adMention(h)+"capitol of Frnace")
	if err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	if _, err := h.emu.UserEdit(q.ID, adMention(h)+"capital of France"); err != nil {
		t.Fatal(err)
	}
	waitCancelled(t, g)
	req := g.waitEntered(t)
	if last := req.Messages[len(req.Messages)-1].Text; !strings.Contains(last, "capital of France") {
		t.Fatalf("the re-run asked %q, want the edited text", last)
	}
	for _, m := range req.Messages {
		if strings.Contains(m.Text, "Frnace") {
			t.Fatalf("the re-run still sees the old text: %q", m.Text)
		}
	}
	g.release <- struct{}{}
	waitUntil(t, h, "the reply", func() bool { return len(botMessages(h, h.general.ID, "")) == 1 })
	// A later message proves no second answer was on its way.
	adSay(t, h, h.general.ID, adMention(h)+"thanks")
	g.waitEntered(t)
	g.release <- struct{}{}
	waitUntil(t, h, "the second reply", func() bool { return len(botMessages(h, h.general.ID, "")) == 2 })
	finishBot(t, h, h.general.ID)
	bm := botMessages(h, h.general.ID, "")
	if !strings.Contains(bm[0].Content, "capital of France") || bm[0].MessageReference == nil || bm[0].MessageReference.MessageID != q.ID {
		t.Errorf("the answer %+v is not the re-run's reply to the edited message", bm[0])
	}
	if n := countContaining(h.emu.Messages(h.general.ID), "Frnace"); n != 0 {
		t.Errorf("%d messages answer the old text", n)
	}
}

// discord.edits: reprocess answers an edited message again (a new reply to
// it; the old answer stays displayed and in the history); history (the
// default) only lets the model see the new text next time.
func TestEditsE2EReprocessReanswersHistoryDoesNot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode      string
		wantCalls int // the question, [the re-answer], the follow-up
	}{
		{config.EditsHistory, 2},
		{config.EditsReprocess, 3},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			m := &edModel{}
			h := startBot(t, m, func(c *config.Config) { c.Discord.Edits = tt.mode })
			q := edAsk(t, h, "how big is teh moon", 2)
			if _, err := h.emu.UserEdit(q.ID, adMention(h)+"how far is the moon"); err != nil {
				t.Fatal(err)
			}
			// Events of a channel are handled in order, and a session's
			// turns run in order: the follow-up's answer comes last.
			want := 4 + tt.wantCalls - 2
			edAsk(t, h, "and the sun?", want)
			finishBot(t, h, h.general.ID)
			m.mu.Lock()
			calls := len(m.reqs)
			var reanswer string
			if calls == 3 {
				for _, msg := range m.reqs[1].Messages {
					reanswer += msg.Text + "\n"
				}
			}
			m.mu.Unlock()
			if calls != tt.wantCalls {
				t.Fatalf("%d model calls, want %d", calls, tt.wantCalls)
			}
			bm := botMessages(h, h.general.ID, "")
			if bm[0].Content != "answer-1" {
				t.Errorf("the first answer is %q, want answer-1 kept", bm[0].Content)
			}
			if tt.mode == config.EditsReprocess {
				if bm[1].Content != "answer-2" || bm[1].MessageReference == nil || bm[1].MessageReference.MessageID != q.ID {
					t.Errorf("the re-answer %+v is not a new reply to the edited message", bm[1])
				}
				if !strings.Contains(reanswer, "how far is the moon") || strings.Contains(reanswer, "teh moon") || strings.Contains(reanswer, "answer-1") {
					t.Errorf("the re-answer's request is not the conversation up to the edited message:\n%s", reanswer)
				}
			}
			if last := m.last(t); !strings.Contains(last, "how far is the moon") || !strings.Contains(last, "answer-1") {
				t.Errorf("the follow-up's request lost the edited text or the first answer:\n%s", last)
			}
		})
	}
}

// An edit that adds a mention to a message that did not reach the bot
// starts a turn as a new mention would.
func TestEditsE2EEditAddingMentionStartsTurn(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	q, err := h.emu.UserSay(h.general.ID, h.alice.ID, "is anyone here")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserEdit(q.ID, adMention(h)+"is anyone here"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the answer to the edited message", func() bool { return len(botMessages(h, h.general.ID, "")) == 1 })
	finishBot(t, h, h.general.ID)
	if bm := botMessages(h, h.general.ID, ""); bm[0].MessageReference == nil || bm[0].MessageReference.MessageID != q.ID {
		t.Errorf("the answer %+v does not reply to the edited message", bm[0])
	}
	if last := m.last(t); !strings.Contains(last, "is anyone here") {
		t.Errorf("the model was not asked the edited message:\n%s", last)
	}
}

// A user discord.access refuses gets no model call by adding a mention in
// an edit either.
func TestEditsE2ERefusedEditAddingMentionNoModelCall(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	// Members are not operators (no Manage Server): access applies.
	if err := h.emu.SetRolePermissions(h.guild.ID, h.guild.ID, discordtest.DefaultEveryone); err != nil {
		t.Fatal(err)
	}
	carol, err := h.emu.AddMember(h.guild.ID, "carol")
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Discord.Access.Deny.Users = []string{carol.ID}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	q, err := h.emu.UserSay(h.general.ID, carol.ID, "hello bot")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserEdit(q.ID, adMention(h)+"hello bot"); err != nil {
		t.Fatal(err)
	}
	h.refused = map[string]bool{q.ID: true}
	// Alice's message comes after the edit in the channel's event order.
	edAsk(t, h, "hi", 3)
	finishBot(t, h, h.general.ID)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) != 1 {
		t.Fatalf("%d model calls, want 1 (alice's only)", len(m.reqs))
	}
	for _, msg := range m.reqs[0].Messages {
		if strings.Contains(msg.Text, "hello bot") {
			t.Errorf("the refused message reached the model: %q", msg.Text)
		}
	}
}

// An edit made while the bot was down that added a mention to a message
// that had not reached it starts a turn at the next start.
func TestEditsE2EEditAddingMentionWhileDownStartsTurn(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	edAsk(t, h, "hello", 2)
	plain, err := h.emu.UserSay(h.general.ID, h.alice.ID, "does this work")
	if err != nil {
		t.Fatal(err)
	}
	edAsk(t, h, "still there?", 5)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserEdit(plain.ID, adMention(h)+"does this work"); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the answer to the edited message", func() bool { return len(botMessages(h, h.general.ID, "")) == 3 })
	finishBot(t, h, h.general.ID)
	if bm := botMessages(h, h.general.ID, ""); bm[2].MessageReference == nil || bm[2].MessageReference.MessageID != plain.ID {
		t.Errorf("the third answer %+v does not reply to the edited message", bm[2])
	}
}
