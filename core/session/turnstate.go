package session

import (
	"context"
	"strconv"

	"github.com/agentbot/agentbot/core/transcript"
)

// A turn's state is its own record (invariant 19, issue 27.2): a streamed
// turn with tool calls shows one message per round, and the first one is
// delivered under the turn's own delivery id. Whether the turn is answered
// is therefore never read from that id alone: the owed-turn record
// (PendingTurn.Rounds) says how many rounds were closed as intermediate
// messages, and only the confirmation of the round after them (the last
// delivery) answers the turn. A crash between rounds leaves a turn whose
// last delivery is not confirmed: the next start ends it with a visible
// notice (interruptedNotice) rather than running the model again, whose
// tools of the first attempt already ran (docs/DECISIONS.md).

// interruptedSuffix is the delivery id suffix (after the turn's own id)
// of the notice that ends a turn a crash interrupted between rounds.
const interruptedSuffix = ":interrupted"

// interruptedNotice is the notice that ends such a turn.
const interruptedNotice = "⚠️ The bot restarted while this reply was being written; the rest of it was lost. Ask again if you still need it."

// roundID is the delivery id of round n of the turn delivered under id.
func roundID(id string, n int) string {
	if n == 0 {
		return id
	}
	return id + "#" + strconv.Itoa(n)
}

// pendingTurn returns the owed-turn record delivered under deliveryID, in
// any session, and that session's key.
func (m *Manager) pendingTurn(deliveryID string) (PendingTurn, string, bool) {
	m.imu.RLock()
	defer m.imu.RUnlock()
	for _, in := range m.sessions {
		for _, p := range in.Pending {
			if p.deliveryID() == deliveryID {
				return p, in.Key, true
			}
		}
	}
	return PendingTurn{}, "", false
}

// answered reports whether the turn delivered under deliveryID is
// answered: its last delivery (or the notice that ended it) is confirmed.
func (m *Manager) answered(ctx context.Context, deliveryID string) (bool, error) {
	first, err := m.d.Outbound.Delivered(ctx, deliveryID)
	if err != nil {
		return false, err
	}
	if first {
		p, _, ok := m.pendingTurn(deliveryID)
		if !ok || p.Rounds == 0 {
			return true, nil
		}
		done, err := m.d.Outbound.Delivered(ctx, roundID(deliveryID, p.Rounds))
		if err != nil || done {
			return done, err
		}
	}
	// Ended by the notice after a crash between rounds (round 0 itself
	// may never have been displayed).
	return m.d.Outbound.Delivered(ctx, deliveryID+interruptedSuffix)
}

// markRounds records, before round n-1's message is finished as an
// intermediate one, that the turn's last delivery is round n now.
func (m *Manager) markRounds(ctx context.Context, key, deliveryID string, n int) {
	m.imu.RLock()
	in, ok := m.sessions[key]
	found := false
	for _, p := range in.Pending {
		found = found || p.deliveryID() == deliveryID
	}
	m.imu.RUnlock()
	if !ok || !found {
		return // not an owed user turn (a job's turn): its run record answers for it
	}
	m.updateInfo(ctx, key, func(in *Info) {
		for i, p := range in.Pending {
			if p.deliveryID() == deliveryID {
				in.Pending = append([]PendingTurn(nil), in.Pending...)
				in.Pending[i].Rounds = n
			}
		}
	})
}

// endInterrupted ends an owed turn a crash interrupted between rounds
// (Rounds > 0, its last delivery unconfirmed) with a visible notice, and
// forgets it once the notice is displayed (or it turns out answered).
func (m *Manager) endInterrupted(ctx context.Context, key string, p PendingTurn) {
	done, err := m.answered(ctx, p.deliveryID())
	if err != nil {
		m.d.Log.Error().Err(err).Str("session", key).Msg("resume interrupted turn")
		return // still owed: the next start tries again
	}
	if !done {
		msg := p.Message
		t := turnInput{key: key, conv: msg.Conversation.Normalize(), replyTo: msg.MessageID, requester: msg.AuthorID,
			deliveryID: p.deliveryID() + interruptedSuffix}
		if _, rec, bound := m.d.Outbound.SessionFor(t.conv); bound && rec.TargetSessionKey == key {
			t.bindingID = rec.ID
		}
		if _, err := m.reply(ctx, t, interruptedNotice, transcript.SourceNotice); err != nil {
			m.d.Log.Error().Err(err).Str("session", key).Msg("interrupted turn: notice not delivered")
			return
		}
		m.d.Log.Info().Str("session", key).Str("message", msg.MessageID).Msg("turn interrupted between rounds by a restart: ended with a notice")
	}
	m.removePending(ctx, key, p.deliveryID())
}
