package bot

// End-to-end tests of issue 22 (invariant 17): edits and deletions of
// displayed messages reach the model's history, and a deleted message's
// text leaves every live record of the store.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/store/bolt"
)

// edModel records every request and answers "answer-N" (N counts calls),
// so each reply's text is unique and says nothing of the question.
type edModel struct {
	mu   sync.Mutex
	reqs []model.Request
}

func (m *edModel) Complete(_ context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	return model.Response{Text: fmt.Sprintf("answer-%d", len(m.reqs))}, nil
}

// seen returns the texts of the last request's messages, joined.
func (m *edModel) last(t *testing.T) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		t.Fatal("no model request")
	}
	var b strings.Builder
	for _, msg := range m.reqs[len(m.reqs)-1].Messages {
		b.WriteString(msg.Text + "\n")
	}
	return b.String()
}

// edAsk has alice mention the bot in #general and waits for the channel to
// display want messages (her message and the reply among them).
func edAsk(t *testing.T, h *harness, text string, want int) discordtest.Message {
	t.Helper()
	msg, err := h.emu.UserSay(h.general.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> "+text)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply to "+text, func() bool {
		ms := h.emu.Messages(h.general.ID)
		return len(ms) >= want && ms[len(ms)-1].Author.ID == h.emu.BotUserID()
	})
	return msg
}

// liveRecordsContaining opens a bbolt file and returns the path of every
// key or value, in every bucket at every depth, that contains sub.
func liveRecordsContaining(t *testing.T, path string, sub []byte) []string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var found []string
	var walk func(prefix string, b *bbolt.Bucket) error
	walk = func(prefix string, b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			p := prefix + "/" + string(k)
			if bytes.Contains(k, sub) || bytes.Contains(v, sub) {
				found = append(found, p)
			}
			if v == nil {
				return walk(p, b.Bucket(k))
			}
			return nil
		})
	}
	n := 0
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			n++
			if bytes.Contains(name, sub) {
				found = append(found, string(name))
			}
			return walk(string(name), b)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("read %d buckets only: not the bot's store?", n)
	}
	return found
}

// A user deletes a message holding a secret, a moderator deletes a bot
// reply: neither is in the next model request, and neither text is in any
// live record of the store (transcript, outbox, indexes: every bucket).
func TestEditsE2EDeletionsLeaveHistoryAndStore(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	secret := edAsk(t, h, "my password is hunter2-zq81", 2)
	if !strings.Contains(m.last(t), "hunter2-zq81") {
		t.Fatal("the secret never reached the model: the test proves nothing")
	}
	edAsk(t, h, "tell me something", 4) // reply: answer-2
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.emu.UserDelete(h.alice.ID, secret.ID))
	var reply2 discordtest.Message
	for _, msg := range h.emu.Messages(h.general.ID) {
		if msg.Content == "answer-2" {
			reply2 = msg
		}
	}
	if reply2.ID == "" {
		t.Fatal("no answer-2 displayed")
	}
	must(h.emu.DeleteMessage(reply2.ID))
	// The next question is queued behind both deletions (one queue per
	// conversation), so its request is built after they were applied.
	edAsk(t, h, "and now?", 4)
	last := m.last(t)
	for _, gone := range []string{"hunter2-zq81", "answer-2"} {
		if strings.Contains(last, gone) {
			t.Errorf("the model still sees deleted %q:\n%s", gone, last)
		}
	}
	if !strings.Contains(last, "answer-1") || !strings.Contains(last, "tell me something") {
		t.Errorf("the model lost messages still displayed:\n%s", last)
	}
	st := finishBot(t, h, h.general.ID)
	es := seEntries(t, st, seChannelKey(h.general.ID))
	deleted := 0
	for _, e := range es {
		if e.Deleted {
			deleted++
		}
	}
	if deleted != 2 {
		t.Errorf("%d entries marked deleted, want 2: %+v", deleted, es)
	}
	var out bytes.Buffer
	if err := (inspector{store: st}).write(t.Context(), &out, "transcript", []string{seChannelKey(h.general.ID)}, true); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), `"deleted":true`); n != 2 || strings.Contains(out.String(), "hunter2") {
		t.Errorf("inspect -json shows %d deleted entries (want 2, without text):\n%s", n, out.String())
	}
	st.Close()
	for _, gone := range []string{"hunter2-zq81", "answer-2"} {
		if recs := liveRecordsContaining(t, h.cfg.Store.Path, []byte(gone)); len(recs) > 0 {
			t.Errorf("deleted text %q survives in the store at %v", gone, recs)
		}
	}
	// `bot compact`: afterwards the text is in no byte of the file (freed
	// pages included).
	if _, _, err := bolt.Compact(h.cfg.Store.Path, 200*time.Millisecond); err != nil {
		t.Fatalf("bot compact: %v", err)
	}
	raw, err := os.ReadFile(h.cfg.Store.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"hunter2-zq81", "answer-2"} {
		if bytes.Contains(raw, []byte(gone)) {
			t.Errorf("deleted text %q is still in the file after bot compact", gone)
		}
	}
	if !bytes.Contains(raw, []byte("tell me something")) {
		t.Error("bot compact lost live records")
	}
}

// A user fixes their question: the model sees the new text next time.
func TestEditsE2EEditedQuestionIsWhatTheModelSees(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	q := edAsk(t, h, "what is the capitol of Frnace", 2)
	if _, err := h.emu.UserEdit(q.ID, "<@"+h.emu.BotUserID()+"> what is the capital of France"); err != nil {
		t.Fatal(err)
	}
	edAsk(t, h, "answer that please", 4)
	last := m.last(t)
	if strings.Contains(last, "Frnace") || !strings.Contains(last, "capital of France") {
		t.Fatalf("the model does not see the edited question:\n%s", last)
	}
	st := finishBot(t, h, h.general.ID)
	var out bytes.Buffer
	if err := (inspector{store: st}).write(t.Context(), &out, "transcript", []string{seChannelKey(h.general.ID)}, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"edited":true`) || !strings.Contains(out.String(), `"latestText":"\u003c@`) || !strings.Contains(out.String(), `"source":"edit"`) {
		t.Errorf("inspect -json does not show the entry and its edit:\n%s", out.String())
	}
}

// A moderator bulk-deletes a question and its answer, and deletes a whole
// channel: those messages leave the model's history and their texts leave
// the store.
func TestEditsE2EBulkAndChannelDeletion(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	q := edAsk(t, h, "bulk-secret-k7", 2)
	var answer string
	for _, msg := range h.emu.Messages(h.general.ID) {
		if msg.Author.ID == h.emu.BotUserID() {
			answer = msg.ID
		}
	}
	if err := h.emu.BulkDelete(h.general.ID, []string{q.ID, answer}); err != nil {
		t.Fatal(err)
	}
	other, err := h.emu.AddTextChannel(h.guild.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserSay(other.ID, h.alice.ID, "<@"+h.emu.BotUserID()+"> channel-secret-p3"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the reply in #other", func() bool { return len(h.emu.Messages(other.ID)) == 2 })
	if err := h.emu.DeleteChannel(other.ID); err != nil {
		t.Fatal(err)
	}
	edAsk(t, h, "what did I say?", 2)
	if last := m.last(t); strings.Contains(last, "bulk-secret-k7") || strings.Contains(last, "answer-1") {
		t.Errorf("the model still sees bulk-deleted messages:\n%s", last)
	}
	otherKey := seChannelKey(other.ID)
	st := finishBot(t, h, h.general.ID)
	for _, e := range seEntries(t, st, otherKey) {
		if len(e.MessageIDs) > 0 && !e.Deleted {
			t.Errorf("entry #%d of the deleted channel is not deleted: %+v", e.Seq, e)
		}
	}
	st.Close()
	for _, gone := range []string{"bulk-secret-k7", "channel-secret-p3"} {
		if recs := liveRecordsContaining(t, h.cfg.Store.Path, []byte(gone)); len(recs) > 0 {
			t.Errorf("deleted text %q survives in the store at %v", gone, recs)
		}
	}
}

// Edits and deletions made while the bot was down are applied at the next
// start (catch-up compares the recent window with the channel).
func TestEditsE2EChangesWhileDownAppliedAfterRestart(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	secret := edAsk(t, h, "down-secret-w4", 2)
	typo := edAsk(t, h, "whta is up", 4)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.UserDelete(h.alice.ID, secret.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.emu.UserEdit(typo.ID, "<@"+h.emu.BotUserID()+"> what is up"); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	edAsk(t, h, "again", 5)
	last := m.last(t)
	if strings.Contains(last, "down-secret-w4") || strings.Contains(last, "whta") || !strings.Contains(last, "what is up") {
		t.Fatalf("changes made while down not applied:\n%s", last)
	}
	st := finishBot(t, h, h.general.ID)
	st.Close()
	if recs := liveRecordsContaining(t, h.cfg.Store.Path, []byte("down-secret-w4")); len(recs) > 0 {
		t.Errorf("deleted text survives in the store at %v", recs)
	}
}

// A deletion made while the bot was down is found at the next start even
// when more messages than the catch-up window arrived after it: the window
// is compared as it stood before the catch-up takes the missed messages,
// against every channel message from the window's oldest on (soak seeds 3,
// 17, 22, 39, 40: the missed messages taken first pushed the deleted
// entry out of the window, their answers out of the one page read).
func TestEditsE2EDeletionWhileDownFoundBehindMissedMessages(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	secret := edAsk(t, h, "down-secret-b7", 2)
	var answer string
	for _, msg := range h.emu.Messages(h.general.ID) {
		if msg.Author.ID == h.emu.BotUserID() {
			answer = msg.ID
		}
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.UserDelete(h.alice.ID, secret.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.DeleteMessage(answer); err != nil {
		t.Fatal(err)
	}
	const missed = 60 // more than the 50 entries compared
	for i := range missed {
		if _, err := h.emu.UserSay(h.general.ID, h.alice.ID, fmt.Sprintf("<@%s> missed %d", h.emu.BotUserID(), i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "the missed messages answered", func() bool {
		return countContaining(h.emu.Messages(h.general.ID), "answer-") == missed
	})
	st := finishBot(t, h, h.general.ID) // Rule 1: no entry names a deleted message
	st.Close()
	if recs := liveRecordsContaining(t, h.cfg.Store.Path, []byte("down-secret-b7")); len(recs) > 0 {
		t.Errorf("text deleted while down survives in the store at %v", recs)
	}
}

// A deletion made while the bot was down of a message displayed before a
// /reset is found at the next start too: /reset ends the model's history,
// not the chat, so the deleted text is erased all the same (soak seed 3: a
// moderator deleted a job result the channel had /reset after).
func TestEditsE2EDeletionWhileDownBeforeResetFound(t *testing.T) {
	t.Parallel()
	m := &edModel{}
	h := startBot(t, m, nil)
	secret := edAsk(t, h, "reset-secret-j2", 2)
	adResponded(t, h, adInvoke(t, h, h.general.ID, "reset"))
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.UserDelete(h.alice.ID, secret.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	edAsk(t, h, "after the reset", 0)
	waitUntil(t, h, "the answer after the reset", func() bool { return countContaining(h.emu.Messages(h.general.ID), "answer-2") == 1 })
	st := finishBot(t, h, h.general.ID) // Rule 1: no entry names a deleted message
	st.Close()
	if recs := liveRecordsContaining(t, h.cfg.Store.Path, []byte("reset-secret-j2")); len(recs) > 0 {
		t.Errorf("text deleted while down survives in the store at %v", recs)
	}
}
