package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
)

// Typing implements session.Typist: POST /channels/{id}/typing in the
// conversation (a DM opens its channel). A rate-limited indicator is
// dropped, not retried: the next renewal comes within seconds, and a retry
// could land after the answer and show "typing" for 10 s after it.
func (c *Client) Typing(ctx context.Context, conv binding.ConversationRef) error {
	s := c.session()
	ch, err := c.channelFor(ctx, s, conv.ConversationID)
	if err != nil {
		return fmt.Errorf("typing: %w", err)
	}
	if err := s.ChannelTyping(ch, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false), discordgo.WithRestRetries(0)); err != nil {
		return fmt.Errorf("typing in %s: %w", ch, err)
	}
	return nil
}
