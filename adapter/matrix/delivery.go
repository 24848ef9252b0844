package matrix

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Platform is the channel name of Matrix conversation refs (binding.ConversationRef.Channel).
const Platform = "matrix"

// DeliverySender is the delivery.Sender for Matrix destinations, for the wiring step: a room is
// ConversationRef{Channel: "matrix", ConversationID: "!room:server"}; a thread is ConversationID "$root" with
// ParentConversationID "!room:server"; a DM is ConversationID "user:@alice:server", posted into the bot's DM room
// with that user (m.direct; see dm.go). A persona posts as its ghost when the delivery asks for it (ViaWebhook,
// which on Discord means "under the persona's webhook"); otherwise the bot posts.
type DeliverySender struct {
	Client *Client
}

var _ delivery.Sender = DeliverySender{}

// Send posts d. Parts in d.Shown are taken as displayed; on a resend the rest are looked up before posting.
// A failure after some parts returns their ids with the error (Outbound records exactly those).
func (s DeliverySender) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	m, err := messageFor(d)
	if err == nil {
		m, err = s.Client.resolveDM(ctx, m)
	}
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
	case isDMConv(conv):
		m.dmUser = strings.TrimPrefix(conv, sessionkey.DMPrefix) // its room is looked up when sending (resolveDM)
	default:
		return Message{}, fmt.Errorf("matrix: send %s: %w: conversation %q (parent %q) is neither a room nor a thread root in a room", d.ID, ErrRejected, t.ConversationID, t.ParentConversationID)
	}
	if d.ViaWebhook {
		m.Persona = Persona{Name: d.Persona.Name, AvatarURL: d.Persona.AvatarURL}
	}
	return m, nil
}

var _ delivery.LiveSender = DeliverySender{}

// liveBudget is the most JSON bytes a live part's text takes. A live part is posted and then edited: the edit
// carries the text whole (m.new_content) beside a shortened fallback, its relation and mentions; 4 KiB of
// MaxContentBytes is left for that and for the post's thread relation, reply and delivery mark.
const liveBudget = MaxContentBytes - 4096

// PostLive posts part `part` of live delivery d showing text, as the bot (Matrix live messages are the bot's own:
// the core streams no persona's reply). Its transaction id and delivery mark are those of Send's part `part`, so
// the homeserver dedupes a repeated post, and a resend after a restart (d.Resend) finds the part an earlier
// attempt posted instead of posting it again. Matrix messages have no buttons: the Stop control and optional
// buttons are left out (the room's text commands do the same); other buttons are refused.
func (s DeliverySender) PostLive(ctx context.Context, d delivery.Delivery, part int, text string, c delivery.Controls) (string, error) {
	m, err := liveMessage(d, c)
	if err == nil {
		m, err = s.Client.resolveDM(ctx, m)
	}
	if err != nil {
		return "", err
	}
	m.Text = text
	return s.Client.postPart(ctx, m, part)
}

// EditLive makes the posted part messageID show text (an m.replace edit; its transaction id is new each time: an
// edit repeated shows the same).
func (s DeliverySender) EditLive(ctx context.Context, d delivery.Delivery, messageID, text string, c delivery.Controls) error {
	m, err := liveMessage(d, c)
	if err == nil {
		m, err = s.Client.resolveDM(ctx, m)
	}
	if err != nil {
		return err
	}
	if len(d.Files) > 0 {
		return s.Client.editFile(ctx, m.RoomID, messageID, text)
	}
	_, err = s.Client.Edit(ctx, m.RoomID, messageID, text, "", Persona{})
	return err
}

// SplitLive cuts text into parts that each fit a post and its later edits (liveBudget, measured as posted: with
// "@room" defused); the parts add up to text.
func (DeliverySender) SplitLive(text string) []string {
	var out []string
	for _, p := range Split(text, liveBudget) {
		if JSONLen(Defuse(p)) <= liveBudget {
			out = append(out, p)
			continue
		}
		// Defusing adds 3 bytes per 5-byte "@room": a part of 5/8 the budget fits whatever it holds.
		out = append(out, Split(p, liveBudget*5/8)...)
	}
	return out
}

// liveMessage maps a live delivery onto a Message, refusing what a Matrix live message cannot show.
func liveMessage(d delivery.Delivery, c delivery.Controls) (Message, error) {
	if slices.ContainsFunc(c.Buttons, func(b delivery.Button) bool { return !b.Optional }) {
		return Message{}, fmt.Errorf("matrix: live %s: %w: Matrix messages have no buttons", d.ID, ErrRejected)
	}
	if d.ViaWebhook {
		return Message{}, fmt.Errorf("matrix: live %s: %w: a live message posts as the bot, not under a persona", d.ID, ErrRejected)
	}
	return messageFor(d)
}
