package discord

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
)

// ChatChanges records edits and deletions of displayed messages in the
// transcript that holds them (invariant 17). *transcript.Service
// implements it; it finds the session by message id itself.
type ChatChanges interface {
	Edit(ctx context.Context, messageID, editKey, text string) (bool, error)
	// Locate finds the session whose transcript holds a message.
	Locate(ctx context.Context, messageID string) (string, transcript.Entry, bool, error)
	Delete(ctx context.Context, messageID string) (bool, error)
	// DeleteConversation erases what a deleted conversation displayed, by
	// message id, in the given sessions (transcript.Service).
	DeleteConversation(ctx context.Context, convID string, keys []string, legacyKey string, legacySince time.Time) (int, error)
	// Displayed is the session's newest entries the chat still displays,
	// every generation (edits applied).
	Displayed(ctx context.Context, key string, n int) ([]transcript.Entry, error)
}

// changesWindow is how many of a conversation's newest model-visible
// entries catch-up compares with the channel (Discord returns at most 100
// messages a page; one page is read). Changes to older messages made while
// the bot was down are not found (docs/DECISIONS.md).
const changesWindow = 50

// changesPages bounds the pages of 100 messages catch-up reads from the
// window's oldest message on.
const changesPages = 5

// Change decisions (metric labels).
const (
	chEdited    = "edited"
	chRerun     = "edited-rerun"     // its turn was running: it runs again on the new text
	chReanswer  = "edited-reanswer"  // discord.edits: reprocess queued a new answer
	chMentioned = "edited-mentioned" // an unrouted message now mentions the bot: routed as new
	chDeleted   = "deleted"
	chUnknown   = "ignored-unknown"  // no transcript holds the message
	chNotAnEdit = "ignored-not-edit" // an embed unfurl, a pin, a bot's own edit
	chFailed    = "failed"
)

// onMessageUpdate applies a user's edit of a message a transcript holds.
// Discord also sends MESSAGE_UPDATE for embed unfurls and pins: only an
// update carrying content and an edited_timestamp, by a human author, is
// an edit. The bot's own edits are already written by their writer.
//
// What the edit does besides (issue 22): the message's turn, if its model
// call is still running, runs again on the new text; with discord.edits:
// reprocess, an answered message addressed to the bot is answered again;
// a message no transcript holds (it did not reach the bot) that now
// mentions the bot is routed as a new message would be (discord.access
// and the turn budget apply as to any turn).
func (g *Gateway) onMessageUpdate(ctx context.Context, m *discordgo.Message) string {
	botID, _ := g.c.ids()
	if g.d.Changes == nil || m == nil || m.EditedTimestamp == nil || m.Content == "" ||
		m.Author == nil || m.Author.ID == botID || m.Author.Bot || m.WebhookID != "" {
		return chNotAnEdit
	}
	editKey := m.EditedTimestamp.UTC().Format(time.RFC3339Nano)
	ok, err := g.d.Changes.Edit(ctx, m.ID, editKey, m.Content)
	switch {
	case err != nil:
		g.log.Error().Err(err).Str("message", m.ID).Msg("record edit")
		return chFailed
	case !ok:
		_, _, held, err := g.d.Changes.Locate(ctx, m.ID)
		if err != nil {
			g.log.Error().Err(err).Str("message", m.ID).Msg("look up edited message")
			return chFailed
		}
		if held || !g.mentionsBot(m) {
			return chUnknown // unchanged (a replay), or not addressed to the bot
		}
		g.log.Debug().Str("message", m.ID).Msg("edit added a mention: routed as a new message")
		g.d.Metrics.InboundDecision(g.route(ctx, m, true))
		return chMentioned
	}
	g.log.Debug().Str("message", m.ID).Str("channel", m.ChannelID).Msg("edit recorded")
	if g.d.Sessions == nil {
		return chEdited
	}
	if g.d.Sessions.MessageEdited(m.ID) {
		return chRerun
	}
	if g.opt.ReprocessEdits && g.reanswer(ctx, m, editKey) {
		return chReanswer
	}
	return chEdited
}

// reanswer queues a new answer to an edited message that is addressed to
// the bot, under discord.access and the turn budget like any turn.
func (g *Gateway) reanswer(ctx context.Context, m *discordgo.Message, editKey string) bool {
	conv, rec, bound, decision := g.addressed(m)
	if decision != "" {
		return false
	}
	if d := g.admit(ctx, m, conv); d != "" {
		g.d.Metrics.InboundDecision(d)
		return false
	}
	if bound {
		g.d.Bindings.Touch(rec.ID, g.d.Clock.Now())
	}
	ok, err := g.d.Sessions.Reanswer(ctx, g.sessionMessage(m, conv), editKey)
	if err != nil {
		g.log.Error().Err(err).Str("message", m.ID).Msg("re-answer an edited message")
		return false
	}
	return ok
}

// onMessagesDeleted applies the deletion of messages (by anyone): a turn
// such a message started and that has not sent its reply is cancelled
// (nothing is posted), the model no longer sees the messages and their
// stored text is erased. It first passes the conversation's send lock (a
// barrier, not held: the erasers take it themselves): a bot message
// displayed by a send still being committed (its entry not yet written) is
// found once the send finished.
func (g *Gateway) onMessagesDeleted(ctx context.Context, guildID, channelID string, ids []string) {
	if g.d.Changes == nil {
		return
	}
	if ref, ok := g.conversationOfChannel(guildID, channelID); ok && g.d.Outbound != nil {
		_ = g.d.Outbound.WithConversation(ref, func() error { return nil })
	}
	for _, id := range ids {
		if g.recordDeletion(ctx, id) {
			g.log.Debug().Str("message", id).Str("channel", channelID).Msg("deletion recorded")
		} else {
			g.log.Debug().Str("message", id).Str("channel", channelID).Msg("deleted message is in no transcript")
		}
	}
}

// recordDeletion cancels the turn of a deleted message, if one is still
// running, and records the deletion (erasing the text).
func (g *Gateway) recordDeletion(ctx context.Context, id string) bool {
	if g.d.Sessions != nil {
		g.d.Sessions.MessageDeleted(ctx, id)
	}
	ok, err := g.d.Changes.Delete(ctx, id)
	if err != nil {
		g.log.Error().Err(err).Str("message", id).Msg("record deletion")
	}
	return ok
}

// conversationOfChannel is the conversation a channel id shows: a guild
// channel or thread, or the DM of the user whose DM channel it is (false
// when the DM channel is not known).
func (g *Gateway) conversationOfChannel(guildID, channelID string) (binding.ConversationRef, bool) {
	if guildID != "" {
		return g.conversationOf(guildID, channelID, ""), true
	}
	var ref binding.ConversationRef
	found := false
	g.c.dms.Range(func(user, ch any) bool {
		if ch == channelID {
			ref, found = g.conversationOf("", channelID, user.(string)), true
			return false
		}
		return true
	})
	return ref, found
}

// onConversationDeleted applies the deletion of a whole thread or channel:
// every message it displayed leaves the history, by message id, in
// whichever session holds it (invariant 17): its own session's, the
// session it is bound to, and the sessions it was bound to before (an
// ended subagent binding's intro and completion); nothing another
// conversation displays (a /focus'ed session's entries shown in its
// channel) is touched. It runs before the binding ends.
func (g *Gateway) onConversationDeleted(ctx context.Context, channelID, parentID string) {
	if g.d.Changes == nil || g.d.Outbound == nil {
		return
	}
	ref := g.c.ref(channelID, parentID)
	// A barrier, as for a message deletion: a send still committing there
	// has written its entry before the sessions are read.
	_ = g.d.Outbound.WithConversation(ref, func() error { return nil })
	key, rec, bound := g.d.Outbound.SessionFor(ref)
	if key == "" {
		return
	}
	keys := []string{key}
	if g.d.Sessions != nil {
		keys = append(keys, g.d.Sessions.OwnSessions(ref)...)
	}
	if g.d.Bindings != nil {
		recs, err := g.d.Bindings.All(ctx)
		if err != nil {
			g.log.Error().Err(err).Str("channel", channelID).Msg("deleted conversation: list its bindings")
		}
		norm := ref.Normalize()
		for _, r := range recs {
			if c := r.Conversation.Normalize(); c.Channel == norm.Channel && c.ConversationID == norm.ConversationID {
				keys = append(keys, r.TargetSessionKey)
			}
		}
	}
	// Entries written before they named their conversation: the route rule.
	var since time.Time
	if bound {
		since = rec.BoundAt
	}
	n, err := g.d.Changes.DeleteConversation(ctx, ref.Normalize().ConversationID, keys, key, since)
	if err != nil {
		g.log.Error().Err(err).Str("channel", channelID).Msg("record deletion of a conversation")
		return
	}
	if n > 0 {
		g.log.Info().Str("channel", channelID).Int("messages", n).Msg("deleted conversation's messages left the history")
	}
}

// catchUpChanges applies the edits and deletions made while the bot was
// down in one conversation: the newest changesWindow visible entries of the
// sessions that displayed there are compared with the channel's newest 100
// messages - its own session's, and, when the conversation is bound, the
// bound session's entries written since the binding (its older ones were
// displayed elsewhere). An entry whose message (any part) is gone, and not
// older than the oldest message read, is deleted; a user entry whose
// message now shows other content is edited. It runs on the conversation's
// event queue, after the catch-up messages.
func (g *Gateway) catchUpChanges(ctx context.Context, s *discordgo.Session, conv, channelID, guildID, watermark string) {
	if g.d.Changes == nil || g.d.Outbound == nil || g.d.Sessions == nil {
		return
	}
	ref := g.c.ref(conv, "")
	if guildID != "" {
		ref = g.conversationOf(guildID, channelID, "")
	}
	type window struct {
		key   string
		since time.Time
	}
	// Its own sessions: every agent's (a route change leaves the earlier
	// messages in the agent's that answered then).
	var windows []window
	for _, key := range g.d.Sessions.OwnSessions(ref) {
		windows = append(windows, window{key: key})
	}
	if key, rec, bound := g.d.Outbound.SessionFor(ref); bound && !slices.ContainsFunc(windows, func(w window) bool { return w.key == key }) {
		windows = append(windows, window{key: key, since: rec.BoundAt})
	}
	var entries []transcript.Entry
	for _, w := range windows {
		es, err := g.d.Changes.Displayed(ctx, w.key, changesWindow)
		if err != nil {
			g.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on edits and deletions")
			return
		}
		for _, e := range es {
			if len(e.MessageIDs) > 0 && !e.At.Before(w.since) {
				entries = append(entries, e)
			}
		}
	}
	if len(entries) == 0 {
		return
	}
	// Read every message from the window's oldest on (a few pages at
	// most): whatever came after the window, each entry is judged against
	// a complete view of its part of the channel.
	oldest := entries[0].MessageIDs[0]
	for _, e := range entries {
		if compareIDs(e.MessageIDs[0], oldest) < 0 {
			oldest = e.MessageIDs[0]
		}
	}
	shown := map[string]*discordgo.Message{}
	after, complete := prevSnowflake(oldest), false
	for page := 0; page < changesPages; page++ {
		msgs, err := s.ChannelMessages(channelID, 100, "", after, "", discordgo.WithContext(ctx))
		if err != nil {
			g.c.countError(err)
			g.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on edits and deletions")
			return
		}
		for _, m := range msgs {
			shown[m.ID] = m
			if compareIDs(m.ID, after) > 0 {
				after = m.ID
			}
		}
		if len(msgs) < 100 {
			complete = true
			break
		}
	}
	// Past the pages read, the newest page: a long gap between the
	// window's oldest entry and the rest costs the entries in the gap only.
	newest, tail := after, ""
	if !complete {
		msgs, err := s.ChannelMessages(channelID, 100, "", "", "", discordgo.WithContext(ctx))
		if err != nil {
			g.c.countError(err)
			g.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on edits and deletions")
			return
		}
		for _, m := range msgs {
			shown[m.ID] = m
			if tail == "" || compareIDs(m.ID, tail) < 0 {
				tail = m.ID
			}
		}
	}
	// judged: every message of the range holding id was read.
	judged := func(id string) bool {
		return complete || compareIDs(id, newest) <= 0 || (tail != "" && compareIDs(id, tail) >= 0)
	}
	applied := 0
	for _, e := range entries {
		id := e.MessageIDs[0]
		if !judged(id) || !judged(e.MessageIDs[len(e.MessageIDs)-1]) {
			continue
		}
		gone := false
		for _, part := range e.MessageIDs {
			if shown[part] == nil {
				gone = true
			}
		}
		switch m := shown[id]; {
		case gone:
			if g.recordDeletion(ctx, id) {
				applied++
			}
		case e.Source == transcript.SourceUser && m.EditedTimestamp != nil && m.Content != "" && m.Content != e.Text:
			if ok, err := g.d.Changes.Edit(ctx, id, m.EditedTimestamp.UTC().Format(time.RFC3339Nano), m.Content); err != nil {
				g.log.Error().Err(err).Str("message", id).Msg("record edit found at catch-up")
			} else if ok {
				applied++
				if g.d.Sessions != nil {
					g.d.Sessions.MessageEdited(id) // a resumed turn still running runs again
				}
			}
		}
	}
	if applied > 0 {
		g.log.Info().Str("conversation", conv).Int("changes", applied).Msg("applied edits and deletions made while down")
	}
	g.catchUpEditedMentions(ctx, shown, guildID, watermark)
}

// catchUpEditedMentions routes the messages up to the watermark that were
// edited after it was taken, now mention the bot and are in no transcript:
// an edit made while down that added a mention starts a turn as a live one
// would. Messages after the watermark are the missed ones, taken next as
// they show now.
func (g *Gateway) catchUpEditedMentions(ctx context.Context, shown map[string]*discordgo.Message, guildID, watermark string) {
	since, err := discordgo.SnowflakeTimestamp(watermark)
	if err != nil {
		return
	}
	botID, _ := g.c.ids()
	var ms []*discordgo.Message
	for _, m := range shown {
		if m.EditedTimestamp != nil && m.EditedTimestamp.After(since) && compareIDs(m.ID, watermark) <= 0 &&
			m.Author != nil && m.Author.ID != botID && !m.Author.Bot && m.WebhookID == "" && g.mentionsBot(m) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
	for _, m := range ms {
		if _, _, held, err := g.d.Changes.Locate(ctx, m.ID); err != nil || held {
			continue
		}
		m.GuildID = guildID
		g.log.Info().Str("message", m.ID).Msg("an edit made while down added a mention: routed as a new message")
		g.d.Metrics.InboundDecision(g.route(ctx, m, true))
	}
}

// prevSnowflake is the id just before id (for an inclusive "after" read).
func prevSnowflake(id string) string {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return "0"
	}
	return strconv.FormatUint(n-1, 10)
}
