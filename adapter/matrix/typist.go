package matrix

import (
	"context"
	"fmt"
	"time"

	"maunium.net/go/mautrix"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
)

// TypingTimeout is how long one typing notice lasts on the homeserver: the core renews it every
// session.DefaultTypingEvery (8 s), so it never lapses while work runs, and it ends at most this long after a
// renewal that was the last.
const TypingTimeout = session.DefaultTypingEvery + 4*time.Second

// Typist is core/session.Typist for Matrix: PUT /typing in the conversation's room (a thread's typing is its
// room's: Matrix has no per-thread typing; a DM's is its DM room's). On Discord the bot's next message ends its
// typing indicator; Matrix homeservers do not do that, so the Client does: a send or live post into a room where
// the bot's notice shows clears it (Client.clearTyping), and the answer is not followed by seconds of "typing".
type Typist struct {
	c *Client
}

var _ session.Typist = (*Typist)(nil)

// NewTypist returns the typist over c. It does no I/O.
func NewTypist(c *Client) *Typist { return &Typist{c: c} }

// Typing implements core/session.Typist. A failed notice is not retried (mautrix's retries are off): the next
// renewal comes within seconds, and a late retry could show "typing" after the answer.
func (t *Typist) Typing(ctx context.Context, conv binding.ConversationRef) error {
	n := conv.Normalize()
	room, _, err := t.c.roomFor(ctx, n.ConversationID, n.ParentConversationID)
	if err != nil {
		return fmt.Errorf("matrix: typing: %w", err)
	}
	t.c.typingMu.Lock()
	defer t.c.typingMu.Unlock() // held across the request: a send's clear waits for it, never runs before it
	if err := t.c.Typing(mautrix.WithMaxRetries(ctx, 0), room, true, TypingTimeout); err != nil {
		return err
	}
	t.c.typing[room] = time.Now().Add(TypingTimeout)
	return nil
}

// clearTyping ends the bot's typing notice in room if it may still show (after the bot posted there). Best effort:
// the notice lapses by itself within TypingTimeout.
func (c *Client) clearTyping(ctx context.Context, room string) {
	c.typingMu.Lock()
	defer c.typingMu.Unlock()
	until, ok := c.typing[room]
	if !ok {
		return
	}
	delete(c.typing, room)
	if time.Now().After(until) {
		return
	}
	if err := c.Typing(mautrix.WithMaxRetries(context.WithoutCancel(ctx), 0), room, false, 0); err != nil {
		c.log.Debug().Err(err).Str("room", room).Msg("clear typing notice after a send")
	}
}
