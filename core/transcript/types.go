package transcript

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/agentbot/agentbot/core/usage"
)

// Role is who an entry speaks for.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
)

// Source says which producer an entry came from.
type Source string

// Sources. Only core/delivery.Outbound writes entries other than SourceTurn
// and user entries written by a turn.
const (
	SourceUser        Source = "user"
	SourceTurn        Source = "turn"
	SourceJob         Source = "job"
	SourceJobTrigger  Source = "job-trigger"
	SourceAlert       Source = "alert"
	SourceAnnounce    Source = "announce"
	SourceMessageTool Source = "message-tool"
	SourceIntro       Source = "intro"
	SourceFarewell    Source = "farewell"
	SourceNotice      Source = "notice"
	SourceCommand     Source = "command"
	SourceSnapshot    Source = "snapshot"
	SourceNote        Source = "note" // a note of memory's remember tool (core/notes)
	// SourceEdit and SourceDeletion are change records (invariant 17): an
	// edit record carries the new text of the entry Target, a deletion
	// record says the entry Target left the display. History applies them
	// and never shows them to the model as entries of their own.
	SourceEdit     Source = "edit"
	SourceDeletion Source = "deletion"
)

// Errors.
var (
	// ErrDeliveryConflict: an entry with the same delivery id but different text exists.
	ErrDeliveryConflict = errors.New("delivery id already used with different text")
	// ErrUnknownSession: the session has no transcript.
	ErrUnknownSession = errors.New("unknown session")
)

// ToolCall is a model tool invocation recorded on an assistant entry.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Entry is one transcript line. Entries are append-only.
type Entry struct {
	Seq        uint64            `json:"seq"`
	SessionKey string            `json:"sessionKey"`
	Role       Role              `json:"role"`
	Author     string            `json:"author,omitempty"`
	Text       string            `json:"text"`
	MessageIDs []string          `json:"messageIds"`
	Source     Source            `json:"source"`
	DeliveryID string            `json:"deliveryId,omitempty"`
	Generation int               `json:"generation"`
	At         time.Time         `json:"at"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Target is, on an edit or deletion record, the seq of the entry it
	// changes; 0 on every other entry.
	Target uint64 `json:"target,omitempty"`
	// Deleted marks an entry whose message was deleted from the chat: its
	// Text has been erased (the one rewrite invariant 9 permits).
	Deleted bool `json:"deleted,omitempty"`
	// Attachments are the files a user message carried, as Discord showed
	// them; a replay sends the model what the chat displayed.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Model is, on an assistant entry a model wrote, the models entry that
	// answered (the last call's, when a fallback or tool rounds came first).
	Model string `json:"model,omitempty"`
	// Usage is the tokens the model calls behind an assistant entry took,
	// as the provider reported them; nil when no model call was behind it.
	Usage *Usage `json:"usage,omitempty"`
	// Calls are the usage records of the model calls behind the entry
	// (core/usage), written by the store in the same transaction as the
	// entry (no write of their own) and only when the entry is new: a
	// replay that finds the entry by its delivery id writes none (they
	// came with it the first time). Never part of the stored entry, so an
	// entry read back has none.
	Calls []usage.Record `json:"-"`
}

// Usage is an entry's token count.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// MetaDisplayedIn is the entry meta naming the conversation (its id) that
// displays the entry's messages: a deleted thread or channel erases the
// entries displayed in it, in whichever session holds them, by it
// (Service.DeleteConversation, invariant 17).
const MetaDisplayedIn = "displayedIn"

// Attachment is a file on a user message.
type Attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
}

// IsChange reports whether e is an edit or deletion record.
func (e Entry) IsChange() bool { return e.Source == SourceEdit || e.Source == SourceDeletion }

// ForStore returns e as a store keeps it for session key: SessionKey set,
// MessageIDs copied and never nil, Meta copied and nil when empty, Calls
// dropped. Stores call it in Append so every implementation returns the
// same shapes (and take e.Calls before it, to write them with the entry).
func ForStore(key string, e Entry) Entry {
	e.SessionKey = key
	e.MessageIDs = slices.Clone(e.MessageIDs)
	if e.MessageIDs == nil {
		e.MessageIDs = []string{}
	}
	e.Meta = maps.Clone(e.Meta)
	if len(e.Meta) == 0 {
		e.Meta = nil
	}
	e.Attachments = slices.Clone(e.Attachments)
	if len(e.Attachments) == 0 {
		e.Attachments = nil
	}
	e.Calls = nil // written beside the entry, never in it (take them first)
	return e
}

// Resetter is a Store shared by several processes (PostgreSQL) that orders
// generations itself: ResetGeneration starts the next generation in one
// atomic step and returns it, and Append stamps each entry with the
// generation current when the store writes it (or the caller's
// Entry.Generation if that is later; Service leaves it 0), both under the
// session's own lock. So a /reset in one process and an Append in another are ordered by the store,
// not by the Service's in-process lock, and two resets never count once.
type Resetter interface {
	ResetGeneration(ctx context.Context, key string) (int, error)
}

// Store persists transcripts. Implementations are safe for concurrent use
// and make Append atomic: sequence numbers are assigned by the store,
// strictly increasing per session from 1, and an entry whose non-empty
// DeliveryID is already present is not appended again.
type Store interface {
	// Append stores e (Seq is assigned) and returns it. If e.DeliveryID is
	// non-empty and already present in the session, it returns the existing
	// entry and existed=true without writing (the caller compares texts).
	Append(ctx context.Context, key string, e Entry) (stored Entry, existed bool, err error)
	// Tail returns up to n of the newest entries of the session, oldest first.
	Tail(ctx context.Context, key string, n int) ([]Entry, error)
	// Range returns up to limit entries with Seq >= from, oldest first.
	Range(ctx context.Context, key string, from uint64, limit int) ([]Entry, error)
	// ByMessageID finds the entry holding a Discord message id.
	ByMessageID(ctx context.Context, key, messageID string) (Entry, bool, error)
	// Generation returns the session's current generation (0 for a new session).
	Generation(ctx context.Context, key string) (int, error)
	// SetGeneration records a new current generation.
	SetGeneration(ctx context.Context, key string, gen int) error
	// Sessions lists session keys that have a transcript.
	Sessions(ctx context.Context) ([]string, error)
	// LocateMessage finds the session whose transcript holds a Discord
	// message id (the first session that recorded it).
	LocateMessage(ctx context.Context, messageID string) (key string, ok bool, err error)
	// Erase rewrites the entries seqs of session key with empty Text and
	// Deleted set (invariant 9's one exception). Erasing an erased or
	// missing entry is not an error.
	Erase(ctx context.Context, key string, seqs []uint64) error
}
