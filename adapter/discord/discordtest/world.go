package discordtest

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Channel types used by the emulator (same numbers as Discord / discordgo.ChannelType).
const (
	ChannelTypeText         = 0
	ChannelTypeDM           = 1
	ChannelTypeCategory     = 4
	ChannelTypePublicThread = 11
)

// Message types used by the emulator.
const (
	MessageTypeDefault    = 0
	MessageTypeReply      = 19
	MessageTypeSlashReply = 20
)

// Message flags used by the emulator.
const (
	FlagEphemeral = 1 << 6
	FlagLoading   = 1 << 7
)

// User is a Discord user known to the emulator.
type User struct {
	ID       string
	Username string
	Bot      bool
	Avatar   string
}

// Guild is a seeded guild.
type Guild struct {
	ID      string
	Name    string
	OwnerID string
}

// Channel is a guild text channel, a thread, or a DM channel.
type Channel struct {
	ID       string
	GuildID  string
	ParentID string // a thread's channel; a text channel's category (MoveChannel)
	Name     string
	Type     int
	OwnerID  string // threads: creator

	Archived            bool
	Locked              bool
	AutoArchiveDuration int
	ArchiveTimestamp    time.Time
	MessageCount        int
	LastMessageID       string
	Recipients          []User   // DMs only
	Members             []string // threads: user ids that joined
	Deleted             bool
}

// IsThread reports whether the channel is a thread.
func (c Channel) IsThread() bool {
	return c.Type == ChannelTypePublicThread || c.Type == 12 || c.Type == 10
}

// MessageReference is a reply pointer.
type MessageReference struct {
	MessageID       string `json:"message_id,omitempty"`
	ChannelID       string `json:"channel_id,omitempty"`
	GuildID         string `json:"guild_id,omitempty"`
	FailIfNotExists *bool  `json:"fail_if_not_exists,omitempty"`
}

// Message is a stored message, in display order within its channel.
type Message struct {
	ID        string
	ChannelID string
	GuildID   string
	Content   string
	Author    User // for webhook posts: the webhook identity with the persona username
	// WebhookID is set for webhook executes and interaction responses (then it is the application id).
	WebhookID string
	// AvatarURL is the persona avatar_url given on webhook execute.
	AvatarURL        string
	Embeds           []json.RawMessage
	AllowedMentions  json.RawMessage // as sent, nil when omitted
	MessageReference *MessageReference
	Nonce            string
	Type             int
	Flags            int
	Timestamp        time.Time
	EditedTimestamp  time.Time // zero when never edited
	InteractionID    string    // for interaction responses
	// Mentions are the users a user message mentions as <@id> or <@!id>,
	// as Discord parses them from the content.
	Mentions []User
	// Referenced is the message a reply refers to, as it was when the reply
	// was posted (Discord sends it as referenced_message).
	Referenced *Message
	// History holds the previous contents, oldest first, one per edit.
	History []string
	// Attachments are the files a user message carries (UserSayFiles).
	Attachments []Attachment
	// Components are the message's buttons, row by row (see Buttons).
	Components [][]Button
}

// File is a file a user attaches to a message.
type File struct {
	Name        string
	ContentType string // "" = none sent (Discord omits it for unknown types)
	Data        []byte
}

// Attachment is a file on a message as Discord shows it; URL is served by
// the emulator on loopback (Discord: its CDN).
type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	Size        int
	URL         string
}

// Webhook is a channel webhook.
type Webhook struct {
	ID            string
	Token         string
	ChannelID     string
	GuildID       string
	Name          string
	Avatar        string
	ApplicationID string
}

// Command is a registered application command (global when GuildID is empty).
type Command struct {
	ID          string
	GuildID     string
	Name        string
	Description string
	Type        int
	Raw         json.RawMessage // the object as sent by the bot
}

// CommandOption is an option value passed when a user invokes a slash command.
// Value may be a string, an integer type, a float64 or a bool.
type CommandOption struct {
	Name  string
	Value any
	// Focused marks the option a user is typing in an autocomplete
	// interaction (InvokeAutocomplete): exactly one is.
	Focused bool
}

// Choice is one autocomplete suggestion the bot offered (type 8 response).
type Choice struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// InteractionResponse is one reply the bot made to an interaction.
type InteractionResponse struct {
	Kind      string // "callback", "followup" or "edit-original"
	Type      int    // callback type (4 message, 5 deferred, ...); 0 for follow-ups and edits
	Content   string
	Flags     int
	Ephemeral bool
	MessageID string // the displayed message, empty when ephemeral
	// Choices are an autocomplete result's suggestions (type 8).
	Choices []Choice
	Raw     json.RawMessage
}

// Interaction is a slash-command invocation made with InvokeCommand.
type Interaction struct {
	ID        string
	Token     string
	ChannelID string
	GuildID   string
	User      User
	Command   string
	Options   []CommandOption
	// CustomID and MessageID are set for a button click (ClickButton).
	CustomID   string
	MessageID  string
	Responses  []InteractionResponse
	OriginalID string // id of the displayed original response message, if any
	// Autocomplete is set for an InvokeAutocomplete interaction (type 4):
	// its only valid answer is one type 8 callback.
	Autocomplete bool
	Created      time.Time
	acked        bool
	ephemeral    bool // the original response is ephemeral
}

// nonceRec is the message an enforced nonce created, and when.
type nonceRec struct {
	id string
	at time.Time
}

type world struct {
	botID        string
	guilds       map[string]*Guild
	guildOrder   []string
	members      map[string][]string // guild id -> user ids
	users        map[string]User
	channels     map[string]*Channel
	channelOrder []string
	messages     map[string][]*Message // channel id -> messages, ascending id
	msgByID      map[string]*Message
	webhooks     map[string]*Webhook
	hookOrder    []string
	deny         map[string]int64       // channel id -> permissions denied to the bot
	roles        map[string][]*Role     // guild id -> roles, @everyone (id = guild id) first
	memberRoles  map[string][]string    // guild id "/" user id -> role ids
	overwrites   map[string][]Overwrite // channel id -> permission overwrites
	nonces       map[string]nonceRec    // channel\x00author\x00nonce -> message
	commands     map[string][]Command
	interactions map[string]*Interaction // by token
	interByID    map[string]*Interaction
	dms          map[string]string // user id -> DM channel id
	files        map[string]File   // attachment path -> file
}

func newWorld() world {
	return world{
		files:        map[string]File{},
		guilds:       map[string]*Guild{},
		members:      map[string][]string{},
		users:        map[string]User{},
		channels:     map[string]*Channel{},
		messages:     map[string][]*Message{},
		msgByID:      map[string]*Message{},
		webhooks:     map[string]*Webhook{},
		deny:         map[string]int64{},
		roles:        map[string][]*Role{},
		memberRoles:  map[string][]string{},
		overwrites:   map[string][]Overwrite{},
		nonces:       map[string]nonceRec{},
		commands:     map[string][]Command{},
		interactions: map[string]*Interaction{},
		interByID:    map[string]*Interaction{},
		dms:          map[string]string{},
	}
}

// botDenied returns the permissions denied to the bot in a channel (threads inherit the parent's):
// those DenyBot set, and every one its roles and the channel's overwrites do not grant.
func (w *world) botDenied(ch *Channel) int64 {
	d := w.deny[ch.ID]
	if ch.ParentID != "" && ch.IsThread() {
		d |= w.deny[ch.ParentID]
	}
	if ch.GuildID != "" && ch.Type != ChannelTypeDM {
		d |= allPerms &^ w.permissions(w.botID, ch)
	}
	return d
}

func (w *world) channel(id string) *Channel {
	c := w.channels[id]
	if c == nil || c.Deleted {
		return nil
	}
	return c
}

func cloneMessage(m *Message) Message {
	c := *m
	c.Embeds = append([]json.RawMessage(nil), m.Embeds...)
	c.History = append([]string(nil), m.History...)
	c.Mentions = append([]User(nil), m.Mentions...)
	c.Attachments = append([]Attachment(nil), m.Attachments...)
	c.Components = nil
	for _, r := range m.Components {
		c.Components = append(c.Components, append([]Button(nil), r...))
	}
	if m.MessageReference != nil {
		r := *m.MessageReference
		c.MessageReference = &r
	}
	return c
}

func cloneChannel(c *Channel) Channel {
	out := *c
	out.Recipients = append([]User(nil), c.Recipients...)
	out.Members = append([]string(nil), c.Members...)
	return out
}

// ---- wire (JSON) shapes ----

const tsLayout = "2006-01-02T15:04:05.000000+00:00"

func (u User) wire() map[string]any {
	m := map[string]any{"id": u.ID, "username": u.Username, "discriminator": "0", "global_name": nil, "avatar": nil, "bot": u.Bot}
	if u.Avatar != "" {
		m["avatar"] = u.Avatar
	}
	return m
}

func (c *Channel) wire(w *world) map[string]any {
	m := map[string]any{"id": c.ID, "type": c.Type, "name": c.Name, "flags": 0}
	if c.GuildID != "" {
		m["guild_id"] = c.GuildID
	}
	if c.LastMessageID != "" {
		m["last_message_id"] = c.LastMessageID
	} else {
		m["last_message_id"] = nil
	}
	switch {
	case c.Type == ChannelTypeDM:
		rs := []any{}
		for _, u := range c.Recipients {
			rs = append(rs, u.wire())
		}
		m["recipients"] = rs
		delete(m, "name")
	case c.IsThread():
		m["parent_id"] = c.ParentID
		m["owner_id"] = c.OwnerID
		m["message_count"] = c.MessageCount
		m["total_message_sent"] = c.MessageCount
		m["member_count"] = len(c.Members)
		m["rate_limit_per_user"] = 0
		md := map[string]any{
			"archived": c.Archived, "locked": c.Locked, "auto_archive_duration": c.AutoArchiveDuration,
			"archive_timestamp": c.ArchiveTimestamp.UTC().Format(tsLayout), "invitable": true,
		}
		m["thread_metadata"] = md
	default:
		m["position"] = 0
		m["topic"] = nil
		m["nsfw"] = false
		m["parent_id"] = nil // a text channel's category (MoveChannel)
		if c.ParentID != "" {
			m["parent_id"] = c.ParentID
		}
		m["rate_limit_per_user"] = 0
		ows := []any{}
		botDeny := w.deny[c.ID]
		for _, o := range w.overwrites[c.ID] {
			if o.Type == OverwriteMember && o.ID == w.botID {
				o.Deny |= botDeny
				botDeny = 0
			}
			ows = append(ows, o.wire())
		}
		if botDeny != 0 {
			ows = append(ows, map[string]any{"id": w.botID, "type": 1, "allow": "0", "deny": itoa(botDeny)})
		}
		m["permission_overwrites"] = ows
	}
	return m
}

func (m *Message) wireMentions() []any {
	out := []any{}
	for _, u := range m.Mentions {
		out = append(out, u.wire())
	}
	return out
}

// mentionsIn returns the known users (and the bot) a content mentions.
func (w *world) mentionsIn(content string) []User {
	var out []User
	for _, u := range w.users {
		if strings.Contains(content, "<@"+u.ID+">") || strings.Contains(content, "<@!"+u.ID+">") {
			out = append(out, u)
		}
	}
	return out
}

func (m *Message) wireAttachments() []any {
	out := []any{}
	for _, a := range m.Attachments {
		w := map[string]any{"id": a.ID, "filename": a.Filename, "size": a.Size, "url": a.URL, "proxy_url": a.URL}
		if a.ContentType != "" {
			w["content_type"] = a.ContentType
		}
		out = append(out, w)
	}
	return out
}

func (m *Message) wire() map[string]any {
	out := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "type": m.Type, "content": m.Content,
		"author": m.Author.wire(), "timestamp": m.Timestamp.UTC().Format(tsLayout),
		"edited_timestamp": nil, "tts": false, "mention_everyone": false, "mentions": m.wireMentions(),
		"mention_roles": []any{}, "attachments": m.wireAttachments(), "embeds": []any{}, "components": []any{},
		"pinned": false, "flags": m.Flags,
	}
	if m.GuildID != "" {
		out["guild_id"] = m.GuildID
	}
	if !m.EditedTimestamp.IsZero() {
		out["edited_timestamp"] = m.EditedTimestamp.UTC().Format(tsLayout)
	}
	if len(m.Embeds) > 0 {
		out["embeds"] = m.Embeds
	}
	if len(m.Components) > 0 {
		out["components"] = wireComponents(m.Components)
	}
	if m.WebhookID != "" {
		out["webhook_id"] = m.WebhookID
	}
	if m.MessageReference != nil {
		out["message_reference"] = m.MessageReference
		if m.Referenced != nil {
			out["referenced_message"] = m.Referenced.wire()
		}
	}
	if m.Nonce != "" {
		out["nonce"] = m.Nonce
	}
	return out
}

func (h *Webhook) wire(withToken bool) map[string]any {
	m := map[string]any{
		"id": h.ID, "type": 1, "channel_id": h.ChannelID, "name": h.Name, "avatar": nil,
		"application_id": h.ApplicationID,
	}
	if h.GuildID != "" {
		m["guild_id"] = h.GuildID
	}
	if withToken {
		m["token"] = h.Token
	}
	return m
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
