package notes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/binding"
)

// Scope is whose turns a note is given to.
type Scope string

// Scopes.
const (
	ScopeMe     Scope = "me"     // the turns its user starts, anywhere
	ScopeHere   Scope = "here"   // the turns of its conversation
	ScopeServer Scope = "server" // the turns of every conversation of its server (guild or room)
)

// ParseScope reads a scope as the tool and the commands take it.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(strings.ToLower(strings.TrimSpace(s))); sc {
	case ScopeMe, ScopeHere, ScopeServer:
		return sc, nil
	}
	return "", fmt.Errorf("scope %q: write me (you, everywhere), here (this conversation) or server (this server)", s)
}

// Note is one note's record. The note itself is its message: the record
// says where that message is and whose turns it is given to.
type Note struct {
	ID    string `json:"id"`
	Scope Scope  `json:"scope"`
	// Text is the note as displayed (after redaction).
	Text string `json:"text"`
	// Author is the user whose turn wrote the note; About the user a `me`
	// note is about ("" for the other scopes).
	Author string `json:"author"`
	About  string `json:"about,omitempty"`
	// Conversation is where its message is displayed; Server the guild
	// or room id of a `server` note ("" otherwise).
	Conversation binding.ConversationRef `json:"conversation"`
	Server       string                  `json:"server,omitempty"`
	// SessionKey is the transcript its message's entry went to ("" when
	// none took it: a Rule 1 exception).
	SessionKey string    `json:"sessionKey,omitempty"`
	MessageIDs []string  `json:"messageIds"`
	At         time.Time `json:"at"`
}

// Filter selects notes in scope: a note matches when one of the set
// fields matches it (About its `me` user, Conversation the key of a
// `here` note's conversation, Server a `server` note's server). A zero
// Filter selects every note.
type Filter struct {
	About        string
	Conversation string // binding.ConversationRef.Key()
	Server       string
}

// Zero reports whether f selects every note.
func (f Filter) Zero() bool { return f == Filter{} }

// Match reports whether f selects n.
func (f Filter) Match(n Note) bool {
	if f.Zero() {
		return true
	}
	switch n.Scope {
	case ScopeMe:
		return f.About != "" && n.About == f.About
	case ScopeHere:
		return f.Conversation != "" && n.Conversation.Key() == f.Conversation
	case ScopeServer:
		return f.Server != "" && n.Server == f.Server
	}
	return false
}

// Store keeps note records: store/bolt, store/postgres and store/memory,
// one conformance suite (notestest).
type Store interface {
	// PutNote writes n (replacing a record of the same id), durably.
	PutNote(ctx context.Context, n Note) error
	// Note returns the record of id.
	Note(ctx context.Context, id string) (Note, bool, error)
	// Notes lists the records f selects, oldest first (by At, then id).
	Notes(ctx context.Context, f Filter) ([]Note, error)
	// DeleteNote removes the record of id and reports whether there was one.
	DeleteNote(ctx context.Context, id string) (bool, error)
	// DeleteNotesByMessage removes the records whose message ids hold
	// messageID and returns them.
	DeleteNotesByMessage(ctx context.Context, messageID string) ([]Note, error)
}

// Sort orders notes oldest first (by At, then id), as Store.Notes lists them.
func Sort(ns []Note) {
	slices.SortFunc(ns, func(a, b Note) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
