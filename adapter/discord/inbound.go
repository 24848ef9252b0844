package discord

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Inbound decisions (metric labels).
const (
	inRouted        = "routed"
	inOwnMessage    = "ignored-own"
	inOtherBot      = "ignored-bot"
	inNotAllowed    = "ignored-guild"
	inNotMentioned  = "ignored-not-mentioned"
	inEmpty         = "ignored-empty"
	inHandlerFailed = "failed"
)

// onMessage routes one MESSAGE_CREATE: the bot's own messages and its own
// webhooks' posts are ignored (no echo loops), as are other bots; guild
// messages need the allowlist and a mention unless the conversation is
// bound; DMs always reach the agent.
func (a *Adapter) onMessage(ctx context.Context, m *discordgo.Message) {
	decision := a.route(ctx, m)
	a.d.Metrics.InboundDecision(decision)
}

func (a *Adapter) route(ctx context.Context, m *discordgo.Message) string {
	botID, _ := a.ids()
	switch {
	case m.Author == nil || m.Author.ID == botID:
		return inOwnMessage
	case m.WebhookID != "" && a.hooks.isOwn(m.WebhookID):
		return inOwnMessage
	case m.Author.Bot || m.WebhookID != "":
		return inOtherBot
	case m.GuildID != "" && len(a.guilds) > 0 && !a.guilds[m.GuildID]:
		return inNotAllowed
	}
	conv := a.conversationOf(m.GuildID, m.ChannelID, m.Author.ID)
	rec, bound := a.d.Bindings.ResolveByConversation(conv)
	// Addressed to the bot: a mention, or a reply to one of the bot's own
	// messages (its own posts or its personas' webhook posts), so "stop
	// this" in reply to any bot message reaches the agent.
	mentioned := false
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			mentioned = true
		}
	}
	if r := m.ReferencedMessage; r != nil && ((r.Author != nil && r.Author.ID == botID) || (r.WebhookID != "" && a.hooks.isOwn(r.WebhookID))) {
		mentioned = true
	}
	if m.GuildID != "" && !bound && !mentioned {
		return inNotMentioned
	}
	if strings.TrimSpace(stripMention(m.Content, botID)) == "" {
		return inEmpty
	}
	if bound {
		a.d.Bindings.Touch(rec.ID, a.d.Clock.Now())
	}
	msg := session.Message{Conversation: conv, MessageID: m.ID, AuthorID: m.Author.ID, AuthorName: displayName(m), Text: m.Content}
	if m.MessageReference != nil {
		msg.ReplyTo = m.MessageReference.MessageID
	}
	if err := a.d.Sessions.HandleMessage(ctx, msg); err != nil {
		a.log.Error().Err(err).Str("message", m.ID).Msg("inbound message not handled")
		return inHandlerFailed
	}
	return inRouted
}

// conversationOf builds the ref of a message's conversation: a DM is
// user:<id>; a thread carries its parent channel.
func (a *Adapter) conversationOf(guildID, channelID, userID string) binding.ConversationRef {
	if guildID == "" {
		return a.ref(sessionkey.DMPrefix+userID, "")
	}
	parent := ""
	if s := a.session(); s != nil {
		if ch, ok := stateChannel(s, channelID); ok && ch.IsThread() {
			parent = ch.ParentID
		}
	}
	return a.ref(channelID, parent)
}

// ModelText rewrites the bot's mention markup into its name, for the
// model; transcripts keep the content exactly as displayed.
func (a *Adapter) ModelText(content string) string {
	botID, _ := a.ids()
	a.mu.RLock()
	name := a.botName
	a.mu.RUnlock()
	if botID == "" {
		return content
	}
	return strings.TrimSpace(strings.NewReplacer("<@"+botID+">", "@"+name, "<@!"+botID+">", "@"+name).Replace(content))
}

func stripMention(content, botID string) string {
	if botID == "" {
		return content
	}
	return strings.NewReplacer("<@"+botID+">", "", "<@!"+botID+">", "").Replace(content)
}

func displayName(m *discordgo.Message) string {
	if m.Member != nil && m.Member.Nick != "" {
		return m.Member.Nick
	}
	if m.Author.GlobalName != "" {
		return m.Author.GlobalName
	}
	return m.Author.Username
}

// onThreadState ends the binding of a thread that was archived or locked,
// without posting (a post would unarchive it).
func (a *Adapter) onThreadState(ctx context.Context, ch *discordgo.Channel) {
	if ch == nil || ch.ThreadMetadata == nil {
		return
	}
	switch {
	case ch.ThreadMetadata.Locked:
		a.endBinding(ctx, ch.ID, binding.ReasonThreadLocked)
	case ch.ThreadMetadata.Archived:
		a.endBinding(ctx, ch.ID, binding.ReasonThreadArchive)
	}
}

// onGone ends the binding of a deleted thread or channel (no farewell).
func (a *Adapter) onGone(ctx context.Context, channelID string) {
	a.endBinding(ctx, channelID, binding.ReasonThreadDelete)
}

func (a *Adapter) endBinding(ctx context.Context, channelID, reason string) {
	rec, ok := a.d.Bindings.ResolveByConversation(a.ref(channelID, ""))
	if !ok {
		return
	}
	if _, err := a.d.Bindings.Unbind(ctx, binding.UnbindInput{ID: rec.ID, Reason: reason}); err != nil {
		a.log.Error().Err(err).Str("binding", rec.ID).Msg("unbind")
		return
	}
	a.log.Info().Str("binding", rec.ID).Str("thread", channelID).Str("reason", reason).Msg("binding ended by thread state")
}

// Sweep probes bound threads for events the gateway may have missed:
// unknown channel ends the binding (thread-delete), archived or locked ends
// it too; transient errors keep it.
func (a *Adapter) Sweep(ctx context.Context) {
	s := a.session()
	if s == nil {
		return
	}
	for _, rec := range a.d.Bindings.Active() {
		if rec.Conversation.Channel != "discord" || strings.HasPrefix(rec.Conversation.ConversationID, sessionkey.DMPrefix) {
			continue
		}
		ch, err := s.Channel(rec.Conversation.ConversationID, discordgo.WithContext(ctx))
		if err != nil {
			a.countError(err)
			if errors.Is(classify(err), delivery.ErrDestinationGone) {
				a.endBinding(ctx, rec.Conversation.ConversationID, binding.ReasonThreadDelete)
			}
			continue
		}
		a.onThreadState(ctx, ch)
	}
}

// catchUpLimit bounds how many missed messages per conversation a fresh
// gateway session fetches.
const catchUpLimit = 100

// catchUp queues the messages each conversation received after the newest
// one the bot took (its watermark) while the bot was not connected, in
// display order, ahead of any live event. They go through the ordinary
// routing, and sessions skip messages they already took, so a message is
// answered once however often it is seen.
func (a *Adapter) catchUp(s *discordgo.Session) {
	marks := a.d.Sessions.Watermarks()
	if len(marks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(a.workCtx(), 30*time.Second)
	defer cancel()
	queued := 0
	for conv, last := range marks {
		guildID := ""
		channelID, err := a.channelFor(ctx, s, conv)
		if err == nil && !strings.HasPrefix(conv, sessionkey.DMPrefix) {
			var ch *discordgo.Channel
			if ch, err = a.channel(ctx, s, channelID); err == nil {
				guildID = ch.GuildID
			}
		}
		if err == nil && !a.ownsGuild(guildID) {
			continue // another shard's process catches up on this conversation
		}
		var msgs []*discordgo.Message
		if err == nil {
			msgs, err = s.ChannelMessages(channelID, catchUpLimit, "", last, "", discordgo.WithContext(ctx))
		}
		if err != nil {
			a.countError(err)
			a.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on missed messages")
			continue
		}
		slices.SortFunc(msgs, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
		for _, m := range msgs {
			m.GuildID = guildID
			a.events.push(channelID, "catch_up", func(ctx context.Context) { a.onMessage(ctx, m) })
			queued++
		}
	}
	if queued > 0 {
		a.log.Info().Int("messages", queued).Msg("caught up on messages missed while down")
	}
}

// compareIDs orders snowflakes.
func compareIDs(x, y string) int {
	if len(x) != len(y) {
		return len(x) - len(y)
	}
	return strings.Compare(x, y)
}
