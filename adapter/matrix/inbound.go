package matrix

import (
	"encoding/json"
	"strings"
	"time"
)

// Kind is what an inbound event is.
type Kind int

// Inbound kinds.
const (
	KindMessage   Kind = iota + 1 // a new m.room.message
	KindEdit                      // an m.replace edit of an earlier message (Edits names it)
	KindRedaction                 // an m.room.redaction (Redacts names the removed event; maybe a thread root)
	KindInvite                    // the bot was invited to RoomID (Sender invited it)
)

func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindEdit:
		return "edit"
	case KindRedaction:
		return "redaction"
	case KindInvite:
		return "invite"
	}
	return "unknown"
}

// Inbound is one classified event, platform-neutral enough for core: ids are Matrix ids, used verbatim.
type Inbound struct {
	Kind    Kind
	RoomID  string
	EventID string
	Sender  string
	Time    time.Time
	// MsgType is m.text, m.emote, m.image, ... (messages and edits).
	MsgType string
	// Body is the text (for an edit: the new text, from m.new_content).
	Body string
	// ThreadRoot is the root event of the thread this message is in (an m.thread relation).
	ThreadRoot string
	// ReplyTo is the event this message explicitly replies to (not a thread's fallback reply).
	ReplyTo string
	// MentionsBot: the bot's user id is in m.mentions.user_ids (or, for an event without m.mentions, in its body).
	MentionsBot bool
	// MentionsRoom: m.mentions.room is true (an @room); never a mention of the bot by itself.
	MentionsRoom bool
	// Edits is the event an edit replaces.
	Edits string
	// Redacts is the event a redaction removes.
	Redacts string
	// IsDirect: an invite marked as a direct chat (the inviter's DM with the bot).
	IsDirect bool
}

// Classifier decides what the bot does with an event: its own and its ghosts' events are dropped.
type Classifier struct {
	// BotUserID is the bot's user id.
	BotUserID string
	// IsGhost reports whether a user id is one of the bot's personas (appservice ghosts); nil: none.
	IsGhost func(userID string) bool
}

// rawEvent is the part of a client-format event the classifier reads.
type rawEvent struct {
	Type     string          `json:"type"`
	EventID  string          `json:"event_id"`
	Sender   string          `json:"sender"`
	TS       int64           `json:"origin_server_ts"`
	StateKey *string         `json:"state_key"`
	Redacts  string          `json:"redacts"`
	Content  json.RawMessage `json:"content"`
}

type mentions struct {
	UserIDs []string `json:"user_ids"`
	Room    bool     `json:"room"`
}

type messageContent struct {
	MsgType       string    `json:"msgtype"`
	Body          string    `json:"body"`
	FormattedBody string    `json:"formatted_body"`
	Mentions      *mentions `json:"m.mentions"`
	RelatesTo     *struct {
		RelType       string `json:"rel_type"`
		EventID       string `json:"event_id"`
		IsFallingBack bool   `json:"is_falling_back"`
		InReplyTo     *struct {
			EventID string `json:"event_id"`
		} `json:"m.in_reply_to"`
	} `json:"m.relates_to"`
	NewContent *struct {
		MsgType string `json:"msgtype"`
		Body    string `json:"body"`
	} `json:"m.new_content"`
	Redacts string `json:"redacts"` // room v11 carries it in the content
}

// Classify turns a client-format event (raw JSON, as /sync and /messages return it) into an Inbound. ok is false
// for what the bot ignores: its own and its ghosts' events, m.notice messages (other bots), state events, anything
// unparsable, and a thread, edit or redaction whose related event is no event id (ValidEventID). Invites arrive as stripped state in /sync and are classified by the sync loop.
func (c Classifier) Classify(raw json.RawMessage) (Inbound, bool) {
	var ev rawEvent
	if err := json.Unmarshal(raw, &ev); err != nil || ev.EventID == "" {
		return Inbound{}, false
	}
	if c.own(ev.Sender) {
		return Inbound{}, false
	}
	in := Inbound{EventID: ev.EventID, Sender: ev.Sender, Time: time.UnixMilli(ev.TS).UTC()}
	switch ev.Type {
	case "m.room.redaction":
		var mc messageContent
		_ = json.Unmarshal(ev.Content, &mc)
		in.Kind, in.Redacts = KindRedaction, ev.Redacts
		if in.Redacts == "" {
			in.Redacts = mc.Redacts
		}
		return in, ValidEventID(in.Redacts)
	case "m.room.message":
	default:
		return Inbound{}, false
	}
	if ev.StateKey != nil {
		return Inbound{}, false
	}
	var mc messageContent
	if err := json.Unmarshal(ev.Content, &mc); err != nil || mc.MsgType == "" {
		return Inbound{}, false // redacted (content {}) or malformed
	}
	if mc.MsgType == "m.notice" {
		return Inbound{}, false
	}
	in.Kind, in.MsgType, in.Body = KindMessage, mc.MsgType, mc.Body
	if r := mc.RelatesTo; r != nil {
		switch r.RelType {
		case "m.replace":
			if mc.NewContent == nil || !ValidEventID(r.EventID) {
				return Inbound{}, false
			}
			if mc.NewContent.MsgType == "m.notice" {
				return Inbound{}, false
			}
			in.Kind, in.Edits, in.Body, in.MsgType = KindEdit, r.EventID, mc.NewContent.Body, mc.NewContent.MsgType
		case "m.thread":
			// The sender names the root: only an event id is taken, and the gateway still checks that it is an
			// event of this room before the message is routed (invariant 18).
			if !ValidEventID(r.EventID) {
				return Inbound{}, false
			}
			in.ThreadRoot = r.EventID
			if r.InReplyTo != nil && !r.IsFallingBack {
				in.ReplyTo = r.InReplyTo.EventID
			}
		default:
			if r.InReplyTo != nil {
				in.ReplyTo = r.InReplyTo.EventID
			}
		}
	}
	if mc.Mentions != nil {
		in.MentionsRoom = mc.Mentions.Room
		for _, u := range mc.Mentions.UserIDs {
			if u == c.BotUserID {
				in.MentionsBot = true
			}
		}
	} else if c.BotUserID != "" && in.Kind == KindMessage {
		// No m.mentions at all: a client from before intentional mentions; it links or types the user id.
		in.MentionsBot = strings.Contains(mc.Body, c.BotUserID) || strings.Contains(mc.FormattedBody, "matrix.to/#/"+c.BotUserID)
	}
	return in, true
}

func (c Classifier) own(sender string) bool {
	return sender == c.BotUserID || (c.IsGhost != nil && c.IsGhost(sender))
}
