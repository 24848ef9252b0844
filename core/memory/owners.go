package memory

import (
	"context"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Owner is whose a session that is not a conversation's own is: a
// subagent's (its spawner's) or a background job run's (its job's
// creator's).
type Owner struct {
	// User ran it: the run acted with this user's authority, so every
	// entry of the session is this user's to recall.
	User string
	// Shown are the conversations it displays in (the subagent's thread,
	// else the conversation that asked; the job's delivery target):
	// whoever may view one of them may recall what the session displayed.
	Shown []binding.ConversationRef
}

// Owners tells whose the sessions keys are. A key missing from the map
// (its record gone) is nobody's: its entries are found by no one.
type Owners interface {
	Owners(ctx context.Context, keys []string) (map[string]Owner, error)
}

// OwnedSuffix marks the index key of a subagent's or job run's entries
// that were never displayed (a job's prompt and result, a subagent's task
// without a thread): only the session's owner may find them, while its
// displayed entries (the index key is the session key) are found by the
// owner and by whoever may view where they were displayed.
const OwnedSuffix = "\x1fowner"

// Indexed reports whether session key's entries are searchable: a
// conversation's own session (its conversation is in the key, for the view
// check), a subagent's and a job run's (their Owner decides who finds
// them).
func Indexed(key string) bool {
	if _, _, ok := sessionkey.ConversationOf(key); ok {
		return true
	}
	k := sessionkey.KindOf(key)
	return k == sessionkey.KindSubagent || k == sessionkey.KindJobRun
}

// owned reports whether session key is a subagent's or job run's (its
// entries' visibility is its Owner's), not a conversation's own.
func owned(key string) bool {
	_, _, conv := sessionkey.ConversationOf(key)
	return !conv && Indexed(key)
}

// SessionOf is the session key of index key k (k without OwnedSuffix).
func SessionOf(k string) string { return strings.TrimSuffix(k, OwnedSuffix) }
