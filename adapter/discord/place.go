package discord

import (
	"context"
	"fmt"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
)

// Place returns the guild a conversation belongs to (usage records and
// server budgets), "" for a DM: Discord's answer from the gateway state or
// REST, never user text.
func (c *Client) Place(ctx context.Context, conv binding.ConversationRef) (string, error) {
	if authz.IsDM(conv) {
		return "", nil
	}
	ch, err := c.channel(ctx, c.session(), conv.ConversationID)
	if err != nil {
		return "", fmt.Errorf("discord: get channel %s: %w", conv.ConversationID, err)
	}
	return ch.GuildID, nil
}
