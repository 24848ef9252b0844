package command

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/notes"
)

// Notes is memory's notes (core/notes.Service) for /memory list and
// /memory forget.
type Notes interface {
	On() bool
	InScope(ctx context.Context, userID string, conv binding.ConversationRef, public bool) ([]notes.Note, error)
	Forget(ctx context.Context, actor authz.Actor, id string) (notes.Note, error)
}

func (c *Commands) notesOn() error {
	if c.d.Notes == nil || !c.d.Notes.On() {
		return userErrf("Notes are off here (memory.enabled and memory.notes in the bot's config).")
	}
	return nil
}

// noteList answers /memory list: the caller's notes (scope me), this
// conversation's and this server's, newest first. Where every reply is
// public (a Matrix room), the caller's notes displayed elsewhere are left
// out: everyone here sees the answer.
func (c *Commands) noteList(ctx context.Context, v Invocation) (Reply, error) {
	if err := c.notesOn(); err != nil {
		return Reply{}, err
	}
	ns, err := c.d.Notes.InScope(ctx, v.UserID, v.Conversation, v.Platform.PublicReplies)
	if err != nil {
		return Reply{}, err
	}
	if len(ns) == 0 {
		return Reply{Text: "📝 No notes in scope here. The agent writes one when asked to remember something."}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "📝 %d notes in scope here (newest first; %s forget <id> deletes one):", len(ns), v.Platform.Command("memory"))
	for _, n := range ns {
		fmt.Fprintf(&b, "\n• `%s` (%s) %s", n.ID, n.Scope, n.Text)
	}
	return Reply{Text: truncateRunes(b.String(), maxReply)}, nil
}

// noteForget answers /memory forget <id>: the note's message is deleted,
// and so the note forgotten (its author, the user it is about, or an
// operator of its server).
func (c *Commands) noteForget(ctx context.Context, v Invocation) (Reply, error) {
	if err := c.notesOn(); err != nil {
		return Reply{}, err
	}
	id := v.Str("id")
	if id == "" {
		return Reply{}, userErrf("Say which note: %s forget <id> (%s list shows the ids).", v.Platform.Command("memory"), v.Platform.Command("memory"))
	}
	n, err := c.d.Notes.Forget(ctx, v.actor(), id)
	var r *authz.Refusal
	switch {
	case errors.As(err, &r):
		return Reply{}, userErrf("%s", Refusal(r))
	case err != nil:
		return Reply{}, err
	}
	return Reply{Text: fmt.Sprintf("🗑️ Forgot note `%s`: its message was deleted.", n.ID)}, nil
}
