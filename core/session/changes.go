package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
)

// The chat can change under a turn (invariant 17, issue 22): the user
// message that started it can be deleted or edited while it waits or runs.
// A trigger is the control of the turns one user message started, from
// queueing to their end: a deletion cancels them (nothing is posted), an
// edit cancels the model call in progress and runs it again on the new
// text. Once a turn's model call has returned without either, its reply is
// being sent and stands: a change after that point is a change of an
// answered message (the edits mode decides; docs/DECISIONS.md).

var (
	// errDeleted is why a turn's model call ended: its message was deleted.
	errDeleted = errors.New("its message was deleted")
	// errEdited is why a turn's model call ended: its message was edited
	// (the call runs again on the new text).
	errEdited = errors.New("its message was edited")
)

// MaxEditReruns caps how often one admitted message's turn runs its model
// again because the message was edited (invariant 20): after that an edit
// only updates the history, and the running attempt answers.
const MaxEditReruns = 3

type trigger struct {
	key       string // the session the message's entry is in
	conv      string // the conversation the message was posted in (its binding.ConversationRef.Key)
	requester string // the message's author, whose budget re-runs are charged to
	reruns    int    // model calls cancelled and run again for an edit
	turns     int    // queued or running turns of this message
	waiting   int    // of those, the ones whose model call has not returned yet
	deleted   bool
	edits     int // edits seen, so an attempt knows whether one came since it read history
	cancels   map[uint64]context.CancelCauseFunc
}

var attemptSeq atomic.Uint64

// addTrigger registers a turn of messageID (in session key) before it is
// queued; the turn calls doneTrigger when it ends.
func (m *Manager) addTrigger(messageID, key, requester string, conv binding.ConversationRef) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	tr := m.trig[messageID]
	if tr == nil {
		tr = &trigger{key: key, conv: conv.Key(), requester: requester, cancels: map[uint64]context.CancelCauseFunc{}}
		m.trig[messageID] = tr
	}
	tr.turns++
	tr.waiting++
}

func (m *Manager) doneTrigger(messageID string, waiting bool) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	tr := m.trig[messageID]
	if tr == nil {
		return
	}
	tr.turns--
	if waiting {
		tr.waiting--
	}
	if tr.turns <= 0 {
		delete(m.trig, messageID)
	}
}

// triggerState reports, for a turn about to read its history, whether its
// message was deleted and how many edits were seen so far.
func (m *Manager) triggerState(messageID string) (deleted bool, edits int) {
	if messageID == "" {
		return false, 0
	}
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if tr := m.trig[messageID]; tr != nil {
		return tr.deleted, tr.edits
	}
	return false, 0
}

// watchTrigger makes ctx end when messageID is deleted or edited (an edit
// newer than edits, the count the attempt read its history after). The
// returned func ends the watch and says whether the attempt must be
// dropped (errDeleted) or run again (errEdited), a change that came just
// after the model call returned included; a nil answer with proceed (the
// turn goes on to send its reply or notice) means the turn stops waiting,
// in the same critical section, so a later change finds it answered.
func (m *Manager) watchTrigger(ctx context.Context, messageID string, edits int) (context.Context, func(proceed bool) error) {
	unwatched := func(bool) error { return nil }
	if messageID == "" {
		return ctx, unwatched
	}
	m.rmu.Lock()
	tr := m.trig[messageID]
	if tr == nil {
		m.rmu.Unlock()
		return ctx, unwatched
	}
	wctx, cancel := context.WithCancelCause(ctx)
	id := attemptSeq.Add(1)
	tr.cancels[id] = cancel
	switch {
	case tr.deleted:
		cancel(errDeleted)
	case tr.edits != edits:
		cancel(errEdited)
	}
	m.rmu.Unlock()
	return wctx, func(proceed bool) error {
		// The watch ends; the context lives on (a streamed reply goes on
		// after its first text) and ends with its parent, the run's.
		m.rmu.Lock()
		defer m.rmu.Unlock()
		delete(tr.cancels, id)
		switch {
		case tr.deleted:
			return errDeleted
		case tr.edits != edits:
			return errEdited
		}
		if proceed {
			tr.waiting--
		}
		return nil
	}
}

// MessageDeleted tells the manager that a user message left the chat (its
// deletion is already recorded in the transcript). A turn it started that
// has not sent its reply yet is cancelled, its model call included, and
// posts nothing; its owed-turn record (which holds the text) is dropped at
// once. It reports whether such a turn existed.
func (m *Manager) MessageDeleted(ctx context.Context, messageID string) bool {
	return m.messageDeleted(ctx, nil, messageID)
}

// MessageDeletedIn is MessageDeleted for a platform whose deletions name
// the message by content anyone can write (a Matrix redaction's "redacts"):
// the message is looked up by (conversation, id), so a deletion claimed in
// one conversation never cancels a turn of another's.
func (m *Manager) MessageDeletedIn(ctx context.Context, conv binding.ConversationRef, messageID string) bool {
	return m.messageDeleted(ctx, &conv, messageID)
}

func (m *Manager) messageDeleted(ctx context.Context, conv *binding.ConversationRef, messageID string) bool {
	m.rmu.Lock()
	tr := m.trig[messageID]
	if tr == nil || tr.waiting <= 0 || (conv != nil && conv.Key() != tr.conv) {
		m.rmu.Unlock()
		return false
	}
	tr.deleted = true
	key := tr.key
	for _, cancel := range tr.cancels {
		cancel(errDeleted)
	}
	m.rmu.Unlock()
	m.dropPending(ctx, key, func(p PendingTurn) bool { return p.Message.MessageID == messageID })
	m.d.Log.Info().Str("session", key).Str("message", messageID).Msg("turn cancelled: its message was deleted")
	return true
}

// MessageEdited tells the manager that a user message now shows new text
// (the edit is already recorded in the transcript). A turn it started
// that is still waiting reads the new text when it starts; one whose model
// call is running is cancelled and runs again on the new text, at most
// MaxEditReruns times per message and each re-run charged to the author's
// turn budget: past the cap or the budget the edit only updates the
// history and the running call answers. It reports whether such a turn
// existed (then nothing else is owed to the edit); a turn already sending
// its reply, or past its first side-effecting tool call, does not count.
func (m *Manager) MessageEdited(messageID string) bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	tr := m.trig[messageID]
	if tr == nil || tr.waiting <= 0 || tr.deleted {
		return false
	}
	if len(tr.cancels) > 0 { // a model call runs: the edit would cost another
		if tr.reruns >= MaxEditReruns {
			m.d.Log.Info().Str("session", tr.key).Str("message", messageID).Int("reruns", tr.reruns).Msg("edit only updates history: the turn's re-runs are used up")
			return true
		}
		if m.d.Budget != nil {
			if d := m.d.Budget.Take(tr.requester, ""); !d.OK {
				m.d.Log.Info().Str("session", tr.key).Str("message", messageID).Str("user", tr.requester).Msg("edit only updates history: the user's turn budget is spent")
				return true
			}
		}
		tr.reruns++
	}
	tr.edits++
	for _, cancel := range tr.cancels {
		cancel(errEdited)
	}
	m.d.Log.Info().Str("session", tr.key).Str("message", messageID).Msg("turn runs again: its message was edited")
	return true
}

// Reanswer queues a new turn for a user message that was edited after its
// turn answered (discord.edits: reprocess). Its reply is a new message
// replying to the edited one, under its own delivery id (the edit's key),
// so the earlier answer stays displayed and in the history. It answers
// the conversation as it stood at the message, like the first turn, and
// only for a message still in the model's window (an older message's edit
// is only history). It reports whether a turn was queued.
func (m *Manager) Reanswer(ctx context.Context, msg Message, editKey string) (bool, error) {
	msg.Conversation = msg.Conversation.Normalize()
	key, rec, bound := m.d.Outbound.SessionFor(msg.Conversation)
	agent := m.agentFor(key)
	history, err := m.d.Transcripts.History(ctx, key, max(agent.MaxHistory, 1))
	if err != nil {
		return false, fmt.Errorf("reanswer %s: %w", msg.MessageID, err)
	}
	var entry transcript.Entry
	for _, e := range history {
		if e.Source == transcript.SourceUser && len(e.MessageIDs) > 0 && e.MessageIDs[0] == msg.MessageID {
			entry = e
		}
	}
	if entry.Seq == 0 {
		return false, nil // not in this session's window: the edit is history only
	}
	p := PendingTurn{Message: msg, DeliveryID: "turn:" + msg.MessageID + ":edit:" + editKey}
	if done, err := m.answered(ctx, p.DeliveryID); err == nil && done {
		return false, nil
	}
	return true, m.queueTurn(ctx, key, rec.ID, bound, p, entry.Seq)
}

// queueTurn persists a turn as owed and queues it behind the session's
// running work.
func (m *Manager) queueTurn(ctx context.Context, key, bindingID string, bound bool, p PendingTurn, seq uint64) error {
	msg := p.Message
	m.addPending(ctx, key, p)
	t := turnInput{key: key, conv: msg.Conversation, replyTo: msg.MessageID, userReplyTo: msg.ReplyTo, deliveryID: p.deliveryID(),
		triggerSeq: seq, requester: msg.AuthorID, trigger: msg.MessageID}
	if bound {
		t.bindingID = bindingID
	}
	m.addTrigger(msg.MessageID, key, msg.AuthorID, msg.Conversation)
	err := m.enqueue(key, func(ctx context.Context) {
		waiting := true
		// Another process sharing the store (or the one before a crash)
		// may have answered while this turn waited for its lock.
		if done, err := m.answered(ctx, t.deliveryID); err != nil || !done {
			waiting = m.runTurn(ctx, t)
		}
		m.doneTrigger(msg.MessageID, waiting)
		m.removePending(ctx, key, t.deliveryID)
		if p.DeliveryID == "" {
			m.imu.Lock()
			delete(m.queued, msg.MessageID)
			m.imu.Unlock()
		}
	})
	if err != nil { // the turn stays owed: the next start resumes it
		m.doneTrigger(msg.MessageID, true)
		return fmt.Errorf("queue turn %s: %w", t.deliveryID, err)
	}
	return nil
}
