package command

import (
	"context"
	"errors"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/memory"
)

// Memory is recall (core/memory.Recall) for /memory search. Deps.Memory
// is nil when memory is off at start; ErrMemoryOff says it was turned off since.
type Memory interface {
	Search(ctx context.Context, userID, text string, limit int) ([]memory.Found, error)
	SearchIn(ctx context.Context, userID string, conv binding.ConversationRef, text string, limit int) ([]memory.Found, error)
}

// ErrMemoryOff: memory.enabled is false.
var ErrMemoryOff = errors.New("memory is off")

// maxReply bounds a /memory reply (one Discord message).
const maxReply = 1900

// memory runs /memory search: the search the model's recall tool makes,
// with the caller's authority. Where every reply is public (a Matrix
// room), only this conversation is searched: everyone here sees the answer.
func (c *Commands) memory(ctx context.Context, v Invocation) (Reply, error) {
	switch v.Sub {
	case "list":
		return c.noteList(ctx, v)
	case "forget":
		return c.noteForget(ctx, v)
	case "search":
	default:
		return Reply{}, userErrf("Unknown command %s %s: use %s list, search <query> or forget <id>.", v.Platform.Command("memory"), v.Sub, v.Platform.Command("memory"))
	}
	if c.d.Memory == nil {
		return Reply{}, userErrf("Memory is off here (memory.enabled in the bot's config).")
	}
	q := v.Str("query")
	var (
		fs  []memory.Found
		err error
	)
	if v.Platform.PublicReplies {
		fs, err = c.d.Memory.SearchIn(ctx, v.UserID, v.Conversation, q, 5)
	} else {
		fs, err = c.d.Memory.Search(ctx, v.UserID, q, 5)
	}
	var r *authz.Refusal
	switch {
	case errors.As(err, &r):
		return Reply{}, userErrf("%s", r.Msg)
	case errors.Is(err, ErrMemoryOff):
		return Reply{}, userErrf("Memory is off here (memory.enabled in the bot's config).")
	case err != nil:
		return Reply{}, err
	}
	if len(fs) == 0 && v.Platform.PublicReplies {
		return Reply{Text: "🔎 Nothing found in this conversation."}, nil
	}
	return Reply{Text: "🔎 " + truncateRunes(memory.Format(fs), maxReply)}, nil
}
