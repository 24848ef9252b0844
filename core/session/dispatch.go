package session

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// External takes the messages of conversations bound to an external
// agent's session (binding.KindACP: an ACP agent). The manager resolved
// the conversation's binding once and hands it on with the message; the
// external side records the message as a user entry of the bound
// session's transcript (its message id, delivery id "in:<id>"): that entry
// is what marks the message taken, for this process and the next.
type External interface {
	HandleMessage(ctx context.Context, rec binding.Record, msg Message) error
}

// target is where a conversation's message goes, resolved once per
// message: a session's key and the binding that routes there, if any.
type target struct {
	key   string
	rec   binding.Record
	bound bool
}

// external reports whether the target is an external agent's session.
func (t target) external() bool { return t.bound && t.rec.TargetKind == binding.KindACP }

// HandleMessage is the one dispatch step of an inbound user message: it
// resolves the conversation to its target once (a session of this
// manager, or an external agent's session), decides whether the message
// was taken already, and hands it with the resolved target to the side
// that takes it. A session takes it by writing the user entry into its
// transcript (in display order) and queueing a turn behind any running one.
//
// Three callers can take the same message: the platform's per-conversation
// lane (live events), the catch-up after a restart (the same lane), and
// Resume (turns owed by the previous process). A message is taken once,
// for the target it routed to when it was taken, and one conversation's
// messages are taken one at a time, under its take lock, from the check of
// what was taken to the queued turn: a taker that finds a message already
// taken returns only once its entry is written, so the lane's next message
// cannot be written ahead of it (Rule 1: user entries in display order).
//
// Taken means, durably, that a transcript holds the message's user entry,
// whichever side wrote it: a message an external agent took is not taken
// again by the session a later /focus routes its conversation to, and an
// owed turn resumes in the session that took its message.
func (m *Manager) HandleMessage(ctx context.Context, msg Message) error {
	msg.Conversation = msg.Conversation.Normalize()
	key, rec, bound := m.d.Outbound.SessionFor(msg.Conversation) // the message's one binding lookup
	t := target{key: key, rec: rec, bound: bound}
	if m.d.External == nil || !t.external() {
		m.ensureMain(ctx, key, msg.Conversation)
	}
	unlock := m.lockTake(msg.Conversation.Key())
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	if m.seen(ctx, msg.MessageID) {
		return nil // a catch-up or a replayed event: already taken
	}
	p, owner, owed := m.pendingTurn("turn:" + msg.MessageID)
	if owed && p.Rounds > 0 {
		// Owed by the previous process, which crashed between the
		// streamed rounds of its answer (a catch-up takes it again
		// before Resume): it ends with a notice, never runs again.
		locked = false
		unlock()
		m.endInterrupted(ctx, owner, p)
		return nil
	}
	holder, err := m.holder(ctx, msg.MessageID)
	if err != nil {
		return fmt.Errorf("handle message %s: %w", msg.MessageID, err)
	}
	switch {
	case holder != "" && holder != t.key && owed && owner == holder:
		// Taken by the session it routed to then, whose turn is owed: the
		// turn resumes there (its reply goes where the conversation
		// routes at delivery, like any reply).
		t = target{key: holder}
	case holder != "" && (holder != t.key || (t.external() && m.d.External != nil)):
		// Taken, by another target or by the external agent itself (whose
		// prompt that process queued): never twice.
		m.dropOwed(ctx, msg.MessageID, holder)
		return nil
	case t.external() && m.d.External != nil:
		m.dropOwed(ctx, msg.MessageID, "")
		if err := m.d.External.HandleMessage(ctx, t.rec, msg); err != nil {
			return fmt.Errorf("handle message %s: %w", msg.MessageID, err)
		}
		return nil
	}
	if owed && owner != t.key {
		m.dropOwed(ctx, msg.MessageID, t.key)
	}
	return m.take(ctx, msg, t)
}

// holder is the session whose transcript holds the message's entry (""
// when none does): the durable record that the message was taken.
func (m *Manager) holder(ctx context.Context, messageID string) (string, error) {
	key, _, ok, err := m.d.Transcripts.Locate(ctx, messageID)
	if err != nil || !ok {
		return "", err
	}
	return key, nil
}

// dropOwed forgets the owed turns of a message in every session but keep:
// the message went elsewhere (a crash left it owed where it routed before
// its entry was written).
func (m *Manager) dropOwed(ctx context.Context, messageID, keep string) {
	for {
		_, owner, ok := m.pendingTurn("turn:" + messageID)
		if !ok || owner == keep {
			return
		}
		m.removePending(ctx, owner, "turn:"+messageID)
	}
}

// take writes the user entry of msg into the session t and queues its
// turn; the caller holds the conversation's take lock.
func (m *Manager) take(ctx context.Context, msg Message, t target) error {
	key := t.key
	var from Agent
	var newest time.Time
	var changed, first bool
	if !t.bound && sessionkey.KindOf(key) == KindMain {
		from, newest, changed, first = m.routeChange(key, msg.Conversation)
	}
	m.imu.Lock()
	m.queued[msg.MessageID] = true
	m.imu.Unlock()
	m.addPending(ctx, key, PendingTurn{Message: msg})
	var entry transcript.Entry
	err := m.d.Outbound.WithConversation(msg.Conversation, func() error {
		meta := map[string]string{"authorId": msg.AuthorID, transcript.MetaDisplayedIn: msg.Conversation.ConversationID}
		if msg.ReplyTo != "" {
			meta["replyTo"] = msg.ReplyTo
		}
		if msg.ViaEdit {
			meta["viaEdit"] = "true"
		}
		var err error
		entry, err = m.d.Transcripts.Append(ctx, key, transcript.Entry{
			Role: transcript.RoleUser, Author: msg.AuthorName, Text: msg.Text,
			MessageIDs: []string{msg.MessageID}, Source: transcript.SourceUser,
			DeliveryID: "in:" + msg.MessageID, Meta: meta, Attachments: msg.Attachments,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("handle message %s: %w", msg.MessageID, err)
	}
	if changed {
		m.noteRoute(ctx, key, msg.Conversation, msg.MessageID, from)
	}
	if changed || first {
		// Newer than every other agent's here, even on a clock that has
		// not moved since.
		at := m.d.Clock.Now()
		if !at.After(newest) {
			at = newest.Add(time.Nanosecond)
		}
		m.updateInfo(ctx, key, func(in *Info) { in.RoutedAt = at })
	}
	if err := m.queueTurn(ctx, key, t.rec.ID, t.bound, PendingTurn{Message: msg}, entry.Seq); err != nil {
		return fmt.Errorf("handle message %s: %w", msg.MessageID, err)
	}
	return nil
}
