package discord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// Inbound decisions (metric labels).
const (
	inRouted        = "routed"
	inOwnMessage    = "ignored-own"
	inOtherBot      = "ignored-bot"
	inNotAllowed    = "ignored-guild"
	inNotMentioned  = "ignored-not-mentioned"
	inEmpty         = "ignored-empty"
	inAccessDenied  = "ignored-access"     // discord.access refused the author
	inRateLimited   = "ignored-rate-limit" // the author (or the guild) is over the turn budget
	inHandlerFailed = "failed"
)

// onMessage routes one MESSAGE_CREATE (see addressed for what reaches a
// session).
func (g *Gateway) onMessage(ctx context.Context, m *discordgo.Message) {
	decision := g.route(ctx, m, false)
	g.d.Metrics.InboundDecision(decision)
}

// route routes a user message; viaEdit marks one that reached the bot by an
// edit adding a mention.
func (g *Gateway) route(ctx context.Context, m *discordgo.Message, viaEdit bool) string {
	conv, rec, bound, decision := g.addressed(m)
	if decision != "" {
		return decision
	}
	g.c.noteMember(g.c.session(), m.GuildID, m.Member, m.Author)
	// discord.access: a refused message gets no model call, no reply and
	// no transcript entry; over budget, one notice, then silence.
	if d := g.admit(ctx, m, conv); d != "" {
		return d
	}
	if bound {
		g.d.Bindings.Touch(rec.ID, g.d.Clock.Now())
	}
	msg := g.sessionMessage(m, conv)
	msg.ViaEdit = viaEdit
	if err := g.d.Sessions.HandleMessage(ctx, msg); err != nil {
		if errors.Is(err, session.ErrStopping) {
			g.log.Info().Str("message", m.ID).Msg("inbound message left for the next start (stopping)")
		} else {
			g.log.Error().Err(err).Str("message", m.ID).Msg("inbound message not handled")
		}
		return inHandlerFailed
	}
	return inRouted
}

// addressed decides whether a user message is addressed to the bot (it
// returns "" and the message's conversation) or the inbound decision that
// ignores it: the bot's own messages and its own webhooks' posts are
// ignored (no echo loops), as are other bots; guild messages need the
// allowlist and a mention unless the conversation is bound; DMs always
// reach the agent.
func (g *Gateway) addressed(m *discordgo.Message) (binding.ConversationRef, binding.Record, bool, string) {
	botID, _ := g.c.ids()
	switch {
	case m.Author == nil || m.Author.ID == botID:
		return binding.ConversationRef{}, binding.Record{}, false, inOwnMessage
	case m.WebhookID != "" && g.c.hooks.isOwn(m.WebhookID):
		return binding.ConversationRef{}, binding.Record{}, false, inOwnMessage
	case m.Author.Bot || m.WebhookID != "":
		return binding.ConversationRef{}, binding.Record{}, false, inOtherBot
	case m.GuildID != "" && len(g.c.guilds) > 0 && !g.c.guilds[m.GuildID]:
		return binding.ConversationRef{}, binding.Record{}, false, inNotAllowed
	}
	conv := g.conversationOf(m.GuildID, m.ChannelID, m.Author.ID)
	rec, bound := g.d.Bindings.ResolveByConversation(conv)
	// Addressed to the bot: a mention, or a reply to one of the bot's own
	// messages (its own posts or its personas' webhook posts), so "stop
	// this" in reply to any bot message reaches the agent.
	mentioned := g.mentionsBot(m)
	if r := m.ReferencedMessage; r != nil && ((r.Author != nil && r.Author.ID == botID) || (r.WebhookID != "" && g.c.hooks.isOwn(r.WebhookID))) {
		mentioned = true
	}
	if m.GuildID != "" && !bound && !mentioned {
		return conv, rec, bound, inNotMentioned
	}
	if strings.TrimSpace(stripMention(m.Content, botID)) == "" && len(m.Attachments) == 0 {
		return conv, rec, bound, inEmpty
	}
	return conv, rec, bound, ""
}

// mentionsBot reports whether a message mentions the bot user.
func (g *Gateway) mentionsBot(m *discordgo.Message) bool {
	botID, _ := g.c.ids()
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			return true
		}
	}
	return false
}

// sessionMessage is the session's view of a routed user message.
func (g *Gateway) sessionMessage(m *discordgo.Message, conv binding.ConversationRef) session.Message {
	msg := session.Message{Conversation: conv, MessageID: m.ID, AuthorID: m.Author.ID, AuthorName: displayName(m), Text: m.Content, Attachments: attachmentsOf(m)}
	if m.MessageReference != nil {
		msg.ReplyTo = m.MessageReference.MessageID
	}
	return msg
}

// conversationOf builds the ref of a message's conversation: a DM is
// user:<id>; a thread carries its parent channel.
func (g *Gateway) conversationOf(guildID, channelID, userID string) binding.ConversationRef {
	if guildID == "" {
		return g.c.ref(sessionkey.DMPrefix+userID, "")
	}
	parent := ""
	if ch, ok := stateChannel(g.c.session(), channelID); ok && ch.IsThread() {
		parent = ch.ParentID
	}
	return g.c.ref(channelID, parent)
}

// ModelText rewrites the bot's mention markup into its name, for the
// model; transcripts keep the content exactly as displayed.
func (c *Client) ModelText(content string) string {
	botID, _ := c.ids()
	c.mu.RLock()
	name := c.botName
	c.mu.RUnlock()
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
func (g *Gateway) onThreadState(ctx context.Context, ch *discordgo.Channel) {
	if ch == nil || ch.ThreadMetadata == nil {
		return
	}
	switch {
	case ch.ThreadMetadata.Locked:
		g.endBinding(ctx, ch.ID, binding.ReasonThreadLocked)
	case ch.ThreadMetadata.Archived:
		g.endBinding(ctx, ch.ID, binding.ReasonThreadArchive)
	}
}

// onGone ends the binding of a deleted thread or channel (no farewell).
func (g *Gateway) onGone(ctx context.Context, channelID string) {
	g.endBinding(ctx, channelID, binding.ReasonThreadDelete)
}

func (g *Gateway) endBinding(ctx context.Context, channelID, reason string) {
	rec, ok := g.d.Bindings.ResolveByConversation(g.c.ref(channelID, ""))
	if !ok {
		return
	}
	if _, err := g.d.Bindings.Unbind(ctx, binding.UnbindInput{ID: rec.ID, Reason: reason}); err != nil {
		g.log.Error().Err(err).Str("binding", rec.ID).Msg("unbind")
		return
	}
	g.log.Info().Str("binding", rec.ID).Str("thread", channelID).Str("reason", reason).Msg("binding ended by thread state")
}

// Sweep probes bound threads for events the gateway may have missed:
// unknown channel ends the binding (thread-delete), archived or locked ends
// it too; transient errors keep it.
func (g *Gateway) Sweep(ctx context.Context) {
	s := g.c.session()
	for _, rec := range g.d.Bindings.Active() {
		if rec.Conversation.Channel != "discord" || strings.HasPrefix(rec.Conversation.ConversationID, sessionkey.DMPrefix) {
			continue
		}
		ch, err := s.Channel(rec.Conversation.ConversationID, discordgo.WithContext(ctx))
		if err != nil {
			g.c.countError(err)
			if channelDeleted(err) {
				// Deleted while no event reached the bot (it was down):
				// what it displayed leaves the history as on THREAD_DELETE
				// (invariant 17), before the binding ends.
				g.onConversationDeleted(ctx, rec.Conversation.ConversationID, rec.Conversation.ParentConversationID)
			}
			if errors.Is(classify(err), delivery.ErrDestinationGone) {
				g.endBinding(ctx, rec.Conversation.ConversationID, binding.ReasonThreadDelete)
			}
			continue
		}
		g.onThreadState(ctx, ch)
	}
}

// catchUpLimit bounds how many missed messages per conversation a fresh
// gateway session fetches.
const catchUpLimit = 100

// catchUpMargin is how far before the newest message any conversation
// took a conversation without a watermark is read back: gateway order
// across channels is only roughly creation order.
const catchUpMargin = time.Minute

// catchUp queues the messages each conversation received after the newest
// one the bot took (its watermark) while the bot was not connected, in
// display order, ahead of any live event. They go through the ordinary
// routing, and sessions skip messages they already took, so a message is
// answered once however often it is seen. Conversations the bot never took
// a message from have no watermark; they are read when their guild arrives
// (catchUpGuild), from a floor just before the newest watermark.
func (g *Gateway) catchUp(s *discordgo.Session) {
	marks := g.d.Sessions.Watermarks()
	g.mu.Lock()
	g.catchUpMarks, g.catchUpFloor, g.guildsCaughtUp = marks, floorBefore(marks), map[string]bool{}
	g.mu.Unlock()
	if len(marks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(g.workCtx(), 30*time.Second)
	defer cancel()
	queued := 0
	for conv, last := range marks {
		guildID := ""
		channelID, err := g.c.channelFor(ctx, s, conv)
		if err == nil && !strings.HasPrefix(conv, sessionkey.DMPrefix) {
			var ch *discordgo.Channel
			if ch, err = g.c.channel(ctx, s, channelID); err == nil {
				guildID = ch.GuildID
			}
		}
		if err == nil && !g.ownsGuild(guildID) {
			continue // another shard's process catches up on this conversation
		}
		if err == nil {
			// Changes first: the window compared is the transcript as it
			// stood before the missed messages add their entries (and
			// their answers their messages), which could push a change
			// made while down out of it.
			conv, channelID, guildID := conv, channelID, guildID
			last := last
			g.push(channelID, "catch_up_changes", func(ctx context.Context) { g.catchUpChanges(ctx, s, conv, channelID, guildID, last) })
			queued += g.catchUpChannel(ctx, s, conv, channelID, guildID, last)
		}
		if err != nil {
			g.c.countError(err)
			g.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on missed messages")

		}
	}
	if queued > 0 {
		g.log.Info().Int("messages", queued).Msg("caught up on messages missed while down")
	}
}

// catchUpGuild reads, once per gateway session, the channels and active
// threads of a guild that have no watermark but a message newer than the
// floor: a first message in a channel that the previous process never
// handled (it arrived during a stop or just before a crash) is answered.
func (g *Gateway) catchUpGuild(s *discordgo.Session, guild *discordgo.Guild) {
	g.mu.Lock()
	floor, marks := g.catchUpFloor, g.catchUpMarks
	first := g.guildsCaughtUp != nil && !g.guildsCaughtUp[guild.ID]
	if first {
		g.guildsCaughtUp[guild.ID] = true
	}
	g.mu.Unlock()
	if !first || floor == "" || (len(g.c.guilds) > 0 && !g.c.guilds[guild.ID]) || !g.ownsGuild(guild.ID) {
		return
	}
	ctx, cancel := context.WithTimeout(g.workCtx(), 30*time.Second)
	defer cancel()
	queued := 0
	for _, ch := range slices.Concat(guild.Channels, guild.Threads) {
		if ch == nil || !ch.IsThread() && ch.Type != discordgo.ChannelTypeGuildText {
			continue
		}
		if _, ok := marks[ch.ID]; ok || ch.LastMessageID == "" || compareIDs(ch.LastMessageID, floor) <= 0 {
			continue
		}
		queued += g.catchUpChannel(ctx, s, ch.ID, ch.ID, guild.ID, floor)
	}
	if queued > 0 {
		g.log.Info().Int("messages", queued).Str("guild", guild.ID).Msg("caught up on messages in conversations without a watermark")
	}
}

// catchUpChannel queues the messages of one channel after the given id, in
// display order, and returns how many it queued.
func (g *Gateway) catchUpChannel(ctx context.Context, s *discordgo.Session, conv, channelID, guildID, after string) int {
	msgs, err := s.ChannelMessages(channelID, catchUpLimit, "", after, "", discordgo.WithContext(ctx))
	if err != nil {
		g.c.countError(err)
		g.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on missed messages")
		return 0
	}
	slices.SortFunc(msgs, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
	for _, m := range msgs {
		m.GuildID = guildID
		g.push(channelID, "catch_up", func(ctx context.Context) { g.onMessage(ctx, m) })
	}
	return len(msgs)
}

// floorBefore is the snowflake catchUpMargin before the newest watermark,
// or "" when there is none (a new store has nothing to catch up on).
func floorBefore(marks map[string]string) string {
	newest := ""
	for _, id := range marks {
		if compareIDs(id, newest) > 0 {
			newest = id
		}
	}
	n, err := strconv.ParseUint(newest, 10, 64)
	if err != nil {
		return ""
	}
	margin := uint64(catchUpMargin.Milliseconds()) << 22
	if n <= margin {
		return "0"
	}
	return strconv.FormatUint(n-margin, 10)
}

// compareIDs orders snowflakes.
func compareIDs(x, y string) int {
	if len(x) != len(y) {
		return len(x) - len(y)
	}
	return strings.Compare(x, y)
}

// admit applies discord.access to a message addressed to the bot: the
// policy (dm mode, allow and deny lists), then the turn budget. Operators
// are exempt. It returns "" to go on, else the inbound decision. The first
// turn refused for the budget gets one short public notice through
// Outbound (so it is in the conversation's transcript), later ones silence
// until the budget resets.
func (g *Gateway) admit(ctx context.Context, m *discordgo.Message, conv binding.ConversationRef) string {
	if g.d.Authority.Operator(ctx, authz.Actor{UserID: m.Author.ID, Where: conv}, conv) {
		return ""
	}
	sub := authz.Subject{UserID: m.Author.ID, ChannelID: m.ChannelID, ParentID: conv.ParentConversationID, DM: m.GuildID == ""}
	if sub.DM {
		sub.SharesGuild = func() bool { return g.c.sharesGuild(ctx, m.Author.ID) }
	} else if m.Member != nil {
		sub.Roles = m.Member.Roles
	} else { // catch-up reads carry no member
		mem, ok, err := g.c.member(ctx, g.c.session(), m.GuildID, m.Author.ID)
		if err != nil || !ok {
			g.log.Warn().Err(err).Str("message", m.ID).Msg("access: author's roles unknown; message refused")
			return inAccessDenied
		}
		sub.Roles = mem.Roles
	}
	a := g.gate.Admit(sub, m.GuildID)
	if a.OK {
		return ""
	}
	if a.Reason != "" {
		g.log.Info().Str("message", m.ID).Str("user", m.Author.ID).Str("reason", a.Reason).Msg("access: message refused")
		return inAccessDenied
	}
	d := a.Limit
	g.log.Info().Str("message", m.ID).Str("user", m.Author.ID).Str("scope", d.Scope).Time("until", d.Until).Bool("notice", d.Notify).Msg("access: over the turn budget")
	if d.Notify {
		_, err := g.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "ratelimit:" + m.ID, Target: conv, Text: g.limitNotice(displayName(m), d),
			Producer: delivery.Producer{Source: transcript.SourceNotice}}, nil)
		if err != nil {
			g.log.Warn().Err(err).Str("message", m.ID).Msg("rate limit notice not delivered")
		}
	}
	return inRateLimited
}

// limitNotice is the one short notice of an exhausted budget: when the
// author can go on.
func (g *Gateway) limitNotice(name string, d authz.Decision) string {
	wait := max(d.Until.Sub(g.d.Clock.Now()).Round(time.Minute), time.Minute)
	lim := g.gate.Limits()
	what := fmt.Sprintf("%s, you have used your %d turns for %s", name, lim.Turns, session.FormatDuration(lim.Per))
	if d.Scope == "guild" {
		what = fmt.Sprintf("%s, this server has used its %d turns for %s", name, lim.GuildTurns, session.FormatDuration(lim.Per))
	}
	return fmt.Sprintf("⏳ %s; you can go on in %s (at %s UTC). Until then I will not answer.", what, session.FormatDuration(wait), d.Until.UTC().Format("15:04"))
}

// admitCommand applies discord.access to a slash command that starts model
// work (/spawn) for a caller who is no operator (core/command asks the
// authority first): it returns "" to go on, else the ephemeral refusal.
func (g *Gateway) admitCommand(ctx context.Context, v invocation) string {
	sub := authz.Subject{UserID: v.userID, ChannelID: v.in.ChannelID, ParentID: v.conv.ParentConversationID, DM: v.in.GuildID == ""}
	if sub.DM {
		sub.SharesGuild = func() bool { return g.c.sharesGuild(ctx, v.userID) }
	} else if v.in.Member != nil {
		sub.Roles = v.in.Member.Roles
	}
	a := g.gate.Admit(sub, v.in.GuildID)
	if !a.OK && a.Reason != "" {
		g.log.Info().Str("user", v.userID).Str("command", v.name).Str("reason", a.Reason).Msg("access: command refused")
		return "You may not start agent work here (access)."
	}
	if d := a.Limit; !a.OK {
		name := v.userID
		if v.in.Member != nil && v.in.Member.User != nil {
			name = v.in.Member.User.Username
		} else if v.in.User != nil {
			name = v.in.User.Username
		}
		return g.limitNotice(name, d)
	}
	return ""
}
