package discordtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// allowedMentions is the allowed_mentions object of a message body.
type allowedMentions struct {
	Parse       *[]string `json:"parse"`
	Roles       []string  `json:"roles"`
	Users       []string  `json:"users"`
	RepliedUser bool      `json:"replied_user"`
}

// mentionsLocked enforces the bot's no-ping rule (invariant 12) on a body
// that creates or edits a message: allowed_mentions must be present, with
// parse an empty array, no roles, at most one user (a command that
// explicitly allows one user mention) and replied_user not true. This is
// stricter than Discord, which parses every mention when the field is
// absent: a send path that forgot it would ping in production. A violation
// answers 400 and is recorded in Violations (kind "allowed_mentions"), which
// the end-to-end teardown and NewTest assert empty.
func (e *Emulator) mentionsLocked(c *call, raw json.RawMessage) reply {
	problem := ""
	var am allowedMentions
	switch {
	case len(raw) == 0 || string(raw) == "null":
		problem = "no allowed_mentions: every mention in the content would ping"
	case json.Unmarshal(raw, &am) != nil:
		problem = "allowed_mentions is not an object"
	case am.Parse == nil:
		problem = "allowed_mentions.parse is missing or null; want []"
	case len(*am.Parse) != 0:
		problem = fmt.Sprintf("allowed_mentions.parse = %v; want []", *am.Parse)
	case len(am.Roles) != 0:
		problem = "allowed_mentions.roles is not empty"
	case len(am.Users) > 1:
		problem = "allowed_mentions.users names more than one user"
	case am.RepliedUser:
		problem = "allowed_mentions.replied_user is true"
	}
	if problem == "" {
		return reply{}
	}
	e.referee = append(e.referee, Violation{Method: c.r.Method, Path: strings.TrimPrefix(c.r.URL.Path, APIPrefix), Kind: "allowed_mentions", Detail: problem})
	return formError("allowed_mentions", "ALLOWED_MENTIONS_REQUIRED", problem)
}

// msgBody is the create/edit message body (and the webhook execute body, which adds persona fields).
type msgBody struct {
	Content          *string            `json:"content"`
	Embeds           []json.RawMessage  `json:"embeds"`
	AllowedMentions  json.RawMessage    `json:"allowed_mentions"`
	MessageReference *MessageReference  `json:"message_reference"`
	Nonce            json.RawMessage    `json:"nonce"`
	EnforceNonce     bool               `json:"enforce_nonce"`
	Flags            *int               `json:"flags"`
	Components       json.RawMessage    `json:"components"`
	Username         string             `json:"username"`
	AvatarURL        string             `json:"avatar_url"`
	Data             *msgBody           `json:"data"`    // interaction callbacks
	Type             int                `json:"type"`    // interaction callbacks
	Choices          *[]json.RawMessage `json:"choices"` // autocomplete results (callback type 8)
	Attachments      *[]attachmentRef   `json:"attachments"`

	hasFiles bool // the message carries files (set by the handler, not sent)
}

func (b *msgBody) content() string {
	if b.Content == nil {
		return ""
	}
	return *b.Content
}

func (b *msgBody) nonce() string {
	if len(b.Nonce) == 0 || string(b.Nonce) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(b.Nonce, &s) == nil {
		return s
	}
	return string(b.Nonce) // integer nonce
}

// validateContent enforces the empty-message and length rules.
func validateContent(b *msgBody) reply {
	if utf8.RuneCountInString(b.content()) > MaxContentLength {
		return formError("content", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxContentLength))
	}
	if strings.TrimSpace(b.content()) == "" && len(b.Embeds) == 0 && !b.hasFiles {
		return errEmptyMessage()
	}
	return reply{}
}

// prepareThreadSend applies the locked / archived rules before posting into ch.
func (e *Emulator) prepareThreadSendLocked(ch *Channel) reply {
	if !ch.IsThread() {
		return reply{}
	}
	if ch.Locked {
		return errLocked()
	}
	if ch.Archived {
		ch.Archived = false
		ch.ArchiveTimestamp = e.opts.Now()
		e.dispatchLocked("THREAD_UPDATE", ch.wire(&e.world))
	}
	return reply{}
}

// postLocked stores a message and emits MESSAGE_CREATE.
func (e *Emulator) postLocked(ch *Channel, m *Message) *Message {
	m.ID = e.nextIDLocked()
	m.ChannelID = ch.ID
	m.GuildID = ch.GuildID
	m.Timestamp = e.opts.Now()
	e.world.messages[ch.ID] = append(e.world.messages[ch.ID], m)
	e.world.msgByID[m.ID] = m
	ch.LastMessageID = m.ID
	if ch.IsThread() {
		ch.MessageCount++
	}
	e.dispatchMessageLocked("MESSAGE_CREATE", m)
	return m
}

func (e *Emulator) createMessage(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	need := int64(discordgo.PermissionSendMessages)
	if ch.IsThread() {
		need = discordgo.PermissionSendMessagesInThreads
	}
	if ch.Type != ChannelTypeDM && e.world.botDenied(ch)&need != 0 {
		return errMissingPerms()
	}
	var b msgBody
	c.acceptFiles = true
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
		return r
	}
	b.hasFiles = len(c.uploads) > 0
	if r := validateContent(&b); r.status != 0 {
		return r
	}
	nonce := b.nonce()
	if len(nonce) > maxNonceLength {
		return formError("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	key := ch.ID + "\x00" + e.botUser.ID + "\x00" + nonce
	if nonce != "" && b.EnforceNonce {
		if n, found := e.world.nonces[key]; found && e.opts.Now().Sub(n.at) < e.opts.NonceWindow {
			if m := e.world.msgByID[n.id]; m != nil {
				return ok(m.wire())
			}
		}
	}
	rows, r := parseComponents(b.Components)
	if r.status != 0 {
		return r
	}
	m := &Message{Content: b.content(), Author: e.botUser, Embeds: b.Embeds, AllowedMentions: b.AllowedMentions, Nonce: nonce, Components: rows}
	if b.Flags != nil {
		m.Flags = *b.Flags
	}
	if ref := b.MessageReference; ref != nil && ref.MessageID != "" {
		target := e.world.msgByID[ref.MessageID]
		if target == nil || target.ChannelID != ch.ID && (ref.ChannelID == "" || ref.ChannelID != target.ChannelID) {
			if ref.FailIfNotExists == nil || *ref.FailIfNotExists {
				return formError("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
			}
		} else {
			m.MessageReference = &MessageReference{MessageID: target.ID, ChannelID: target.ChannelID, GuildID: target.GuildID}
			m.Type = MessageTypeReply
		}
	}
	if r := e.prepareThreadSendLocked(ch); r.status != 0 {
		return r
	}
	m.ChannelID = ch.ID
	if r := e.attachUploadsLocked(c, &b, m); r.status != 0 {
		return r
	}
	e.postLocked(ch, m)
	if nonce != "" && b.EnforceNonce {
		e.world.nonces[key] = nonceRec{id: m.ID, at: e.opts.Now()}
	}
	return ok(m.wire())
}

// message resolves a message in a viewable channel.
func (e *Emulator) message(chID, msgID string) (*Channel, *Message, reply) {
	ch, r := e.viewable(chID)
	if ch == nil {
		return nil, nil, r
	}
	m := e.world.msgByID[msgID]
	if m == nil || m.ChannelID != ch.ID {
		return nil, nil, errUnknownMessage()
	}
	return ch, m, reply{}
}

func (e *Emulator) getMessage(c *call) reply {
	_, m, r := e.message(c.p["channel_id"], c.p["message_id"])
	if m == nil {
		return r
	}
	return ok(m.wire())
}

func (e *Emulator) listMessages(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	if e.world.botDenied(ch)&discordgo.PermissionReadMessageHistory != 0 {
		return ok([]any{})
	}
	limit := defaultMessageListSize
	if s := c.q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return formError("limit", "NUMBER_TYPE_MAX", "int value should be between 1 and 100.")
		}
		limit = n
	}
	msgs := e.world.messages[ch.ID] // ascending
	var sel []*Message
	switch {
	case c.q.Get("after") != "":
		after := c.q.Get("after")
		for _, m := range msgs {
			if idLess(after, m.ID) && len(sel) < limit {
				sel = append(sel, m)
			}
		}
	case c.q.Get("around") != "":
		around := c.q.Get("around")
		idx := len(msgs)
		for i, m := range msgs {
			if !idLess(m.ID, around) {
				idx = i
				break
			}
		}
		lo := max(0, idx-limit/2)
		hi := min(len(msgs), lo+limit)
		sel = append(sel, msgs[lo:hi]...)
	default:
		before := c.q.Get("before")
		for i := len(msgs) - 1; i >= 0 && len(sel) < limit; i-- {
			if before == "" || idLess(msgs[i].ID, before) {
				sel = append([]*Message{msgs[i]}, sel...)
			}
		}
	}
	out := make([]any, 0, len(sel))
	for i := len(sel) - 1; i >= 0; i-- { // newest first, as Discord returns them
		out = append(out, sel[i].wire())
	}
	return ok(out)
}

// idLess compares snowflakes numerically.
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func (e *Emulator) editMessage(c *call) reply {
	ch, m, r := e.message(c.p["channel_id"], c.p["message_id"])
	if m == nil {
		return r
	}
	if m.Author.ID != e.botUser.ID || m.WebhookID != "" {
		return fail(403, 50005, "Cannot edit a message authored by another user")
	}
	return e.applyEditLocked(c, ch, m)
}

// applyEditLocked applies an edit body to m (bot or webhook message) and emits MESSAGE_UPDATE.
func (e *Emulator) applyEditLocked(c *call, ch *Channel, m *Message) reply {
	if ch.IsThread() && ch.Archived {
		return errArchived()
	}
	var b msgBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
		return r
	}
	next := *m
	if b.Content != nil {
		next.Content = *b.Content
	}
	if b.Embeds != nil {
		next.Embeds = b.Embeds
	}
	if b.Components != nil {
		rows, r := parseComponents(b.Components)
		if r.status != 0 {
			return r
		}
		next.Components = rows
	}
	next.Attachments = keepAttachments(b.Attachments, m.Attachments)
	chk := msgBody{Content: &next.Content, Embeds: next.Embeds, hasFiles: len(next.Attachments) > 0}
	if r := validateContent(&chk); r.status != 0 {
		return r
	}
	if next.Content != m.Content {
		m.History = append(m.History, m.Content)
	}
	m.Content, m.Embeds, m.Components, m.Attachments = next.Content, next.Embeds, next.Components, next.Attachments
	m.AllowedMentions = b.AllowedMentions // Discord recomputes mentions with the edit's allowances
	if b.Flags != nil {
		m.Flags = *b.Flags
	}
	m.Flags &^= FlagLoading
	m.EditedTimestamp = e.opts.Now()
	e.dispatchMessageLocked("MESSAGE_UPDATE", m)
	return ok(m.wire())
}

func (e *Emulator) deleteMessage(c *call) reply {
	ch, m, r := e.message(c.p["channel_id"], c.p["message_id"])
	if m == nil {
		return r
	}
	if m.Author.ID != e.botUser.ID && e.world.botDenied(ch)&discordgo.PermissionManageMessages != 0 {
		return errMissingPerms()
	}
	if ch.IsThread() && ch.Archived {
		return errArchived()
	}
	e.removeMessageLocked(ch, m)
	return noContent()
}

func (e *Emulator) removeMessageLocked(ch *Channel, m *Message) {
	e.world.messages[ch.ID] = slices.DeleteFunc(e.world.messages[ch.ID], func(x *Message) bool { return x == m })
	delete(e.world.msgByID, m.ID)
	d := map[string]any{"id": m.ID, "channel_id": ch.ID}
	if ch.GuildID != "" {
		d["guild_id"] = ch.GuildID
	}
	e.dispatchLocked("MESSAGE_DELETE", d)
}
