// Package sessionkey builds and parses the session keys users see. It is the
// one place that maps a conversation to its own session key (invariant 10):
// inbound routing and outbound transcript writes both call ForConversation.
//
// Keys are colon-separated, and only their first segments are fixed: the
// last segment of a conversation's key is the conversation id verbatim, which
// may itself contain ':' and '$' (Matrix: "!room:server", "$event",
// "@user:server"). Agent ids and platform names never contain ':' (config
// validation; the platforms are fixed names), so every parser here splits
// with strings.SplitN at the number of fixed segments, never strings.Split.
package sessionkey

import (
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
)

// DMPrefix marks a direct-message conversation id ("user:<id>").
const DMPrefix = "user:"

// Platform names (binding.ConversationRef.Channel).
const (
	PlatformDiscord = "discord"
	PlatformMatrix  = "matrix"
)

// ThreadSep joins a Matrix thread's room and root event in its session key
// and its delivery target: "!room:server/$event", as in matrix.to permalinks.
// A server name cannot contain '/' and an event id starts with '$', so the
// thread part starts at the first "/$".
const ThreadSep = "/"

// ForConversation returns the conversation's own session key for agent:
// agent:<agent>:<platform>:channel:<id>, or agent:<agent>:<platform>:dm:<user>
// for a DM. A Matrix thread (its id is its root event "$ev", its parent the
// room) is agent:<agent>:matrix:channel:<room>/<event>: an event id alone
// does not say where to post. Discord ids are never rewritten (stored keys).
func ForConversation(agentID string, ref binding.ConversationRef) string {
	n := ref.Normalize()
	if user, ok := strings.CutPrefix(n.ConversationID, DMPrefix); ok {
		return fmt.Sprintf("agent:%s:%s:dm:%s", agentID, n.Channel, user)
	}
	id := strings.TrimPrefix(n.ConversationID, "channel:")
	if isMatrixThread(n.Channel, id) && n.ParentConversationID != "" {
		id = n.ParentConversationID + ThreadSep + id
	}
	return fmt.Sprintf("agent:%s:%s:channel:%s", agentID, n.Channel, id)
}

// ConversationOf is the inverse of ForConversation: the agent and the
// conversation (platform, id, parent; no account: the caller knows it)
// whose own session key is key. ok is false for any other key (a
// subagent's, a job run's, one not built by ForConversation).
func ConversationOf(key string) (agentID string, ref binding.ConversationRef, ok bool) {
	p := strings.SplitN(key, ":", 5)
	if len(p) != 5 || p[0] != "agent" || p[4] == "" || KindOf(key) != KindMain {
		return "", binding.ConversationRef{}, false
	}
	ref = binding.ConversationRef{Channel: p[2]}
	switch p[3] {
	case "channel":
		ref.ConversationID = p[4]
		if room, ev, found := strings.Cut(p[4], ThreadSep+"$"); found && ref.Channel == PlatformMatrix {
			ref.ConversationID, ref.ParentConversationID = "$"+ev, room
		}
	case "dm":
		ref.ConversationID = DMPrefix + p[4]
	default:
		return "", binding.ConversationRef{}, false
	}
	ref = ref.Normalize()
	if ForConversation(p[1], ref) != key {
		return "", binding.ConversationRef{}, false
	}
	return p[1], ref, true
}

// isMatrixThread reports whether a conversation id names a Matrix thread
// (its root event).
func isMatrixThread(platform, id string) bool {
	return platform == PlatformMatrix && strings.HasPrefix(id, "$")
}

// Subagent returns agent:<agent>:subagent:<id>.
func Subagent(agentID, id string) string { return fmt.Sprintf("agent:%s:subagent:%s", agentID, id) }

// JobRunDelivery returns job:<job>:run:<run>, the delivery id of a job run (its trigger and reply deliveries
// derive their ids from it).
func JobRunDelivery(jobID, runID string) string { return "job:" + jobID + ":run:" + runID }

// CronRun returns agent:<agent>:cron:<job>:run:<run>.
func CronRun(agentID, jobID, runID string) string {
	return fmt.Sprintf("agent:%s:cron:%s:run:%s", agentID, jobID, runID)
}

// Agent returns the agent id of a key, or "" when the key is not one of ours.
func Agent(key string) string {
	parts := strings.SplitN(key, ":", 3)
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
	parts := strings.SplitN(key, ":", 4)
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
