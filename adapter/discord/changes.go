package discord

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// ChatChanges records edits and deletions of displayed messages in the
// transcript that holds them (invariant 17). *transcript.Service
// implements it; it finds the session by message id itself.
type ChatChanges interface {
	Edit(ctx context.Context, messageID, editKey, text string) (bool, error)
	Delete(ctx context.Context, messageID string) (bool, error)
	DeleteDisplayed(ctx context.Context, key string, since time.Time) (int, error)
	// History is the session's model-visible window (edits applied).
	History(ctx context.Context, key string, n int) ([]transcript.Entry, error)
}

// changesWindow is how many of a conversation's newest model-visible
// entries catch-up compares with the channel (Discord returns at most 100
// messages a page; one page is read). Changes to older messages made while
// the bot was down are not found (docs/DECISIONS.md).
const changesWindow = 50

// Change decisions (metric labels).
const (
	chEdited    = "edited"
	chDeleted   = "deleted"
	chUnknown   = "ignored-unknown"  // no transcript holds the message
	chNotAnEdit = "ignored-not-edit" // an embed unfurl, a pin, a bot's own edit
	chFailed    = "failed"
)

// onMessageUpdate applies a user's edit of a message a transcript holds.
// Discord also sends MESSAGE_UPDATE for embed unfurls and pins: only an
// update carrying content and an edited_timestamp, by a human author, is
// an edit. The bot's own edits are already written by their writer.
func (a *Adapter) onMessageUpdate(ctx context.Context, m *discordgo.Message) string {
	botID, _ := a.ids()
	if a.d.Changes == nil || m == nil || m.EditedTimestamp == nil || m.Content == "" ||
		m.Author == nil || m.Author.ID == botID || m.Author.Bot || m.WebhookID != "" {
		return chNotAnEdit
	}
	ok, err := a.d.Changes.Edit(ctx, m.ID, m.EditedTimestamp.UTC().Format(time.RFC3339Nano), m.Content)
	switch {
	case err != nil:
		a.log.Error().Err(err).Str("message", m.ID).Msg("record edit")
		return chFailed
	case !ok:
		return chUnknown
	}
	a.log.Debug().Str("message", m.ID).Str("channel", m.ChannelID).Msg("edit recorded")
	return chEdited
}

// onMessagesDeleted applies the deletion of messages (by anyone): the
// model no longer sees them and their stored text is erased. It first
// passes the conversation's send lock (a barrier, not held: the erasers
// take it themselves): a bot message displayed by a send still being
// committed (its entry not yet written) is found once the send finished.
func (a *Adapter) onMessagesDeleted(ctx context.Context, guildID, channelID string, ids []string) {
	if a.d.Changes == nil {
		return
	}
	if ref, ok := a.conversationOfChannel(guildID, channelID); ok && a.d.Outbound != nil {
		_ = a.d.Outbound.WithConversation(ref, func() error { return nil })
	}
	for _, id := range ids {
		ok, err := a.d.Changes.Delete(ctx, id)
		switch {
		case err != nil:
			a.log.Error().Err(err).Str("message", id).Msg("record deletion")
		case ok:
			a.log.Debug().Str("message", id).Str("channel", channelID).Msg("deletion recorded")
		}
	}
}

// conversationOfChannel is the conversation a channel id shows: a guild
// channel or thread, or the DM of the user whose DM channel it is (false
// when the DM channel is not known).
func (a *Adapter) conversationOfChannel(guildID, channelID string) (binding.ConversationRef, bool) {
	if guildID != "" {
		return a.conversationOf(guildID, channelID, ""), true
	}
	var ref binding.ConversationRef
	found := false
	a.dms.Range(func(user, ch any) bool {
		if ch == channelID {
			ref, found = a.conversationOf("", channelID, user.(string)), true
			return false
		}
		return true
	})
	return ref, found
}

// onConversationDeleted applies the deletion of a whole thread or channel:
// every message the session routed to it displayed there is deleted. For a
// bound thread that is what the session displayed since the binding (its
// earlier entries were displayed elsewhere); for an unbound channel or
// thread, its own session's displayed messages. It runs before the binding
// ends, while the route still names the session.
func (a *Adapter) onConversationDeleted(ctx context.Context, channelID, parentID string) {
	if a.d.Changes == nil || a.d.Outbound == nil {
		return
	}
	ref := a.ref(channelID, parentID)
	// A barrier, as for a message deletion: a send still committing there
	// has written its entry before the session is read.
	_ = a.d.Outbound.WithConversation(ref, func() error { return nil })
	key, rec, bound := a.d.Outbound.SessionFor(ref)
	if key == "" {
		return
	}
	var since time.Time
	if bound {
		since = rec.BoundAt
	}
	n, err := a.d.Changes.DeleteDisplayed(ctx, key, since)
	if err != nil {
		a.log.Error().Err(err).Str("channel", channelID).Msg("record deletion of a conversation")
		return
	}
	if n > 0 {
		a.log.Info().Str("channel", channelID).Int("messages", n).Msg("deleted conversation's messages left the history")
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
func (a *Adapter) catchUpChanges(ctx context.Context, s *discordgo.Session, conv, channelID, guildID string) {
	if a.d.Changes == nil || a.d.Outbound == nil || a.d.Sessions == nil {
		return
	}
	ref := a.ref(conv, "")
	if guildID != "" {
		ref = a.conversationOf(guildID, channelID, "")
	}
	type window struct {
		key   string
		since time.Time
	}
	windows := []window{{key: sessionkey.ForConversation(a.d.Sessions.DefaultAgent().ID, ref)}}
	if key, rec, bound := a.d.Outbound.SessionFor(ref); bound && key != windows[0].key {
		windows = append(windows, window{key: key, since: rec.BoundAt})
	}
	var entries []transcript.Entry
	for _, w := range windows {
		es, err := a.d.Changes.History(ctx, w.key, changesWindow)
		if err != nil {
			a.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on edits and deletions")
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
	msgs, err := s.ChannelMessages(channelID, 100, "", "", "", discordgo.WithContext(ctx))
	if err != nil {
		a.countError(err)
		a.log.Warn().Err(err).Str("conversation", conv).Msg("catch up on edits and deletions")
		return
	}
	if len(msgs) == 0 {
		return
	}
	shown := make(map[string]*discordgo.Message, len(msgs))
	oldest := msgs[0].ID
	for _, m := range msgs {
		shown[m.ID] = m
		if compareIDs(m.ID, oldest) < 0 {
			oldest = m.ID
		}
	}
	full := len(msgs) == 100 // a full page: older messages were not read
	applied := 0
	for _, e := range entries {
		id := e.MessageIDs[0]
		if full && compareIDs(id, oldest) < 0 {
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
			if ok, err := a.d.Changes.Delete(ctx, id); err != nil {
				a.log.Error().Err(err).Str("message", id).Msg("record deletion found at catch-up")
			} else if ok {
				applied++
			}
		case e.Source == transcript.SourceUser && m.EditedTimestamp != nil && m.Content != "" && m.Content != e.Text:
			if ok, err := a.d.Changes.Edit(ctx, id, m.EditedTimestamp.UTC().Format(time.RFC3339Nano), m.Content); err != nil {
				a.log.Error().Err(err).Str("message", id).Msg("record edit found at catch-up")
			} else if ok {
				applied++
			}
		}
	}
	if applied > 0 {
		a.log.Info().Str("conversation", conv).Int("changes", applied).Msg("applied edits and deletions made while down")
	}
}
