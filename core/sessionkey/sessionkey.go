// Package sessionkey builds and parses the session keys users see. It is the
// one place that maps a conversation to its own session key (invariant 10):
// inbound routing and outbound transcript writes both call ForConversation.
package sessionkey

import (
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
)

// DMPrefix marks a direct-message conversation id ("user:<id>").
const DMPrefix = "user:"

// ForConversation returns the conversation's own session key for agent:
// agent:<agent>:discord:channel:<id>, or agent:<agent>:discord:dm:<user> for a DM.
func ForConversation(agentID string, ref binding.ConversationRef) string {
	n := ref.Normalize()
	if user, ok := strings.CutPrefix(n.ConversationID, DMPrefix); ok {
		return fmt.Sprintf("agent:%s:%s:dm:%s", agentID, n.Channel, user)
	}
	id := strings.TrimPrefix(n.ConversationID, "channel:")
	return fmt.Sprintf("agent:%s:%s:channel:%s", agentID, n.Channel, id)
}

// Subagent returns agent:<agent>:subagent:<id>.
func Subagent(agentID, id string) string { return fmt.Sprintf("agent:%s:subagent:%s", agentID, id) }

// CronRun returns agent:<agent>:cron:<job>:run:<run>.
func CronRun(agentID, jobID, runID string) string {
	return fmt.Sprintf("agent:%s:cron:%s:run:%s", agentID, jobID, runID)
}

// Agent returns the agent id of a key, or "" when the key is not one of ours.
func Agent(key string) string {
	parts := strings.Split(key, ":")
	if len(parts) < 3 || parts[0] != "agent" {
		return ""
	}
	return parts[1]
}

// Kind is what a session is for: the one vocabulary of session kinds
// (core/session records it; keys imply it).
type Kind string

// Session kinds (stored values: never renamed).
const (
	KindMain     Kind = "main"     // a conversation's own session
	KindSubagent Kind = "subagent" // a spawned subagent
	KindJobRun   Kind = "job-run"  // a background job's run
)

// KindOf classifies a key built by this package ("" for a key that is not ours).
func KindOf(key string) Kind {
	parts := strings.Split(key, ":")
	if len(parts) < 4 || parts[0] != "agent" {
		return ""
	}
	switch parts[2] {
	case "subagent":
		return KindSubagent
	case "cron":
		return KindJobRun
	default:
		return KindMain
	}
}

// Resolver is what Route needs: the active binding of a conversation.
type Resolver interface {
	ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool)
}

// Route returns the session a conversation routes to now: its bound target
// when it has an active binding, else its own session for defaultAgent.
func Route(r Resolver, defaultAgent string, ref binding.ConversationRef) (key string, rec binding.Record, bound bool) {
	if r != nil {
		if rec, ok := r.ResolveByConversation(ref); ok {
			return rec.TargetSessionKey, rec, true
		}
	}
	return ForConversation(defaultAgent, ref), binding.Record{}, false
}
