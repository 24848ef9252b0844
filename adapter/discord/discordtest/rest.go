package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// Discord limits enforced by the emulator.
const (
	MaxContentLength       = 2000
	MaxWebhooksPerChannel  = 15
	maxNonceLength         = 25
	maxThreadNameLength    = 100
	maxWebhookNameLength   = 80
	defaultMessageListSize = 50
)

// buildRoutes returns the route table. Literal segments come before parameters where both match.
func (e *Emulator) buildRoutes() []route {
	rs := []route{
		{method: "GET", tmpl: "/gateway", public: true, h: e.getGateway},
		{method: "GET", tmpl: "/gateway/bot", h: e.getGatewayBot},
		{method: "GET", tmpl: "/users/@me", h: e.getMe},
		{method: "GET", tmpl: "/users/@me/guilds", h: e.listMyGuilds},
		{method: "GET", tmpl: "/applications/@me", h: e.getMyApplication},
		{method: "POST", tmpl: "/users/@me/channels", h: e.createDM},
		{method: "GET", tmpl: "/users/{user_id}", h: e.getUser},
		{method: "GET", tmpl: "/guilds/{guild_id}", h: e.getGuild},
		{method: "GET", tmpl: "/guilds/{guild_id}/channels", h: e.getGuildChannels},
		{method: "GET", tmpl: "/guilds/{guild_id}/members/{user_id}", h: e.getGuildMember},
		{method: "GET", tmpl: "/guilds/{guild_id}/roles", h: e.getGuildRoles},
		{method: "GET", tmpl: "/guilds/{guild_id}/threads/active", h: e.getActiveThreads},
		{method: "GET", tmpl: "/channels/{channel_id}", h: e.getChannel},
		{method: "PATCH", tmpl: "/channels/{channel_id}", h: e.patchChannel},
		{method: "DELETE", tmpl: "/channels/{channel_id}", h: e.deleteChannel},
		{method: "POST", tmpl: "/channels/{channel_id}/typing", h: e.typing},
		{method: "GET", tmpl: "/channels/{channel_id}/messages", h: e.listMessages},
		{method: "POST", tmpl: "/channels/{channel_id}/messages", h: e.createMessage},
		{method: "GET", tmpl: "/channels/{channel_id}/messages/{message_id}", h: e.getMessage},
		{method: "PATCH", tmpl: "/channels/{channel_id}/messages/{message_id}", h: e.editMessage},
		{method: "DELETE", tmpl: "/channels/{channel_id}/messages/{message_id}", h: e.deleteMessage},
		{method: "POST", tmpl: "/channels/{channel_id}/messages/{message_id}/threads", h: e.threadFromMessage},
		{method: "POST", tmpl: "/channels/{channel_id}/threads", h: e.threadStandalone},
		{method: "PUT", tmpl: "/channels/{channel_id}/thread-members/@me", h: e.joinThread},
		{method: "DELETE", tmpl: "/channels/{channel_id}/thread-members/@me", h: e.leaveThread},
		{method: "POST", tmpl: "/channels/{channel_id}/webhooks", h: e.createWebhook},
		{method: "GET", tmpl: "/channels/{channel_id}/webhooks", h: e.listWebhooks},
		{method: "GET", tmpl: "/webhooks/{webhook_id}", h: e.getWebhook},
		{method: "DELETE", tmpl: "/webhooks/{webhook_id}", h: e.deleteWebhook},
		{method: "GET", tmpl: "/webhooks/{webhook_id}/{webhook_token}", public: true, h: e.getWebhookWithToken},
		{method: "POST", tmpl: "/webhooks/{webhook_id}/{webhook_token}", public: true, h: e.executeWebhook},
		{method: "GET", tmpl: "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}", public: true, h: e.getWebhookMessage},
		{method: "PATCH", tmpl: "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}", public: true, h: e.editWebhookMessage},
		{method: "DELETE", tmpl: "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}", public: true, h: e.deleteWebhookMessage},
		{method: "GET", tmpl: "/applications/{application_id}/commands", h: e.getCommands},
		{method: "PUT", tmpl: "/applications/{application_id}/commands", h: e.putCommands},
		{method: "GET", tmpl: "/applications/{application_id}/guilds/{guild_id}/commands", h: e.getCommands},
		{method: "PUT", tmpl: "/applications/{application_id}/guilds/{guild_id}/commands", h: e.putCommands},
		{method: "POST", tmpl: "/interactions/{interaction_id}/{interaction_token}/callback", public: true, h: e.interactionCallback},
	}
	for i := range rs {
		rs[i].segs = splitPath(rs[i].tmpl)
		rs[i].global = !strings.HasPrefix(rs[i].tmpl, "/interactions/")
	}
	return rs
}

// ---- gateway, users, guilds ----

func (e *Emulator) getGateway(*call) reply { return ok(map[string]any{"url": e.GatewayURL()}) }

func (e *Emulator) getGatewayBot(*call) reply {
	l := e.startLim
	return ok(map[string]any{"url": e.GatewayURL(), "shards": e.opts.Shards, "session_start_limit": map[string]any{
		"total": l.Total, "remaining": l.Remaining, "reset_after": l.ResetAfter.Milliseconds(), "max_concurrency": l.MaxConcurrency,
	}})
}

func (e *Emulator) getMe(*call) reply { return ok(e.botUser.wire()) }

func (e *Emulator) getUser(c *call) reply {
	u, found := e.world.users[c.p["user_id"]]
	if !found {
		return errUnknownUser()
	}
	return ok(u.wire())
}

func (e *Emulator) createDM(c *call) reply {
	var b struct {
		RecipientID string `json:"recipient_id"`
	}
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	u, found := e.world.users[b.RecipientID]
	if !found || u.ID == e.botUser.ID {
		return errUnknownUser()
	}
	return ok(e.dmChannelLocked(u).wire(&e.world))
}

// dmChannelLocked returns (creating on first use) the DM channel between the bot and u.
func (e *Emulator) dmChannelLocked(u User) *Channel {
	if id, found := e.world.dms[u.ID]; found {
		return e.world.channels[id]
	}
	ch := &Channel{ID: e.nextIDLocked(), Type: ChannelTypeDM, Recipients: []User{u}}
	e.world.channels[ch.ID] = ch
	e.world.channelOrder = append(e.world.channelOrder, ch.ID)
	e.world.dms[u.ID] = ch.ID
	return ch
}

func (e *Emulator) getGuild(c *call) reply {
	g := e.world.guilds[c.p["guild_id"]]
	if g == nil {
		return errUnknownGuild()
	}
	gc := e.guildCreateLocked(g.ID)
	for _, k := range []string{"channels", "threads", "members", "presences", "voice_states", "joined_at", "member_count", "large"} {
		delete(gc, k)
	}
	return ok(gc)
}

func (e *Emulator) getGuildChannels(c *call) reply {
	if e.world.guilds[c.p["guild_id"]] == nil {
		return errUnknownGuild()
	}
	out := []any{}
	for _, id := range e.world.channelOrder {
		ch := e.world.channels[id]
		if !ch.Deleted && ch.GuildID == c.p["guild_id"] && !ch.IsThread() {
			out = append(out, ch.wire(&e.world))
		}
	}
	return ok(out)
}

func (e *Emulator) getActiveThreads(c *call) reply {
	if e.world.guilds[c.p["guild_id"]] == nil {
		return errUnknownGuild()
	}
	threads, members := []any{}, []any{}
	for _, id := range e.world.channelOrder {
		ch := e.world.channels[id]
		if ch.Deleted || ch.GuildID != c.p["guild_id"] || !ch.IsThread() || ch.Archived {
			continue
		}
		if e.world.botDenied(ch)&discordgo.PermissionViewChannel != 0 {
			continue
		}
		threads = append(threads, ch.wire(&e.world))
		if slices.Contains(ch.Members, e.botUser.ID) {
			members = append(members, e.threadMemberWire(ch))
		}
	}
	return ok(map[string]any{"threads": threads, "members": members, "has_more": false})
}

func (e *Emulator) threadMemberWire(ch *Channel) map[string]any {
	return map[string]any{"id": ch.ID, "user_id": e.botUser.ID, "join_timestamp": e.opts.Now().UTC().Format(tsLayout), "flags": 0}
}

// ---- channels ----

// viewable resolves a channel the bot can see: 10003 when unknown, 50001 without VIEW_CHANNEL.
func (e *Emulator) viewable(id string) (*Channel, reply) {
	ch := e.world.channel(id)
	if ch == nil {
		return nil, errUnknownChannel()
	}
	if e.world.botDenied(ch)&discordgo.PermissionViewChannel != 0 {
		return nil, errMissingAccess()
	}
	return ch, reply{}
}

func (e *Emulator) getChannel(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	return ok(ch.wire(&e.world))
}

func (e *Emulator) typing(c *call) reply {
	if ch, r := e.viewable(c.p["channel_id"]); ch == nil {
		return r
	}
	return noContent()
}

func (e *Emulator) patchChannel(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	var b struct {
		Name                *string `json:"name"`
		Archived            *bool   `json:"archived"`
		Locked              *bool   `json:"locked"`
		AutoArchiveDuration *int    `json:"auto_archive_duration"`
	}
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	denied := e.world.botDenied(ch)
	if !ch.IsThread() {
		if denied&discordgo.PermissionManageChannels != 0 {
			return errMissingPerms()
		}
		if b.Name != nil {
			if r := checkName(*b.Name, maxThreadNameLength); r.status != 0 {
				return r
			}
			ch.Name = *b.Name
		}
		e.dispatchLocked("CHANNEL_UPDATE", ch.wire(&e.world))
		return ok(ch.wire(&e.world))
	}
	mod := denied&discordgo.PermissionManageThreads == 0
	if b.Locked != nil && !mod || !mod && ch.OwnerID != e.botUser.ID {
		return errMissingPerms()
	}
	unarchiving := b.Archived != nil && !*b.Archived
	if ch.Archived && !unarchiving && b.Archived == nil {
		return errArchived()
	}
	if b.Name != nil {
		if r := checkName(*b.Name, maxThreadNameLength); r.status != 0 {
			return r
		}
		ch.Name = *b.Name
	}
	if b.AutoArchiveDuration != nil {
		if !validArchiveDuration(*b.AutoArchiveDuration) {
			return formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of (60, 1440, 4320, 10080).")
		}
		ch.AutoArchiveDuration = *b.AutoArchiveDuration
	}
	if b.Locked != nil {
		ch.Locked = *b.Locked
	}
	if b.Archived != nil && *b.Archived != ch.Archived {
		ch.Archived = *b.Archived
		ch.ArchiveTimestamp = e.opts.Now()
	}
	e.dispatchLocked("THREAD_UPDATE", ch.wire(&e.world))
	return ok(ch.wire(&e.world))
}

func (e *Emulator) deleteChannel(c *call) reply {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return r
	}
	need := int64(discordgo.PermissionManageChannels)
	if ch.IsThread() {
		need = discordgo.PermissionManageThreads
	}
	if ch.Type != ChannelTypeDM && e.world.botDenied(ch)&need != 0 {
		return errMissingPerms()
	}
	wire := ch.wire(&e.world)
	e.deleteChannelLocked(ch)
	return ok(wire)
}

func (e *Emulator) deleteChannelLocked(ch *Channel) {
	ch.Deleted = true
	if ch.IsThread() {
		e.dispatchLocked("THREAD_DELETE", map[string]any{"id": ch.ID, "guild_id": ch.GuildID, "parent_id": ch.ParentID, "type": ch.Type})
		return
	}
	e.dispatchLocked("CHANNEL_DELETE", ch.wire(&e.world))
}

func checkName(name string, max int) reply {
	if n := utf8.RuneCountInString(name); n < 1 || n > max {
		return formError("name", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", max))
	}
	return reply{}
}

func validArchiveDuration(d int) bool { return d == 60 || d == 1440 || d == 4320 || d == 10080 }

// ---- messages ----

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
	Content          *string           `json:"content"`
	Embeds           []json.RawMessage `json:"embeds"`
	AllowedMentions  json.RawMessage   `json:"allowed_mentions"`
	MessageReference *MessageReference `json:"message_reference"`
	Nonce            json.RawMessage   `json:"nonce"`
	EnforceNonce     bool              `json:"enforce_nonce"`
	Flags            *int              `json:"flags"`
	Components       json.RawMessage   `json:"components"`
	Username         string            `json:"username"`
	AvatarURL        string            `json:"avatar_url"`
	Data             *msgBody          `json:"data"` // interaction callbacks
	Type             int               `json:"type"` // interaction callbacks
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
	if strings.TrimSpace(b.content()) == "" && len(b.Embeds) == 0 {
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
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
		return r
	}
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
	chk := msgBody{Content: &next.Content, Embeds: next.Embeds}
	if r := validateContent(&chk); r.status != 0 {
		return r
	}
	if next.Content != m.Content {
		m.History = append(m.History, m.Content)
	}
	m.Content, m.Embeds, m.Components = next.Content, next.Embeds, next.Components
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

// ---- threads ----

type threadBody struct {
	Name                string `json:"name"`
	AutoArchiveDuration int    `json:"auto_archive_duration"`
	Type                int    `json:"type"`
}

func (e *Emulator) threadParent(c *call, private bool) (*Channel, reply) {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return nil, r
	}
	if ch.Type != ChannelTypeText {
		return nil, fail(400, 50024, "Cannot execute action on this channel type")
	}
	need := int64(discordgo.PermissionCreatePublicThreads)
	if private {
		need = discordgo.PermissionCreatePrivateThreads
	}
	if e.world.botDenied(ch)&need != 0 {
		return nil, errMissingPerms()
	}
	return ch, reply{}
}

func (e *Emulator) validateThreadBody(b *threadBody) reply {
	if r := checkName(b.Name, maxThreadNameLength); r.status != 0 {
		return r
	}
	if b.AutoArchiveDuration == 0 {
		b.AutoArchiveDuration = 4320
	}
	if !validArchiveDuration(b.AutoArchiveDuration) {
		return formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of (60, 1440, 4320, 10080).")
	}
	return reply{}
}

// newThreadLocked creates a thread owned by ownerID and emits THREAD_CREATE.
func (e *Emulator) newThreadLocked(id string, parent *Channel, name string, typ, dur int, ownerID string) *Channel {
	th := &Channel{
		ID: id, GuildID: parent.GuildID, ParentID: parent.ID, Name: name, Type: typ, OwnerID: ownerID,
		AutoArchiveDuration: dur, ArchiveTimestamp: e.opts.Now(), Members: []string{ownerID},
	}
	e.world.channels[id] = th
	e.world.channelOrder = append(e.world.channelOrder, id)
	w := th.wire(&e.world)
	w["newly_created"] = true
	e.dispatchLocked("THREAD_CREATE", w)
	return th
}

func (e *Emulator) threadStandalone(c *call) reply {
	var b threadBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if b.Type == 0 {
		b.Type = 12 // Discord's default for threads without a message: PRIVATE_THREAD
	}
	if b.Type != ChannelTypePublicThread && b.Type != 12 {
		return formError("type", "BASE_TYPE_CHOICES", "Value must be one of (11, 12).")
	}
	parent, r := e.threadParent(c, b.Type == 12)
	if parent == nil {
		return r
	}
	if r := e.validateThreadBody(&b); r.status != 0 {
		return r
	}
	th := e.newThreadLocked(e.nextIDLocked(), parent, b.Name, b.Type, b.AutoArchiveDuration, e.botUser.ID)
	return reply{status: http.StatusCreated, body: th.wire(&e.world)}
}

func (e *Emulator) threadFromMessage(c *call) reply {
	parent, r := e.threadParent(c, false)
	if parent == nil {
		return r
	}
	m := e.world.msgByID[c.p["message_id"]]
	if m == nil || m.ChannelID != parent.ID {
		return errUnknownMessage()
	}
	if e.world.channels[m.ID] != nil {
		return fail(400, 160004, "A thread has already been created for this message")
	}
	var b threadBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.validateThreadBody(&b); r.status != 0 {
		return r
	}
	th := e.newThreadLocked(m.ID, parent, b.Name, ChannelTypePublicThread, b.AutoArchiveDuration, e.botUser.ID)
	return reply{status: http.StatusCreated, body: th.wire(&e.world)}
}

func (e *Emulator) thread(id string) (*Channel, reply) {
	ch, r := e.viewable(id)
	if ch == nil {
		return nil, r
	}
	if !ch.IsThread() {
		return nil, fail(400, 50024, "Cannot execute action on this channel type")
	}
	return ch, reply{}
}

func (e *Emulator) joinThread(c *call) reply {
	th, r := e.thread(c.p["channel_id"])
	if th == nil {
		return r
	}
	if th.Archived {
		return errArchived()
	}
	if !slices.Contains(th.Members, e.botUser.ID) {
		th.Members = append(th.Members, e.botUser.ID)
		d := e.threadMemberWire(th)
		d["guild_id"] = th.GuildID
		e.dispatchLocked("THREAD_MEMBER_UPDATE", d)
	}
	return noContent()
}

func (e *Emulator) leaveThread(c *call) reply {
	th, r := e.thread(c.p["channel_id"])
	if th == nil {
		return r
	}
	if th.Archived {
		return errArchived()
	}
	th.Members = slices.DeleteFunc(th.Members, func(id string) bool { return id == e.botUser.ID })
	return noContent()
}

// ---- webhooks ----

func (e *Emulator) webhookChannel(c *call) (*Channel, reply) {
	ch, r := e.viewable(c.p["channel_id"])
	if ch == nil {
		return nil, r
	}
	if ch.Type != ChannelTypeText {
		return nil, fail(400, 50024, "Cannot execute action on this channel type")
	}
	if e.world.botDenied(ch)&discordgo.PermissionManageWebhooks != 0 {
		return nil, errMissingPerms()
	}
	return ch, reply{}
}

func (e *Emulator) createWebhook(c *call) reply {
	ch, r := e.webhookChannel(c)
	if ch == nil {
		return r
	}
	var b struct {
		Name string `json:"name"`
	}
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := checkName(b.Name, maxWebhookNameLength); r.status != 0 {
		return r
	}
	if l := strings.ToLower(b.Name); strings.Contains(l, "clyde") || strings.Contains(l, "discord") {
		return formError("name", "USERNAME_INVALID_CONTAINS", "Username cannot contain \"clyde\" or \"discord\"")
	}
	if len(e.webhooksLocked(ch.ID)) >= MaxWebhooksPerChannel {
		return errTooManyWebhooks()
	}
	h := e.addWebhookLocked(ch, b.Name, e.appID)
	return ok(h.wire(true))
}

func (e *Emulator) addWebhookLocked(ch *Channel, name, appID string) *Webhook {
	id := e.nextIDLocked()
	h := &Webhook{ID: id, Token: "wh-" + id + "-token", ChannelID: ch.ID, GuildID: ch.GuildID, Name: name, ApplicationID: appID}
	e.world.webhooks[id] = h
	e.world.hookOrder = append(e.world.hookOrder, id)
	e.dispatchLocked("WEBHOOKS_UPDATE", map[string]any{"guild_id": ch.GuildID, "channel_id": ch.ID})
	return h
}

func (e *Emulator) webhooksLocked(channelID string) []*Webhook {
	var out []*Webhook
	for _, id := range e.world.hookOrder {
		if h := e.world.webhooks[id]; h != nil && h.ChannelID == channelID {
			out = append(out, h)
		}
	}
	return out
}

func (e *Emulator) listWebhooks(c *call) reply {
	ch, r := e.webhookChannel(c)
	if ch == nil {
		return r
	}
	out := []any{}
	for _, h := range e.webhooksLocked(ch.ID) {
		out = append(out, h.wire(h.ApplicationID == e.appID))
	}
	return ok(out)
}

func (e *Emulator) getWebhook(c *call) reply {
	h := e.world.webhooks[c.p["webhook_id"]]
	if h == nil {
		return errUnknownWebhook()
	}
	return ok(h.wire(h.ApplicationID == e.appID))
}

func (e *Emulator) deleteWebhook(c *call) reply {
	h := e.world.webhooks[c.p["webhook_id"]]
	if h == nil {
		return errUnknownWebhook()
	}
	e.deleteWebhookLocked(h)
	return noContent()
}

func (e *Emulator) deleteWebhookLocked(h *Webhook) {
	delete(e.world.webhooks, h.ID)
	e.world.hookOrder = slices.DeleteFunc(e.world.hookOrder, func(id string) bool { return id == h.ID })
	e.dispatchLocked("WEBHOOKS_UPDATE", map[string]any{"guild_id": h.GuildID, "channel_id": h.ChannelID})
}

// webhookAuth resolves {webhook_id}/{webhook_token}: 10015 when unknown, 50027 on a bad token.
func (e *Emulator) webhookAuth(c *call) (*Webhook, reply) {
	h := e.world.webhooks[c.p["webhook_id"]]
	if h == nil {
		return nil, errUnknownWebhook()
	}
	if h.Token != c.p["webhook_token"] {
		return nil, errInvalidWebhookTok()
	}
	return h, reply{}
}

func (e *Emulator) getWebhookWithToken(c *call) reply {
	h, r := e.webhookAuth(c)
	if h == nil {
		return r
	}
	return ok(h.wire(false))
}

// webhookTarget is the channel a webhook call addresses: its channel, or ?thread_id= inside it.
func (e *Emulator) webhookTarget(h *Webhook, threadID string) (*Channel, reply) {
	if threadID == "" {
		ch := e.world.channel(h.ChannelID)
		if ch == nil {
			return nil, errUnknownChannel()
		}
		return ch, reply{}
	}
	th := e.world.channel(threadID)
	if th == nil || th.ParentID != h.ChannelID {
		return nil, errUnknownChannel()
	}
	return th, reply{}
}

func (e *Emulator) executeWebhook(c *call) reply {
	if c.p["webhook_id"] == e.appID {
		return e.followup(c)
	}
	h, r := e.webhookAuth(c)
	if h == nil {
		return r
	}
	ch, r := e.webhookTarget(h, c.q.Get("thread_id"))
	if ch == nil {
		return r
	}
	var b msgBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
		return r
	}
	if r := validateContent(&b); r.status != 0 {
		return r
	}
	if l := strings.ToLower(b.Username); strings.Contains(l, "clyde") || strings.Contains(l, "discord") {
		return formError("username", "USERNAME_INVALID_CONTAINS", "Username cannot contain \"clyde\" or \"discord\"")
	}
	if r := e.prepareThreadSendLocked(ch); r.status != 0 {
		return r
	}
	name := h.Name
	if b.Username != "" {
		name = b.Username
	}
	m := &Message{
		Content: b.content(), Author: User{ID: h.ID, Username: name, Bot: true}, WebhookID: h.ID,
		AvatarURL: b.AvatarURL, Embeds: b.Embeds, AllowedMentions: b.AllowedMentions,
	}
	if b.Flags != nil {
		m.Flags = *b.Flags
	}
	e.postLocked(ch, m)
	if c.q.Get("wait") == "true" {
		return ok(m.wire())
	}
	return noContent()
}

// webhookMessage resolves a message posted by webhook h (or, for the application, by an interaction).
func (e *Emulator) webhookMessage(c *call) (*Channel, *Message, *Interaction, reply) {
	if c.p["webhook_id"] == e.appID {
		in := e.world.interactions[c.p["webhook_token"]]
		if in == nil {
			return nil, nil, nil, errUnknownWebhook()
		}
		if e.tokenExpiredLocked(in) {
			return nil, nil, nil, errInvalidWebhookTok()
		}
		id := c.p["message_id"]
		if id == "@original" {
			id = in.OriginalID
		}
		m := e.world.msgByID[id]
		if m == nil || m.InteractionID != in.ID {
			return nil, nil, in, errUnknownMessage()
		}
		return e.world.channels[m.ChannelID], m, in, reply{}
	}
	h, r := e.webhookAuth(c)
	if h == nil {
		return nil, nil, nil, r
	}
	m := e.world.msgByID[c.p["message_id"]]
	if m == nil || m.WebhookID != h.ID {
		return nil, nil, nil, errUnknownMessage()
	}
	if tid := c.q.Get("thread_id"); tid != "" && m.ChannelID != tid {
		return nil, nil, nil, errUnknownMessage()
	}
	return e.world.channels[m.ChannelID], m, nil, reply{}
}

func (e *Emulator) getWebhookMessage(c *call) reply {
	_, m, _, r := e.webhookMessage(c)
	if m == nil {
		return r
	}
	return ok(m.wire())
}

func (e *Emulator) editWebhookMessage(c *call) reply {
	ch, m, in, r := e.webhookMessage(c)
	if in != nil && c.p["message_id"] == "@original" && in.ephemeral && in.acked {
		// Ephemeral originals are not displayed; record the edit only.
		var b msgBody
		if r := c.decode(&b); r.status != 0 {
			return r
		}
		if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
			return r
		}
		in.Responses = append(in.Responses, InteractionResponse{Kind: "edit-original", Content: b.content(), Ephemeral: true, Raw: c.body})
		e.broadcastLocked()
		return ok(map[string]any{"id": in.ID, "content": b.content(), "flags": FlagEphemeral})
	}
	if m == nil {
		return r
	}
	rep := e.applyEditLocked(c, ch, m)
	if in != nil && rep.status == http.StatusOK {
		in.Responses = append(in.Responses, InteractionResponse{Kind: "edit-original", Content: m.Content, Flags: m.Flags, MessageID: m.ID, Raw: c.body})
	}
	return rep
}

func (e *Emulator) deleteWebhookMessage(c *call) reply {
	ch, m, _, r := e.webhookMessage(c)
	if m == nil {
		return r
	}
	if ch.IsThread() && ch.Archived {
		return errArchived()
	}
	e.removeMessageLocked(ch, m)
	return noContent()
}

// ---- application commands and interactions ----

func (e *Emulator) getCommands(c *call) reply {
	if c.p["application_id"] != e.appID {
		return fail(403, 50001, "Missing Access")
	}
	out := []any{}
	for _, cmd := range e.world.commands[c.p["guild_id"]] {
		out = append(out, cmd.wire(e.appID))
	}
	return ok(out)
}

func (cmd Command) wire(appID string) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(cmd.Raw, &m)
	m["id"] = cmd.ID
	m["application_id"] = appID
	m["version"] = cmd.ID
	m["type"] = cmd.Type
	if cmd.GuildID != "" {
		m["guild_id"] = cmd.GuildID
	}
	return m
}

func (e *Emulator) putCommands(c *call) reply {
	if c.p["application_id"] != e.appID {
		return fail(403, 50001, "Missing Access")
	}
	guildID := c.p["guild_id"]
	if guildID != "" && e.world.guilds[guildID] == nil {
		return errUnknownGuild()
	}
	var raws []json.RawMessage
	if r := c.decode(&raws); r.status != 0 {
		return r
	}
	old := map[string]string{}
	for _, cmd := range e.world.commands[guildID] {
		old[cmd.Name] = cmd.ID
	}
	cmds := []Command{}
	for i, raw := range raws {
		var b struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Type        int    `json:"type"`
		}
		if json.Unmarshal(raw, &b) != nil || b.Name == "" || len(b.Name) > 32 {
			return formError(strconv.Itoa(i), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
		}
		if b.Type == 0 {
			b.Type = 1
		}
		id := old[b.Name]
		if id == "" {
			id = e.nextIDLocked()
		}
		cmds = append(cmds, Command{ID: id, GuildID: guildID, Name: b.Name, Description: b.Description, Type: b.Type, Raw: raw})
	}
	e.world.commands[guildID] = cmds
	out := []any{}
	for _, cmd := range cmds {
		out = append(out, cmd.wire(e.appID))
	}
	return ok(out)
}

func (e *Emulator) interactionCallback(c *call) reply {
	in := e.world.interByID[c.p["interaction_id"]]
	if in == nil || in.Token != c.p["interaction_token"] {
		return errUnknownInteraction()
	}
	if in.acked {
		return errAlreadyAcked()
	}
	if e.opts.Now().Sub(in.Created) > e.opts.InteractionDeadline {
		// Discord forgets an interaction nobody answered within 3 s.
		return errUnknownInteraction()
	}
	var b msgBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	data := b.Data
	if data == nil {
		data = &msgBody{}
	}
	flags := 0
	if data.Flags != nil {
		flags = *data.Flags
	}
	resp := InteractionResponse{Kind: "callback", Type: b.Type, Content: data.content(), Flags: flags, Ephemeral: flags&FlagEphemeral != 0, Raw: c.body}
	switch b.Type {
	case 4:
		if r := e.mentionsLocked(c, data.AllowedMentions); r.status != 0 {
			return r
		}
		if r := validateContent(data); r.status != 0 {
			return r
		}
	case 5:
	case 6, 7:
		// DEFERRED_UPDATE_MESSAGE and UPDATE_MESSAGE exist only for a
		// component's interaction (a click on a message).
		if in.CustomID == "" {
			return formError("type", "INTERACTION_RESPONSE_TYPE_INVALID", "This response type is only valid for message component interactions")
		}
		if b.Type == 7 {
			return formError("type", "EMULATOR_UNSUPPORTED", "the emulator does not model UPDATE_MESSAGE (7); edit the message instead")
		}
		in.acked = true
		in.Responses = append(in.Responses, resp)
		e.broadcastLocked()
		return noContent()
	default:
		// PONG, modals: recorded, nothing displayed.
		in.acked = true
		in.Responses = append(in.Responses, resp)
		e.broadcastLocked()
		return noContent()
	}
	in.acked = true
	in.ephemeral = resp.Ephemeral
	if !resp.Ephemeral {
		ch := e.world.channel(in.ChannelID)
		if ch == nil {
			return errUnknownChannel()
		}
		m := &Message{
			Content: data.content(), Author: e.botUser, WebhookID: e.appID, Embeds: data.Embeds,
			AllowedMentions: data.AllowedMentions, Type: MessageTypeSlashReply, Flags: flags, InteractionID: in.ID,
		}
		if b.Type == 5 {
			m.Flags |= FlagLoading
		}
		e.postLocked(ch, m)
		in.OriginalID = m.ID
		resp.MessageID = m.ID
	}
	in.Responses = append(in.Responses, resp)
	e.broadcastLocked()
	return noContent()
}

// tokenExpiredLocked reports whether an interaction token outlived its 15 minutes.
func (e *Emulator) tokenExpiredLocked(in *Interaction) bool {
	return e.opts.Now().Sub(in.Created) > e.opts.InteractionTokenTTL
}

func (e *Emulator) followup(c *call) reply {
	in := e.world.interactions[c.p["webhook_token"]]
	if in == nil || !in.acked {
		return errUnknownWebhook()
	}
	if e.tokenExpiredLocked(in) {
		return errInvalidWebhookTok()
	}
	var b msgBody
	if r := c.decode(&b); r.status != 0 {
		return r
	}
	if r := e.mentionsLocked(c, b.AllowedMentions); r.status != 0 {
		return r
	}
	if r := validateContent(&b); r.status != 0 {
		return r
	}
	flags := 0
	if b.Flags != nil {
		flags = *b.Flags
	}
	resp := InteractionResponse{Kind: "followup", Content: b.content(), Flags: flags, Ephemeral: flags&FlagEphemeral != 0, Raw: c.body}
	m := &Message{
		Content: b.content(), Author: e.botUser, WebhookID: e.appID, Embeds: b.Embeds, AllowedMentions: b.AllowedMentions,
		Type: MessageTypeSlashReply, Flags: flags, InteractionID: in.ID,
	}
	if resp.Ephemeral {
		// Not displayed: give it an id so the response decodes, but keep it out of the channel.
		m.ID = e.nextIDLocked()
		m.ChannelID, m.GuildID, m.Timestamp = in.ChannelID, in.GuildID, e.opts.Now()
	} else {
		ch := e.world.channel(in.ChannelID)
		if ch == nil {
			return errUnknownChannel()
		}
		e.postLocked(ch, m)
		resp.MessageID = m.ID
	}
	in.Responses = append(in.Responses, resp)
	e.broadcastLocked()
	if c.q.Get("wait") == "false" {
		return noContent()
	}
	return ok(m.wire())
}
