package discordtest

import (
	"context"
	"fmt"
	"net/url"
	"slices"
)

// ---- seeding ----
//
// Seeding methods may be called before Start or while sessions are connected; in the latter case
// they emit the gateway events Discord would (GUILD_CREATE, CHANNEL_CREATE, THREAD_CREATE, ...).

// AddGuild creates a guild. Its owner is a separate, non-bot user, so channel overwrites apply to the bot.
func (e *Emulator) AddGuild(name string) Guild {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addGuildLocked(name, e.nextIDLocked())
}

func (e *Emulator) addGuildLocked(name, id string) Guild {
	g := &Guild{ID: id, Name: name}
	owner := User{ID: e.nextIDLocked(), Username: name + "-owner"}
	g.OwnerID = owner.ID
	e.world.users[owner.ID] = owner
	e.world.guilds[g.ID] = g
	e.world.guildOrder = append(e.world.guildOrder, g.ID)
	e.world.members[g.ID] = []string{e.botUser.ID, owner.ID}
	e.dispatchLocked("GUILD_CREATE", e.guildCreateLocked(g.ID))
	return *g
}

// AddGuildOnShard creates a guild whose id falls on shard of count ((id >> 22) % count == shard),
// so tests can seed guilds for each shard of a sharded bot. It panics on shard outside [0, count).
func (e *Emulator) AddGuildOnShard(name string, shard, count int) Guild {
	if count < 1 || shard < 0 || shard >= count {
		panic(fmt.Sprintf("discordtest: shard %d of %d", shard, count))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// The first millisecond after both the clock and the last id that is on that shard.
	ms := max(e.lastID>>22, e.opts.Now().UnixMilli()-discordEpoch) + 1
	for ms%int64(count) != int64(shard) {
		ms++
	}
	e.lastID = ms << 22
	return e.addGuildLocked(name, fmt.Sprint(e.lastID))
}

// AddTextChannel creates a text channel in a guild.
func (e *Emulator) AddTextChannel(guildID, name string) (Channel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.guilds[guildID] == nil {
		return Channel{}, fmt.Errorf("discordtest: unknown guild %s", guildID)
	}
	ch := &Channel{ID: e.nextIDLocked(), GuildID: guildID, Name: name, Type: ChannelTypeText}
	e.world.channels[ch.ID] = ch
	e.world.channelOrder = append(e.world.channelOrder, ch.ID)
	e.dispatchLocked("CHANNEL_CREATE", ch.wire(&e.world))
	return cloneChannel(ch), nil
}

// AddMember creates a (human) user and makes them a member of the guild.
func (e *Emulator) AddMember(guildID, username string) (User, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.guilds[guildID] == nil {
		return User{}, fmt.Errorf("discordtest: unknown guild %s", guildID)
	}
	u := User{ID: e.nextIDLocked(), Username: username}
	e.world.users[u.ID] = u
	e.world.members[guildID] = append(e.world.members[guildID], u.ID)
	e.dispatchLocked("GUILD_MEMBER_ADD", map[string]any{
		"guild_id": guildID, "user": u.wire(), "roles": []any{}, "joined_at": e.opts.Now().UTC().Format(tsLayout),
	})
	return u, nil
}

// AddUser creates a (human) user who is a member of no guild: a stranger who can only DM the bot.
func (e *Emulator) AddUser(username string) User {
	e.mu.Lock()
	defer e.mu.Unlock()
	u := User{ID: e.nextIDLocked(), Username: username}
	e.world.users[u.ID] = u
	return u
}

// AddCategory creates a channel category in a guild (type 4): text
// channels are put in it with MoveChannel.
func (e *Emulator) AddCategory(guildID, name string) (Channel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.world.guilds[guildID] == nil {
		return Channel{}, fmt.Errorf("discordtest: unknown guild %s", guildID)
	}
	ch := &Channel{ID: e.nextIDLocked(), GuildID: guildID, Name: name, Type: ChannelTypeCategory}
	e.world.channels[ch.ID] = ch
	e.world.channelOrder = append(e.world.channelOrder, ch.ID)
	e.dispatchLocked("CHANNEL_CREATE", ch.wire(&e.world))
	return cloneChannel(ch), nil
}

// MoveChannel puts a text channel into a category of its guild ("" takes
// it out of any), as a moderator dragging it does, emitting CHANNEL_UPDATE.
func (e *Emulator) MoveChannel(channelID, categoryID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.world.channel(channelID)
	if ch == nil || ch.Type != ChannelTypeText {
		return fmt.Errorf("discordtest: %s is not a text channel", channelID)
	}
	if categoryID != "" {
		cat := e.world.channel(categoryID)
		if cat == nil || cat.Type != ChannelTypeCategory || cat.GuildID != ch.GuildID {
			return fmt.Errorf("discordtest: %s is not a category of guild %s", categoryID, ch.GuildID)
		}
	}
	ch.ParentID = categoryID
	e.dispatchLocked("CHANNEL_UPDATE", ch.wire(&e.world))
	return nil
}

// AddThread creates an active public thread under a text channel, owned by ownerID (a user id, or
// the bot's), emitting THREAD_CREATE.
func (e *Emulator) AddThread(parentID, name, ownerID string) (Channel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	parent := e.world.channel(parentID)
	if parent == nil || parent.Type != ChannelTypeText {
		return Channel{}, fmt.Errorf("discordtest: %s is not a text channel", parentID)
	}
	th := e.newThreadLocked(e.nextIDLocked(), parent, name, ChannelTypePublicThread, 1440, ownerID)
	return cloneChannel(th), nil
}

// AddWebhook creates a webhook on a text channel as if another application had made it
// (it counts toward the 15-per-channel limit; its token is not shown to the bot).
func (e *Emulator) AddWebhook(channelID, name string) (Webhook, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.world.channel(channelID)
	if ch == nil || ch.Type != ChannelTypeText {
		return Webhook{}, fmt.Errorf("discordtest: %s is not a text channel", channelID)
	}
	return *e.addWebhookLocked(ch, name, ""), nil
}

// DenyBot sets the permissions denied to the bot on a channel (a member overwrite; threads inherit
// their parent's). Use discordgo.Permission* bits, e.g. PermissionSendMessages|PermissionManageWebhooks.
// Passing 0 removes the overwrite. Emits CHANNEL_UPDATE for text channels.
func (e *Emulator) DenyBot(channelID string, perms int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.world.channel(channelID)
	if ch == nil {
		return fmt.Errorf("discordtest: unknown channel %s", channelID)
	}
	if perms == 0 {
		delete(e.world.deny, channelID)
	} else {
		e.world.deny[channelID] = perms
	}
	if ch.IsThread() {
		e.dispatchLocked("THREAD_UPDATE", ch.wire(&e.world))
	} else {
		e.dispatchLocked("CHANNEL_UPDATE", ch.wire(&e.world))
	}
	return nil
}

// ---- acting as users ----

func (e *Emulator) userLocked(userID string) (User, error) {
	u, found := e.world.users[userID]
	if !found {
		return User{}, fmt.Errorf("discordtest: unknown user %s", userID)
	}
	return u, nil
}

// UserSay posts content as a user in a channel or thread, emitting MESSAGE_CREATE. Posting in an
// archived, unlocked thread unarchives it (THREAD_UPDATE first), as in Discord.
func (e *Emulator) UserSay(channelID, userID, content string) (Message, error) {
	return e.userPost(channelID, userID, content, "")
}

// UserSayFiles posts content with attached files as a user. Each file is
// served at its attachment URL (GET, on the emulator's loopback address,
// like Discord's CDN); AttachmentFetches counts the downloads.
func (e *Emulator) UserSayFiles(channelID, userID, content string, files ...File) (Message, error) {
	return e.userPostFiles(channelID, userID, content, "", files)
}

// UserReply posts a reply (message_reference to replyTo) as a user.
func (e *Emulator) UserReply(channelID, userID, replyTo, content string) (Message, error) {
	return e.userPost(channelID, userID, content, replyTo)
}

// UserDM posts content as a user in their DM channel with the bot (created on first use).
func (e *Emulator) UserDM(userID, content string) (Message, error) {
	e.mu.Lock()
	u, err := e.userLocked(userID)
	var chID string
	if err == nil {
		chID = e.dmChannelLocked(u).ID
	}
	e.mu.Unlock()
	if err != nil {
		return Message{}, err
	}
	return e.userPost(chID, userID, content, "")
}

func (e *Emulator) userPost(channelID, userID, content, replyTo string) (Message, error) {
	return e.userPostFiles(channelID, userID, content, replyTo, nil)
}

func (e *Emulator) userPostFiles(channelID, userID, content, replyTo string, files []File) (Message, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, err := e.userLocked(userID)
	if err != nil {
		return Message{}, err
	}
	ch := e.world.channel(channelID)
	if ch == nil {
		return Message{}, fmt.Errorf("discordtest: unknown channel %s", channelID)
	}
	if ch.IsThread() && ch.Locked {
		return Message{}, fmt.Errorf("discordtest: thread %s is locked", channelID)
	}
	if ch.GuildID != "" && !e.world.canPost(userID, ch) {
		return Message{}, fmt.Errorf("discordtest: user %s may not post in %s (Discord: Missing Permissions)", userID, channelID)
	}
	m := &Message{Content: content, Author: u, Mentions: e.world.mentionsIn(content)}
	for _, f := range files {
		id := e.nextIDLocked()
		p := "/attachments/" + channelID + "/" + id + "/" + url.PathEscape(f.Name)
		e.world.files[p] = File{Name: f.Name, ContentType: f.ContentType, Data: append([]byte(nil), f.Data...)}
		m.Attachments = append(m.Attachments, Attachment{ID: id, Filename: f.Name, ContentType: f.ContentType, Size: len(f.Data),
			URL: e.baseURL + p + "?ex=0&is=0&hm=emulator"})
	}
	if replyTo != "" {
		target := e.world.msgByID[replyTo]
		if target == nil {
			return Message{}, fmt.Errorf("discordtest: unknown message %s", replyTo)
		}
		m.Type = MessageTypeReply
		m.MessageReference = &MessageReference{MessageID: target.ID, ChannelID: target.ChannelID, GuildID: target.GuildID}
		ref := cloneMessage(target)
		ref.Referenced = nil // Discord nests one level only
		m.Referenced = &ref
	}
	if r := e.prepareThreadSendLocked(ch); r.status != 0 {
		return Message{}, fmt.Errorf("discordtest: cannot post in %s", channelID)
	}
	return cloneMessage(e.postLocked(ch, m)), nil
}

// UserEdit edits a user's message, emitting MESSAGE_UPDATE.
func (e *Emulator) UserEdit(messageID, content string) (Message, error) {
	return e.userEdit(messageID, content, true)
}

// UserEditWithheld edits a user's message and withholds the MESSAGE_UPDATE
// (an event the gateway lost): only a read of the channel shows the edit.
func (e *Emulator) UserEditWithheld(messageID, content string) (Message, error) {
	return e.userEdit(messageID, content, false)
}

func (e *Emulator) userEdit(messageID, content string, dispatch bool) (Message, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.world.msgByID[messageID]
	if m == nil {
		return Message{}, fmt.Errorf("discordtest: unknown message %s", messageID)
	}
	if m.WebhookID != "" || m.Author.ID == e.botUser.ID || m.Author.Bot {
		return Message{}, fmt.Errorf("discordtest: message %s is not a user's (only its author can edit it)", messageID)
	}
	m.History = append(m.History, m.Content)
	m.Content = content
	m.Mentions = e.world.mentionsIn(content)
	m.EditedTimestamp = e.opts.Now()
	if dispatch {
		e.dispatchMessageLocked("MESSAGE_UPDATE", m)
	} else {
		e.broadcastLocked()
	}
	return cloneMessage(m), nil
}

// UserDelete has a user delete a message of their own, emitting MESSAGE_DELETE. Discord
// lets an author delete their own message without Manage Messages; anyone else's needs it
// (DeleteMessage is the moderator's action).
func (e *Emulator) UserDelete(userID, messageID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.world.msgByID[messageID]
	if m == nil {
		return fmt.Errorf("discordtest: unknown message %s", messageID)
	}
	if m.WebhookID != "" || m.Author.ID != userID {
		return fmt.Errorf("discordtest: user %s is not the author of %s (Discord: Missing Permissions)", userID, messageID)
	}
	e.removeMessageLocked(e.world.channels[m.ChannelID], m)
	return nil
}

// BulkDelete deletes messages of one channel at once (as a moderator), emitting one
// MESSAGE_DELETE_BULK, as Discord does for POST /channels/{id}/messages/bulk-delete and for
// a member banned with message deletion. Discord takes 2 to 100 ids, all in the channel.
func (e *Emulator) BulkDelete(channelID string, messageIDs []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.world.channel(channelID)
	if ch == nil {
		return fmt.Errorf("discordtest: unknown channel %s", channelID)
	}
	if len(messageIDs) < 2 || len(messageIDs) > 100 {
		return fmt.Errorf("discordtest: bulk delete takes 2 to 100 messages, got %d (Discord: 50035)", len(messageIDs))
	}
	var ms []*Message
	for _, id := range messageIDs {
		m := e.world.msgByID[id]
		if m == nil || m.ChannelID != channelID {
			return fmt.Errorf("discordtest: message %s is not in %s", id, channelID)
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		e.world.messages[ch.ID] = slices.DeleteFunc(e.world.messages[ch.ID], func(x *Message) bool { return x == m })
		delete(e.world.msgByID, m.ID)
	}
	d := map[string]any{"ids": slices.Clone(messageIDs), "channel_id": ch.ID}
	if ch.GuildID != "" {
		d["guild_id"] = ch.GuildID
	}
	e.dispatchLocked("MESSAGE_DELETE_BULK", d)
	return nil
}

// DeleteMessage deletes any message (as a moderator), emitting MESSAGE_DELETE.
func (e *Emulator) DeleteMessage(messageID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.world.msgByID[messageID]
	if m == nil {
		return fmt.Errorf("discordtest: unknown message %s", messageID)
	}
	e.removeMessageLocked(e.world.channels[m.ChannelID], m)
	return nil
}

func (e *Emulator) setThread(id string, f func(*Channel)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	th := e.world.channel(id)
	if th == nil || !th.IsThread() {
		return fmt.Errorf("discordtest: unknown thread %s", id)
	}
	f(th)
	th.ArchiveTimestamp = e.opts.Now()
	e.dispatchLocked("THREAD_UPDATE", th.wire(&e.world))
	return nil
}

// ArchiveThread archives a thread (as Discord's auto-archive or a moderator would), emitting THREAD_UPDATE.
func (e *Emulator) ArchiveThread(id string) error {
	return e.setThread(id, func(c *Channel) { c.Archived = true })
}

// UnarchiveThread unarchives a thread, emitting THREAD_UPDATE.
func (e *Emulator) UnarchiveThread(id string) error {
	return e.setThread(id, func(c *Channel) { c.Archived = false })
}

// LockThread locks (and archives, when archive is true) a thread, emitting THREAD_UPDATE.
func (e *Emulator) LockThread(id string, archive bool) error {
	return e.setThread(id, func(c *Channel) { c.Locked = true; c.Archived = c.Archived || archive })
}

// UnlockThread unlocks a thread, emitting THREAD_UPDATE.
func (e *Emulator) UnlockThread(id string) error {
	return e.setThread(id, func(c *Channel) { c.Locked = false })
}

// DeleteChannel deletes a channel or thread as a moderator, emitting CHANNEL_DELETE / THREAD_DELETE.
func (e *Emulator) DeleteChannel(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.world.channel(id)
	if ch == nil {
		return fmt.Errorf("discordtest: unknown channel %s", id)
	}
	e.deleteChannelLocked(ch)
	return nil
}

// DeleteWebhook deletes a webhook (as a moderator), so later executes fail with 10015.
func (e *Emulator) DeleteWebhook(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.world.webhooks[id]
	if h == nil {
		return fmt.Errorf("discordtest: unknown webhook %s", id)
	}
	e.deleteWebhookLocked(h)
	return nil
}

// ---- inspection ----

// Messages returns the messages of a channel in display order (oldest first).
func (e *Emulator) Messages(channelID string) []Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Message, 0, len(e.world.messages[channelID]))
	for _, m := range e.world.messages[channelID] {
		out = append(out, cloneMessage(m))
	}
	return out
}

// Message returns one stored message.
func (e *Emulator) Message(id string) (Message, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.world.msgByID[id]
	if m == nil {
		return Message{}, false
	}
	return cloneMessage(m), true
}

// Channel returns a channel or thread (deleted ones too, with Deleted set).
func (e *Emulator) Channel(id string) (Channel, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.world.channels[id]
	if c == nil {
		return Channel{}, false
	}
	return cloneChannel(c), true
}

// Threads returns the non-deleted threads under a parent channel, in creation order.
func (e *Emulator) Threads(parentID string) []Channel {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Channel
	for _, id := range e.world.channelOrder {
		c := e.world.channels[id]
		if !c.Deleted && c.ParentID == parentID && c.IsThread() {
			out = append(out, cloneChannel(c))
		}
	}
	return out
}

// Webhooks returns the webhooks of a channel, in creation order.
func (e *Emulator) Webhooks(channelID string) []Webhook {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Webhook
	for _, h := range e.webhooksLocked(channelID) {
		out = append(out, *h)
	}
	return out
}

// Commands returns the registered commands for a guild ("" for global ones).
func (e *Emulator) Commands(guildID string) []Command {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.world.commands[guildID])
}

// Interaction returns an interaction with the responses recorded so far.
func (e *Emulator) Interaction(id string) (Interaction, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := e.world.interByID[id]
	if in == nil {
		return Interaction{}, false
	}
	return cloneInteraction(in), true
}

// ---- waiting ----

// WaitMessages blocks until channelID holds at least n messages and returns them.
func (e *Emulator) WaitMessages(ctx context.Context, channelID string, n int) ([]Message, error) {
	var out []Message
	err := e.Wait(ctx, func() bool { out = e.Messages(channelID); return len(out) >= n })
	if err != nil {
		return out, fmt.Errorf("discordtest: waiting for %d messages in %s (have %d): %w", n, channelID, len(out), err)
	}
	return out, nil
}

// WaitRequests blocks until at least n requests to method+route (see RequestsTo) were answered.
func (e *Emulator) WaitRequests(ctx context.Context, method, route string, n int) ([]Request, error) {
	var out []Request
	err := e.Wait(ctx, func() bool { out = e.RequestsTo(method, route); return len(out) >= n })
	if err != nil {
		return out, fmt.Errorf("discordtest: waiting for %d %s %s (have %d): %w", n, method, route, len(out), err)
	}
	return out, nil
}

// WaitHeartbeats blocks until the gateway received at least n heartbeats in total.
// Wait for one after discordgo's Open before calling Close (see the package doc).
func (e *Emulator) WaitHeartbeats(ctx context.Context, n int) error {
	return e.Wait(ctx, func() bool { return e.GatewayStats().Heartbeats >= n })
}

// WaitResponses blocks until the interaction has at least n recorded responses.
func (e *Emulator) WaitResponses(ctx context.Context, interactionID string, n int) (Interaction, error) {
	var in Interaction
	err := e.Wait(ctx, func() bool { in, _ = e.Interaction(interactionID); return len(in.Responses) >= n })
	return in, err
}

// WaitAnswer waits for an interaction's answer and returns it with the
// interaction: the first response, or, when the bot deferred (a type 5
// callback), the response after the deferral (the edit of @original, or a
// followup).
func (e *Emulator) WaitAnswer(ctx context.Context, interactionID string) (InteractionResponse, Interaction, error) {
	var in Interaction
	idx := -1
	err := e.Wait(ctx, func() bool {
		in, _ = e.Interaction(interactionID)
		for i, r := range in.Responses {
			if i == 0 && r.Kind == "callback" && r.Type == 5 {
				continue
			}
			idx = i
			return true
		}
		return false
	})
	if err != nil {
		return InteractionResponse{}, in, err
	}
	return in.Responses[idx], in, nil
}
