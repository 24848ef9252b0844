package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// DeleteMessage redacts one of the bot's events in conv (a note that is
// forgotten). An event already gone is no error. The homeserver hands the
// redaction back through /sync, which the deletion path takes as a replay.
func (s DeliverySender) DeleteMessage(ctx context.Context, conv binding.ConversationRef, eventID string) error {
	room, err := s.Client.roomOfConv(ctx, conv)
	if err != nil {
		return fmt.Errorf("matrix: delete %s: %w", eventID, err)
	}
	_, err = s.Client.bot.RedactEvent(ctx, id.RoomID(room), id.EventID(eventID), mautrix.ReqRedact{Reason: "note forgotten"})
	if errors.Is(err, mautrix.MNotFound) {
		return nil
	}
	if err != nil {
		return classify("matrix: delete "+eventID, err)
	}
	return nil
}

// roomOfConv is the room a conversation's events are in: a room, a
// thread's room, or the bot's DM room with a user.
func (c *Client) roomOfConv(ctx context.Context, conv binding.ConversationRef) (string, error) {
	switch cid := strings.TrimSpace(conv.ConversationID); {
	case strings.HasPrefix(cid, "!"):
		return cid, nil
	case strings.HasPrefix(cid, "$"):
		return strings.TrimSpace(conv.ParentConversationID), nil
	case strings.HasPrefix(cid, sessionkey.DMPrefix):
		m, err := c.resolveDM(ctx, Message{dmUser: strings.TrimPrefix(cid, sessionkey.DMPrefix)})
		return m.RoomID, err
	}
	return "", fmt.Errorf("%w: conversation %q is neither a room, a thread nor a DM", ErrRejected, conv.ConversationID)
}
