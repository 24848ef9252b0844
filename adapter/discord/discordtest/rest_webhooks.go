package discordtest

import (
	"net/http"
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"
)

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
		if in == nil || in.Autocomplete {
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
