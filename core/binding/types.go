package binding

import (
	"context"
	"errors"
	"strings"
	"time"
)

// TargetKind says what a binding points at.
type TargetKind string

// Target kinds.
const (
	KindSubagent TargetKind = "subagent"
	KindSession  TargetKind = "session"
	// KindACP: an external coding agent's session (Agent Client Protocol, package acp).
	KindACP TargetKind = "acp"
)

// Status is a binding's lifecycle state: active -> ending -> ended.
type Status string

// Binding statuses.
const (
	StatusActive Status = "active"
	StatusEnding Status = "ending"
	StatusEnded  Status = "ended"
)

// Reasons a binding ends. Adapters may add their own (e.g. "thread-delete").
const (
	ReasonManual        = "manual"
	ReasonRebound       = "rebound"
	ReasonIdleExpired   = "idle-expired"
	ReasonMaxAgeExpired = "max-age-expired"
	ReasonThreadDelete  = "thread-delete"
	ReasonThreadArchive = "thread-archived"
	ReasonThreadLocked  = "thread-locked"
	ReasonNoPermission  = "no-permission"
	ReasonSessionEnded  = "session-ended"
	// ReasonMoved: the session was bound to another conversation (a
	// session is bound to at most one); Metadata[MetaMovedTo] names it.
	ReasonMoved = "moved"
)

// MetaMovedTo is the metadata key of a moved binding's new conversation id.
const MetaMovedTo = "movedTo"

// ErrNotFound is returned when a binding id or session has no binding.
var ErrNotFound = errors.New("binding not found")

// ConversationRef names a conversation independently of the chat platform.
// Channel is the platform ("discord"), AccountID the bot account, ConversationID
// the chat (a Discord channel or thread id, or "user:<id>" for a DM), and
// ParentConversationID the parent channel of a thread.
type ConversationRef struct {
	Channel              string `json:"channel"`
	AccountID            string `json:"accountId"`
	ConversationID       string `json:"conversationId"`
	ParentConversationID string `json:"parentConversationId,omitempty"`
}

// Normalize returns the canonical form used for matching: channel trimmed
// and lowercased, account id lowercased with "default" for empty, ids
// trimmed, and a parent equal to the conversation itself dropped.
func (r ConversationRef) Normalize() ConversationRef {
	out := ConversationRef{
		Channel:              strings.ToLower(strings.TrimSpace(r.Channel)),
		AccountID:            NormalizeAccountID(r.AccountID),
		ConversationID:       strings.TrimSpace(r.ConversationID),
		ParentConversationID: strings.TrimSpace(r.ParentConversationID),
	}
	if out.ParentConversationID == out.ConversationID {
		out.ParentConversationID = ""
	}
	return out
}

// Key is the normalised identity of a conversation. The parent is not part
// of it, except for an id that does not name a conversation alone
// (ScopedByParent): a Matrix thread is (room, root event), and a thread
// root claimed in another room is another conversation (invariant 18).
func (r ConversationRef) Key() string {
	n := r.Normalize()
	if ScopedByParent(n.ConversationID) {
		return n.Channel + "\x1f" + n.AccountID + "\x1f" + n.ParentConversationID + "\x1f" + n.ConversationID
	}
	return n.Channel + "\x1f" + n.AccountID + "\x1f" + n.ConversationID
}

// ScopedByParent reports whether a conversation id names a conversation
// only together with its parent: a Matrix thread's root event id ("$...";
// no other platform's ids start with '$').
func ScopedByParent(conversationID string) bool { return strings.HasPrefix(conversationID, "$") }

// Valid reports whether the ref names a conversation at all.
func (r ConversationRef) Valid() bool {
	n := r.Normalize()
	return n.Channel != "" && n.ConversationID != ""
}

// NormalizeAccountID lowercases an account id, replaces characters outside
// [a-z0-9_-] with '-', trims dashes, caps it at 64 characters, and maps an
// empty result to "default".
func NormalizeAccountID(id string) string {
	if isNormalAccountID(id) {
		return id // fast path: no allocation on the routing hot path
	}
	id = strings.ToLower(strings.TrimSpace(id))
	var b strings.Builder
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 64 {
		out = out[:64]
	}
	if out == "" {
		return "default"
	}
	return out
}

// Record is one binding of a conversation to a session.
type Record struct {
	ID               string            `json:"bindingId"`
	TargetSessionKey string            `json:"targetSessionKey"`
	TargetKind       TargetKind        `json:"targetKind"`
	Conversation     ConversationRef   `json:"conversation"`
	Status           Status            `json:"status"`
	AgentID          string            `json:"agentId,omitempty"`
	Label            string            `json:"label,omitempty"`
	BoundBy          string            `json:"boundBy,omitempty"` // user id, or "system"
	BoundAt          time.Time         `json:"boundAt"`
	LastActivityAt   time.Time         `json:"lastActivityAt"`
	IdleTimeout      time.Duration     `json:"idleTimeout,omitempty"` // 0 disables
	MaxAge           time.Duration     `json:"maxAge,omitempty"`      // 0 disables
	EndedAt          time.Time         `json:"endedAt,omitzero"`
	EndedReason      string            `json:"endedReason,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

// ExpiresAt is the earlier of the idle and max-age deadlines; zero when both are disabled.
func (r Record) ExpiresAt() time.Time {
	var at time.Time
	if r.IdleTimeout > 0 {
		at = r.LastActivityAt.Add(r.IdleTimeout)
	}
	if r.MaxAge > 0 {
		m := r.BoundAt.Add(r.MaxAge)
		if at.IsZero() || m.Before(at) {
			at = m
		}
	}
	return at
}

// ExpiryReason returns the reason the record is expired at now, or "" if it is not.
func (r Record) ExpiryReason(now time.Time) string {
	if r.MaxAge > 0 && !now.Before(r.BoundAt.Add(r.MaxAge)) {
		return ReasonMaxAgeExpired
	}
	if r.IdleTimeout > 0 && !now.Before(r.LastActivityAt.Add(r.IdleTimeout)) {
		return ReasonIdleExpired
	}
	return ""
}

// Store persists binding records. Implementations must be safe for
// concurrent use. Records are keyed by ID; ended records are kept so they can
// be inspected.
type Store interface {
	// PutBindings inserts or replaces the given records atomically.
	PutBindings(ctx context.Context, recs ...Record) error
	// Bindings returns every stored record, active and ended, in no particular order.
	Bindings(ctx context.Context) ([]Record, error)
}

func isNormalAccountID(id string) bool {
	if id == "" || len(id) > 64 || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
