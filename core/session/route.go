package session

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// A conversation's route (agents[].channels) can change between two of its
// messages: the config changed, or a channel moved to another category.
// The conversation's own session is then another agent's, with its own
// history, and the chat is told once, by the first message the new agent
// takes there. "The last agent here" is the agent whose own session of the
// conversation has the newest Info.RoutedAt (persisted with the registry):
// written when an agent first takes a message in the conversation and at
// each change, so the current agent always holds the newest.

// routedAt is when key's agent last became the one answering in conv; a
// session from before RoutedAt existed that took messages here counts as
// the oldest possible, zero is never.
func routedAt(in Info, conv binding.ConversationRef) time.Time {
	if !in.RoutedAt.IsZero() {
		return in.RoutedAt
	}
	if in.LastInbound[conv.ConversationID] != "" {
		return time.Unix(0, 1)
	}
	return time.Time{}
}

// routeChange reports the agent that answered in conv before key's agent,
// when the conversation's route changed since (key is conv's own session
// of the agent answering now). newest is the newest RoutedAt of conv's
// sessions; first is true when key's session has no RoutedAt yet.
func (m *Manager) routeChange(key string, conv binding.ConversationRef) (from Agent, newest time.Time, changed, first bool) {
	cur, _ := m.Info(key)
	now := routedAt(cur, conv)
	best := now
	for _, a := range m.opt.Agents {
		k := sessionkey.ForConversation(a.ID, conv)
		if k == key {
			continue
		}
		if in, ok := m.Info(k); ok {
			if at := routedAt(in, conv); at.After(best) {
				best, from, changed = at, a, true
			}
		}
	}
	return from, best, changed, cur.RoutedAt.IsZero()
}

// noteRoute says in the chat that key's agent answers in conv now, instead
// of from: one line, through Outbound (so in the new session's
// transcript), once (its delivery id is the message's that found the
// change).
func (m *Manager) noteRoute(ctx context.Context, key string, conv binding.ConversationRef, messageID string, from Agent) {
	agent := m.agentFor(key)
	text := fmt.Sprintf("🔀 %s answers in this conversation now, instead of %s; each keeps its own history here.", agent.Name, from.Name)
	_, err := m.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "route:" + messageID, Target: conv, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceNotice, AgentID: agent.ID, Meta: map[string]string{"routeFrom": from.ID}}}, nil)
	if err != nil {
		m.d.Log.Error().Err(err).Str("session", key).Msg("route change notice failed")
	}
}

// OwnSessions are conv's own sessions, one per configured agent: where the
// messages it displayed can be, whichever agent answered there then.
func (m *Manager) OwnSessions(conv binding.ConversationRef) []string {
	keys := make([]string, 0, len(m.opt.Agents))
	for _, a := range m.opt.Agents {
		keys = append(keys, sessionkey.ForConversation(a.ID, conv))
	}
	return keys
}
