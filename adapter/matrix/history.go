package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/sessionkey"
)

var _ audit.Display = (*Client)(nil)

// historyScan bounds the events one Read scans, per message asked for
// (edits, redactions and state events share the timeline).
const historyScan = 4

// historyEvent is the part of a /messages event the audit reads.
type historyEvent struct {
	Type, EventID, Sender string
	TS                    int64
	State, Redacted       bool
	Content               json.RawMessage
}

// Read returns what t displays now, as a person's client shows it (the
// audit's audit.Display for Matrix): the room's m.room.message events from
// event oldest on (inclusive; read backwards from the newest, at most
// limit messages), oldest first, each with its latest m.replace edit's
// text; redacted events and the edit events themselves are not messages.
// A thread's messages are in conversation <root>; t names a room, a
// thread (ID its root, Parent its room) or a DM ("user:@u:server").
func (c *Client) Read(ctx context.Context, t audit.Target, oldest string, limit int) ([]audit.Message, error) {
	room, base, dm := t.ID, t.ID, false
	switch {
	case strings.HasPrefix(t.ID, sessionkey.DMPrefix):
		r, err := c.DMRoom(ctx, strings.TrimPrefix(t.ID, sessionkey.DMPrefix))
		if err != nil {
			return nil, err
		}
		room, dm = r, true
	case strings.HasPrefix(t.ID, "$"):
		if t.Parent == "" {
			return nil, fmt.Errorf("matrix: read thread %s: its room is not known", t.ID)
		}
		room, base = t.Parent, t.Parent
	}
	events, err := c.timeline(ctx, room, oldest, limit)
	if err != nil {
		return nil, err
	}
	// A client shows an edit only by the message's own sender.
	sender := map[string]string{}
	for _, ev := range events {
		sender[ev.EventID] = ev.Sender
	}
	edits := map[string]string{}
	for _, ev := range events {
		var mc messageContent
		if ev.Type == "m.room.message" && json.Unmarshal(ev.Content, &mc) == nil && mc.RelatesTo != nil &&
			mc.RelatesTo.RelType == "m.replace" && mc.NewContent != nil && sender[mc.RelatesTo.EventID] == ev.Sender {
			edits[mc.RelatesTo.EventID] = mc.NewContent.Body // later edits win
		}
	}
	var out []audit.Message
	for _, ev := range events {
		var mc messageContent
		if ev.Type != "m.room.message" || ev.State || ev.Redacted ||
			json.Unmarshal(ev.Content, &mc) != nil || mc.MsgType == "" || (mc.RelatesTo != nil && mc.RelatesTo.RelType == "m.replace") {
			continue
		}
		m := audit.Message{ID: ev.EventID, Conversation: base, Author: ev.Sender, At: time.UnixMilli(ev.TS).UTC(), Text: mc.Body,
			FromBot: c.mine(ev.Sender)}
		if dm {
			m.Conversation = t.ID
		}
		if mc.RelatesTo != nil && mc.RelatesTo.RelType == "m.thread" {
			m.Conversation = mc.RelatesTo.EventID
		}
		if b, ok := edits[ev.EventID]; ok {
			m.Text, m.Edited = b, true
		}
		if mc.MsgType != "m.text" && mc.MsgType != "m.notice" && mc.MsgType != "m.emote" {
			m.Attachments = []string{mc.Body}
		}
		m.Addressed = !m.FromBot && mc.MsgType != "m.notice" && (dm || (mc.Mentions != nil && slices.Contains(mc.Mentions.UserIDs, c.opt.UserID)))
		out = append(out, m)
	}
	return out, nil
}

// mine reports whether the bot or one of its personas sent an event.
func (c *Client) mine(sender string) bool { return sender == c.opt.UserID || c.IsGhost(sender) }

// timeline reads room's events backwards from the newest until event
// oldest, limit messages or limit*historyScan events, oldest first.
func (c *Client) timeline(ctx context.Context, room, oldest string, limit int) ([]historyEvent, error) {
	var back []historyEvent
	from, messages := "", 0
	for messages < limit && len(back) < limit*historyScan {
		resp, err := c.bot.Messages(ctx, id.RoomID(room), from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			return nil, classify("matrix: read room "+room, err)
		}
		done := false
		for _, raw := range resp.Chunk {
			ev := historyEvent{Type: raw.Type.Type, EventID: raw.ID.String(), Sender: raw.Sender.String(), TS: raw.Timestamp,
				State: raw.StateKey != nil, Redacted: raw.Unsigned.RedactedBecause != nil, Content: raw.Content.VeryRaw}
			back = append(back, ev)
			if ev.Type == "m.room.message" {
				messages++
			}
			if ev.EventID == oldest || messages >= limit {
				done = true
				break
			}
		}
		if done || resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	slices.Reverse(back)
	return back, nil
}
