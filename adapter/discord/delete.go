package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
)

// DeleteMessage deletes one of the bot's messages in conv (a note that is
// forgotten). A message, channel or DM already gone is no error: what was
// asked for is true. Discord answers with MESSAGE_DELETE, which the
// deletion path takes as a replay.
func (c *Client) DeleteMessage(ctx context.Context, conv binding.ConversationRef, messageID string) error {
	s := c.session()
	channelID, err := c.channelFor(ctx, s, conv.ConversationID)
	if err != nil {
		return fmt.Errorf("delete message %s: %w", messageID, err)
	}
	endpoint := discordgo.EndpointChannelMessage(channelID, messageID)
	err = c.liveRequest(ctx, s, "DELETE", endpoint, discordgo.EndpointChannelMessage(channelID, ""), nil, nil)
	if code, status, ok := restCode(err); ok && (code == codeUnknownMessage || code == codeUnknownChannel || status == 404) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete message %s: %w", messageID, err)
	}
	return nil
}
