package matrix

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/delivery"
)

// Platform is the channel name of Matrix conversation refs (binding.ConversationRef.Channel).
const Platform = "matrix"

// DeliverySender is the delivery.Sender for Matrix destinations, for the wiring step: a room is
// ConversationRef{Channel: "matrix", ConversationID: "!room:server"}; a thread is ConversationID "$root" with
// ParentConversationID "!room:server". A persona posts as its ghost when the delivery asks for it (ViaWebhook,
// which on Discord means "under the persona's webhook"); otherwise the bot posts.
type DeliverySender struct {
	Client *Client
}

var _ delivery.Sender = DeliverySender{}

// Send posts d. Parts in d.Shown are taken as displayed; on a resend the rest are looked up before posting.
// A failure after some parts returns their ids with the error (Outbound records exactly those).
func (s DeliverySender) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	m, err := messageFor(d)
	if err != nil {
		return delivery.Receipt{}, err
	}
	rc, err := s.Client.send(ctx, m, d.Shown)
	out := delivery.Receipt{MessageIDs: slices.Clone(rc.EventIDs), Duplicate: rc.Duplicate}
	if err != nil && len(rc.EventIDs) > 0 {
		out.Text = rc.Text
	}
	return out, err
}

// messageFor maps a delivery onto a Message, refusing what Matrix cannot show.
func messageFor(d delivery.Delivery) (Message, error) {
	t := d.Target
	if !strings.EqualFold(strings.TrimSpace(t.Channel), Platform) {
		return Message{}, fmt.Errorf("matrix: send %s: %w: target channel %q is not matrix", d.ID, ErrRejected, t.Channel)
	}
	if d.Native || d.Interaction != nil {
		return Message{}, fmt.Errorf("matrix: send %s: %w: embeds and slash-command answers are Discord-only", d.ID, ErrRejected)
	}
	m := Message{DeliveryID: d.ID, Text: d.Text, ReplyTo: d.ReplyTo, Resend: d.Resend, Since: d.FirstAttempt}
	switch conv := strings.TrimSpace(t.ConversationID); {
	case strings.HasPrefix(conv, "!"):
		m.RoomID = conv
	case strings.HasPrefix(conv, "$") && strings.HasPrefix(strings.TrimSpace(t.ParentConversationID), "!"):
		m.RoomID, m.ThreadRoot = strings.TrimSpace(t.ParentConversationID), conv
	default:
		return Message{}, fmt.Errorf("matrix: send %s: %w: conversation %q (parent %q) is neither a room nor a thread root in a room", d.ID, ErrRejected, t.ConversationID, t.ParentConversationID)
	}
	if d.ViaWebhook {
		m.Persona = Persona{Name: d.Persona.Name, AvatarURL: d.Persona.AvatarURL}
	}
	return m, nil
}
